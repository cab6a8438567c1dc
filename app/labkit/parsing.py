"""One parser for the page, the htmx fragment and the JSON API: the same query gives the same
state, or the same 422 with the same messages, on every route.

Rules: keys that are no control are ignored; an empty value means "not given" (an HTML form
sends empty number fields); a key repeated with different values is an error (which one was
meant?), repeated with equal values it counts once; a number is written in ASCII digits with
an optional leading minus, a decimal point and an exponent (pydantic alone would also read
``+4``, `` 8 `` and ``1_0``), a whole number's control taking one whose value is whole
(``4e12``). Messages name the control by its label and state its bounds,
in plain words. Results are cached by the canonical query (labs are pure).

Routes that are no lab view (EP08's planner, EP12's cheat sheet) parse with the same rules
through a :class:`QueryForm`.
"""

import math
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from functools import lru_cache
from types import NoneType
from typing import Annotated, Any, Literal, get_args, get_origin

import annotated_types
from pydantic import BaseModel, ValidationError

from app.labkit.view import FORM, LabView
from labs.core.errors import LabInputError

CACHE_SIZE = 8  # per view. Small on purpose: a largest pipeline result holds 65k events, and
# every object kept alive lengthens the collector's full passes, which pause every thread.
# Of those, at most HEAVY_KEPT results that took HEAVY_SECONDS or more to compute: eight of
# the largest pipeline results are 520k objects, a 116 ms full collection with every thread
# stopped (/healthz included); two are a quarter of that. Their rendered answers stay in the
# response cache (app/response_cache.py), which holds bytes the collector never walks.
HEAVY_KEPT = 2
HEAVY_SECONDS = 0.05


# What a number control takes as text: ASCII digits, an optional minus, a whole number with a
# zero fraction at most ("8.0"), a decimal with an exponent ("7e9", "0.85").
WHOLE_TEXT = re.compile(r"-?[0-9]+(\.0+)?")
NUMBER_TEXT = re.compile(r"-?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?")


@dataclass(frozen=True)
class QueryForm:
    """What the parser needs of a form that is no lab view: its query model and its labels."""

    query_model: type[BaseModel]
    labels: Mapping[str, str] = field(default_factory=dict)

    def label(self, name: str) -> str:
        return self.labels.get(name, name)


@dataclass(frozen=True)
class State:
    """A valid query and the lab's result for it: what one diagram draws."""

    query: BaseModel
    result: Any


def _numbers(info) -> tuple[set, list, frozenset[str]]:
    """(the number types a control takes, their metadata, the words it takes beside them): a
    control like ``Annotated[int, Field(ge=1)] | Literal["best"]`` (EP11's interval, round-20
    cold reading R, finding 4) is a whole number with its bounds, or the word."""
    args = get_args(info.annotation) if get_origin(info.annotation) is not Literal else ()
    kinds, metadata, words = set(), list(info.metadata), set()
    for arg in args:
        if get_origin(arg) is Literal:
            words |= {a for a in get_args(arg) if isinstance(a, str)}
        elif get_origin(arg) is Annotated:
            kinds.add(get_args(arg)[0])
            metadata += [m for extra in arg.__metadata__ for m in getattr(extra, "metadata", [])]
        else:
            kinds.add(arg)
    return (kinds - {NoneType} or {info.annotation}), metadata, frozenset(words)


def _bounds(info) -> tuple[Any, Any]:
    low = high = None
    for meta in _numbers(info)[1]:
        if isinstance(meta, annotated_types.Ge | annotated_types.Gt):
            low = getattr(meta, "ge", getattr(meta, "gt", None))
        if isinstance(meta, annotated_types.Le | annotated_types.Lt):
            high = getattr(meta, "le", getattr(meta, "lt", None))
    return low, high


def _num(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else f"{value:g}"


def _is_int(info) -> bool:
    return _numbers(info)[0] == {int}


def field_message(view: LabView, name: str, error_type: str = "", raw: str = "") -> str:
    """A plain message for a bad control: its label, what it must be, its bounds."""
    info = view.query_model.model_fields[name]
    label = view.label(name)
    choices = [a for arg in get_args(info.annotation) for a in (get_args(arg) or [arg])
               if isinstance(a, str)]
    kinds, metadata, words = _numbers(info)
    if ("literal" in error_type or "enum" in error_type) and not (words and _is_int(info)):
        return f"{label} must be one of: {', '.join(choices)}"
    if "bool" in error_type:
        return f"{label} must be true or false"
    if "string" in error_type:
        return f"{label} must be at most {info.metadata[0].max_length} characters" \
            if info.metadata and hasattr(info.metadata[0], "max_length") else f"{label} is too long"
    low, high = _bounds(info)
    kind = "a whole number" if _is_int(info) else "a number"
    if _is_int(info):  # a whole number's bounds as whole numbers, never "1e+08" (round-14
        # cold reading of EP11, finding 12a: the bounds read in the notation it refuses)
        low, high = (int(b) if isinstance(b, float) and b.is_integer() else b
                     for b in (low, high))
    span = ""
    if low is not None and high is not None:
        above = "above" if any(isinstance(m, annotated_types.Gt) for m in metadata) else "from"
        span = f" {above} {_num(low)} {'to' if above == 'from' else 'up to'} {_num(high)}"
    return f"{label} must be {kind}{span}" + "".join(f", or {w}" for w in sorted(words))


def _number_text(info) -> re.Pattern | None:
    """The pattern a number control's text must match (None: not a number control)."""
    kinds = _numbers(info)[0]
    if kinds == {int}:
        return WHOLE_TEXT
    if kinds <= {int, float}:
        return NUMBER_TEXT
    return None


def _whole_number(text: str) -> str | None:
    """A number written with a fraction or an exponent ("4e12", "2.5e3") as the whole number's
    digits, or None where it is not whole or is past any control's bounds (an exponent of
    thousands would take that many digits to write out). Round-16 cold reading of EP11, 11c:
    /api/failures?storage_bw=4e12 was refused, where a number control (EP01's params) takes
    "7e9"; the bounds are the model's, checked after."""
    value = Decimal(text)
    if abs(value.adjusted()) > 30 or value != value.to_integral_value():
        return None
    return str(int(value))


@lru_cache(maxsize=64)  # one per query model: a few dozen
def _controls(model: type[BaseModel]) -> dict[str, tuple[bool, re.Pattern | None]]:
    """Each control of a query model: (whether it takes many values, the pattern its text must
    match or None), read from its annotation once, not per request (issue 31: the
    playground's hundred controls were a tenth of its answer's CPU)."""
    return {name: (getattr(info.annotation, "__origin__", None) is list, _number_text(info),
                   _numbers(info)[2])
            for name, info in model.model_fields.items()}


def _collect(view: LabView, items: Iterable[tuple[str, str]]) -> tuple[dict, dict, dict]:
    """(data to validate, raw strings as given, errors) from (key, value) pairs."""
    fields = _controls(view.query_model)
    values: dict[str, list[str]] = {}
    for key, value in items:
        if key in fields and value != "":
            values.setdefault(key, []).append(value)
    data, raw, errors = {}, {}, {}
    for key, given in values.items():
        raw[key] = given[-1]
        multi, text, words = fields[key]
        if multi:
            data[key] = given  # a multi-valued control keeps every value
        elif len(set(given)) == 1 and given[0] in words:  # a number control's word ("best")
            data[key] = given[0]
        elif len(set(given)) > 1:
            errors[key] = f"{view.label(key)} was given {len(given)} different values " \
                          f"({', '.join(given)}): give it once"
        elif isinstance(given[0], str) and text is WHOLE_TEXT \
                and not text.fullmatch(given[0]) and NUMBER_TEXT.fullmatch(given[0]):
            whole = _whole_number(given[0])  # "4e12": a whole number with an exponent
            if whole is None:
                errors[key] = field_message(view, key, "int_from_float", given[0])
            else:
                data[key] = whole
        elif isinstance(given[0], str) and text is not None \
                and not text.fullmatch(given[0]):  # (a lab's own cases give numbers)
            errors[key] = field_message(view, key, "number_parsing", given[0])
        else:
            data[key] = given[0]
    return data, raw, errors


def single(items: Iterable[tuple[str, str]], name: str, label: str) -> tuple[str | None,
                                                                          str | None]:
    """(value or None, message or None) of one plain query parameter, by the same rules: an
    empty value is not given, a repeat must repeat the same value."""
    given = [v for k, v in items if k == name and v != ""]
    if len(set(given)) > 1:
        return None, f"{label} was given {len(given)} different values ({', '.join(given)}): " \
                     "give it once"
    return (given[0] if given else None), None


def validate(view: LabView, items: Iterable[tuple[str, str]]) -> tuple[BaseModel | None,
                                                                        dict[str, str],
                                                                        dict[str, str]]:
    """(query or None, {control: message}, {control: raw string given})."""
    data, raw, errors = _collect(view, items)
    if errors:
        return None, errors, raw
    try:
        query = view.query_model.model_validate(data)
    except ValidationError as exc:
        for err in exc.errors(include_url=False):
            name = str(err["loc"][0]) if err["loc"] else FORM
            if name in view.query_model.model_fields and err["type"] == "value_error":
                # a field validator's own sentence (e.g. an unknown model), said as written
                errors.setdefault(name, str(err["msg"]).removeprefix("Value error, "))
            elif name in view.query_model.model_fields:
                errors.setdefault(name, field_message(view, name, err["type"], raw.get(name, "")))
            else:
                errors.setdefault(FORM, err["msg"])
        return None, errors, raw
    for name, value in query:
        # pydantic reads "nan" and "inf" as floats; no lab control means either.
        if isinstance(value, float) and not math.isfinite(value):
            errors[name] = field_message(view, name, "finite_number")
    return (None if errors else query), errors, raw


def canonical(query: BaseModel) -> tuple:
    """The query as a hashable key: every control's value, defaults included."""
    return tuple(sorted((k, repr(v)) for k, v in query.model_dump().items()))


class _LRU:
    """A small thread-safe LRU of lab outcomes (a result, or the LabInputError it raised)."""

    def __init__(self, maxsize: int, heavy_kept: int = HEAVY_KEPT) -> None:
        self.maxsize, self.data, self.lock = maxsize, OrderedDict(), threading.Lock()
        self.heavy_kept, self.heavy = heavy_kept, set()

    def get(self, key):
        with self.lock:
            if key in self.data:
                self.data.move_to_end(key)
                return self.data[key]
            return None

    def put(self, key, value, heavy: bool = False) -> None:
        with self.lock:
            self.data[key] = value
            self.data.move_to_end(key)
            (self.heavy.add if heavy else self.heavy.discard)(key)
            while len(self.heavy) > self.heavy_kept:  # the least recently used heavy one
                oldest = next(k for k in self.data if k in self.heavy)
                del self.data[oldest]
                self.heavy.discard(oldest)
            while len(self.data) > self.maxsize:
                oldest, _ = self.data.popitem(last=False)
                self.heavy.discard(oldest)

    def clear(self) -> None:
        with self.lock:
            self.data.clear()
            self.heavy.clear()


CACHES: dict[str, _LRU] = {}


def run_cached(view: LabView, query: BaseModel) -> tuple[Any, dict[str, str]]:
    """(result, {}) or (None, {control or _form: message}); the engine's field names are
    mapped to the view's controls, and an error naming none of them is the form's."""
    cache = CACHES.setdefault(view.cache_name or view.name, _LRU(CACHE_SIZE))
    key = canonical(query)
    outcome = cache.get(key)
    if outcome is None:
        start = time.thread_time()  # CPU, not wall: a busy machine does not make it heavy
        try:
            outcome = ("ok", view.run(query))
        except LabInputError as exc:
            outcome = ("error", exc)
        cache.put(key, outcome, heavy=time.thread_time() - start >= HEAVY_SECONDS)
    status, value = outcome
    if status == "ok":
        return value, {}
    found = {}
    for named in (value.field, *value.also):  # a clash of two controls is said by both
        name = view.aliases.get(named, named)
        found.setdefault(name if name in view.query_model.model_fields else FORM, value.message)
    return None, found


def parse(view: LabView, items: Iterable[tuple[str, str]]) -> tuple[State | None,
                                                                     dict[str, str],
                                                                     dict[str, str]]:
    """Validate a query and run the lab: (state, {}, raw) or (None, errors, raw)."""
    items = list(items)
    query, errors, raw = validate(view, items)
    if query is None:
        return None, errors, raw
    result, errors = run_cached(view, query)
    return (None if errors else State(query, result)), errors, raw


def parse_with_fallback(view: LabView, items: Iterable[tuple[str, str]]):
    """Like parse, but always a state to draw: drop the bad controls, else the defaults.
    Returns (state, errors, raw strings of the bad controls)."""
    items = list(items)
    state, errors, raw = parse(view, items)
    bad_raw = {k: v for k, v in raw.items() if k in errors}
    if state is not None:
        return state, errors, bad_raw
    kept = [(k, v) for k, v in items if k not in errors]
    state, _, _ = parse(view, kept)
    if state is None:
        state, _, _ = parse(view, [])
    assert state is not None, f"{view.name}: the default query must be valid"
    return state, errors, bad_raw
