"""Validators every lab shares: one rule, one message, for whole numbers and numbers.

``whole`` and ``number`` check a value against a closed range and raise ``LabInputError``
naming the field. What the message says is the caller's ``says``: a ``str.format`` template
of ``what`` (the noun phrase), ``low``, ``high`` and ``value``. The wordings below are those
the pages and the API have always shown (tests/ and tools/snapshot.py pin them); a new check
takes the first of each.
"""

from __future__ import annotations

import math
from collections.abc import Collection

from labs.core.errors import LabInputError

# Whole numbers. WHOLE: every layout degree and most controls; the others, one lab each.
WHOLE = "{what} must be a whole number from {low:,} to {high:,} (got {value!r})"
WHOLE_BARE = "{what} must be a whole number from {low:,} to {high:,}"  # EP12's example
WHOLE_PLAIN = "{what} must be a whole number from {low} to {high}"  # EP02
WHOLE_SENTENCE = "The {what} must be a whole number from {low:,} to {high:,}; got {value!r}."
WHOLE_COUNT = "The number of {what} must be a whole number from {low} to {high}; got {value!r}."
# Numbers. NUMBER: EP02 and EP07; FRACTION: a share of a peak (EP04's MFU).
NUMBER = "{what} must be a number from {low:g} to {high:g}"
FRACTION = "{what} must be a fraction from {low} to {high}"
# EP05's timeline costs, 0 allowed or not, and what goes on its wire, from low or above it.
COST_FROM_ZERO = "The {what} must be a number between 0 (inclusive) and {high:g}; got {value!r}."
COST_ABOVE_ZERO = "The {what} must be a number between 0 (exclusive) and {high:g}; got {value!r}."
SEND_FROM = "The {what} must be a number from {low:g} up to {high:g}; got {value!r}."
SEND_ABOVE = "The {what} must be a number above {low:g} up to {high:g}; got {value!r}."
# Choices. ONE_OF: a control's options; UNKNOWN: an id in a table of presets; UNKNOWN_BARE: a
# name the engine knows (collectives, schedules), worded as the ledger and the recipe word it.
ONE_OF = "{what} must be one of {choices}"
UNKNOWN = "unknown {what} {value!r}; choose one of: {choices}"
UNKNOWN_BARE = "unknown {what} {value!r}; choose one of {choices}"


def is_int(value: object) -> bool:
    """A whole number that is not a bool (JSON true/false are not counts)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: object) -> bool:
    """A finite int or float that is not a bool (an int of any size is finite)."""
    return is_int(value) or isinstance(value, float) and math.isfinite(value)


def flag(field: str, value: object, what: str) -> bool:
    """``value`` if it is true or false (not 0 or 1), else ``LabInputError(field)``."""
    if not isinstance(value, bool):
        raise LabInputError(field, f"{what} must be true or false")
    return value


def whole(field: str, value: object, low: int, high: int, what: str, says: str = WHOLE) -> int:
    """``value`` if it is a whole number in [low, high], else ``LabInputError(field)``."""
    if not is_int(value) or not low <= value <= high:
        raise LabInputError(field, says.format(what=what, low=low, high=high, value=value))
    return value


def number(field: str, value: object, low: float, high: float, what: str,
           says: str = NUMBER, *, low_ok: bool = True) -> float:
    """``value`` as a float if it is a finite number in [low, high] (or (low, high] when not
    ``low_ok``), else ``LabInputError(field)``."""
    if not is_number(value) or not low <= value <= high or (value == low and not low_ok):
        raise LabInputError(field, says.format(what=what, low=low, high=high, value=value))
    return float(value)


def one_of(field: str, value: object, choices: Collection, what: str, says: str = ONE_OF):
    """``value`` if it is one of ``choices`` (a tuple, or a dict's keys), else
    ``LabInputError(field)`` listing them."""
    if value not in choices:
        raise LabInputError(field, says.format(what=what, value=value,
                                               choices=", ".join(map(str, choices))))
    return value
