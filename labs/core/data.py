"""Preset data files (``labs/presets/*.json``) loaded into frozen dataclasses by id."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import fields
from functools import cache
from pathlib import Path
from typing import Any, Generic, TypeVar

from labs.core.validate import UNKNOWN, one_of

T = TypeVar("T")

DATA_DIR = Path(__file__).resolve().parent.parent / "presets"


def read(filename: str) -> Any:
    """A preset file's entries, as written."""
    with open(DATA_DIR / filename, encoding="utf-8") as fh:
        return json.load(fh)


def load(filename: str, cls: type) -> dict[str, Any]:
    """A preset file's entries as ``cls`` by id, refusing unknown keys and duplicate ids."""
    entries = read(filename)
    known = {f.name for f in fields(cls)}
    loaded: dict[str, Any] = {}
    for entry in entries:
        unknown = set(entry) - known
        if unknown:
            raise ValueError(f"{filename}: unknown keys {sorted(unknown)} in {entry.get('id')}")
        spec = cls(**entry)
        if spec.id in loaded:
            raise ValueError(f"{filename}: duplicate id {spec.id}")
        loaded[spec.id] = spec
    return loaded


class Presets(Generic[T]):
    """One table of presets by id, built on first use: ``all()`` a fresh dict in file order
    (the entries are shared and frozen), ``get(id)`` one entry, or ``LabInputError(field)``
    naming every id (``what``: the noun of the message)."""

    def __init__(self, build: Callable[[], dict[str, T]], field: str, what: str,
                 says: str = UNKNOWN) -> None:
        self._build = cache(build)
        self.field, self.what, self.says = field, what, says

    def __contains__(self, key: object) -> bool:
        return key in self._build()

    def all(self) -> dict[str, T]:
        return dict(self._build())

    def get(self, key: str) -> T:
        found = self._build()
        return found[one_of(self.field, key, found, self.what, self.says)]
