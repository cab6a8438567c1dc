"""Validators every lab shares: one rule, one message, for whole numbers and numbers."""

from __future__ import annotations


def is_int(value: object) -> bool:
    """A whole number that is not a bool (JSON true/false are not counts)."""
    return isinstance(value, int) and not isinstance(value, bool)
