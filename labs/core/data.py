"""Preset data files (``labs/presets/*.json``) loaded into frozen dataclasses by id."""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path
from typing import Any

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
