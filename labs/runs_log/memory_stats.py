"""``torch.cuda.memory_stats()`` as JSON (``json.dumps(torch.cuda.memory_stats())``, or the
nested form of ``memory_stats_as_nested_dict()``): the caching allocator's peaks. Keys as
PyTorch documents them (torch/cuda/memory.py ``memory_stats``): ``allocated_bytes.all.peak``
(tensors), ``reserved_bytes.all.peak`` (the allocator's segments), ``num_alloc_retries``.
Parsed with ``json.loads`` only: text, never a pickle."""

from __future__ import annotations

import json

from labs.core.errors import LabInputError
from labs.runs_log.inputs import Measured

FIELD = "memory_stats"
KEYS = ("allocated_bytes.all.peak", "reserved_bytes.all.peak")


def _get(stats: dict, key: str) -> object:
    if key in stats:
        return stats[key]
    node: object = stats
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def looks_like(text: str) -> bool:
    return text.lstrip().startswith("{") and "allocated_bytes" in text


def read(text: str) -> tuple[Measured, int]:
    """(the peaks as Measured, alloc retries) or a 422 naming the missing keys."""
    try:
        stats = json.loads(text)
    except (ValueError, RecursionError):
        raise LabInputError(FIELD, "not JSON: paste json.dumps(torch.cuda.memory_stats())") \
            from None
    if not isinstance(stats, dict):
        raise LabInputError(FIELD, "expected a JSON object, as torch.cuda.memory_stats() "
                                   "returns")
    found = {}
    for key in KEYS:
        got = _get(stats, key)
        if isinstance(got, bool) or not isinstance(got, int | float) or not 0 <= got < 1e15:
            found[key] = None
        else:
            found[key] = float(got)
    missing = [k for k, v in found.items() if v is None]
    if missing:
        raise LabInputError(FIELD, f"no {' or '.join(missing)} (bytes, a number): looked for "
                                   "the keys torch.cuda.memory_stats() returns")
    retries = _get(stats, "num_alloc_retries")
    return (Measured(peak_allocated_bytes=found[KEYS[0]], peak_reserved_bytes=found[KEYS[1]]),
            int(retries) if isinstance(retries, int) and not isinstance(retries, bool) else 0)
