"""Number controls at their bounds, and the values that need a partner, crossed pairwise (issue 31).

tests/app/test_pairwise.py crosses every /api/ route's enumerated and boolean controls; it never
moves a number, and never reaches a value the lab takes only beside another: an interleaved
schedule needs virtual stages (``virtual`` >= 2), expert parallelism a mixture-of-experts model,
and the degrees must multiply to the cluster's GPUs. So whole regions of valid state went unasked
(EP04's page drew a 500 for TP = 3 of GPT-3's 96 heads, a degree off the powers of two). Here,
for each route and each of its states (the route's default, MoE, MLA: test_pairwise.MOE, MLA):

1. each integer or float control at its minimum and maximum (an exclusive minimum: a step
   above it), and each partner value (a layout whose degrees multiply to 8 or 16 GPUs, EP
   among them; a schedule with the virtual stages it needs, with a layout where the state's own
   has too few stages), is asked alone; what the route takes joins the crossing;
2. one covering array (greedy all-pairs, test_pairwise.covering_rows) over those values and the
   enumerated and boolean ones: every pair of values meets in some row. A row the route takes is
   asked of its lab page's htmx fragment too.

No answer is a 5xx, and a route with a partner control takes some of its partner values (a
crossing that only ever met refusals would pass while reaching nothing). A 4xx is not checked
for naming both controls here: test_pairwise.py does, for the pairs it crosses.
"""

from __future__ import annotations

from itertools import combinations

import pytest

from tests.app.test_pairwise import ROUTES, SCHEMA, Asker, covering_rows, pair_key

# Degrees that multiply to 8 or 16 GPUs (nodes of 8), EP dividing the data-parallel ranks (Megatron:
# EP groups are carved out of DP x CP); each route keeps those it takes alone.
LAYOUTS = [
    dict(zip(("nodes", "tp", "pp", "dp", "cp", "ep"), d, strict=True)) for d in (
        (1, 1, 1, 8, 1, 1), (1, 8, 1, 1, 1, 1), (1, 2, 2, 2, 1, 2), (1, 1, 2, 4, 1, 4),
        (1, 2, 1, 4, 1, 4), (2, 2, 2, 4, 1, 4), (2, 1, 4, 2, 2, 4), (2, 4, 2, 2, 1, 2),
        (2, 1, 1, 16, 1, 8), (2, 2, 1, 4, 2, 8), (2, 8, 2, 1, 1, 1), (2, 3, 1, 5, 1, 1))
]
for layout in LAYOUTS:
    layout.update(gpus=8 * layout["nodes"], gpus_per_node=8, train_gpus=8 * layout["nodes"])
SCHEDULES = [{"schedule": s, "virtual": v} for s, v in (
    ("interleaved-1f1b", 2), ("interleaved-1f1b", 4), ("looped-bfs", 2), ("interleaved-zb", 2),
    ("zb-v", 2), ("dualpipe-v", 2), ("gpipe", 1), ("zb-h1", 1))]


def bounds(schema: dict) -> list:
    """An integer or float control's minimum and maximum; [] for any other control."""
    for sub in schema.get("anyOf", [schema]):
        kind = sub.get("type")
        if kind not in ("integer", "number") or "enum" in sub:
            continue
        low = sub.get("minimum", sub.get("exclusiveMinimum"))
        if "exclusiveMinimum" in sub:
            low += 1 if kind == "integer" else 1e-3
        return [v for v in (low, sub.get("maximum")) if v is not None]
    return []


def params_of(path: str) -> dict[str, dict]:
    params = SCHEMA["paths"][path]["get"].get("parameters", [])
    return {p["name"]: p.get("schema", {}) for p in params if p["in"] == "query"}


def partners(route, names: set) -> dict[str, list[dict]]:
    out = {}
    if {"tp", "pp"} <= names or {"gpus", "gpus_per_node"} <= names:
        out["layout"] = [{k: v for k, v in d.items() if k in names} for d in LAYOUTS]
    if {"schedule", "virtual"} <= names:
        out["schedule"] = SCHEDULES
    return out


def check(asker: Asker, route, state: dict, taken: dict) -> None:
    if asker.get(state) >= 400:
        return  # the route refuses this state as a whole (EP04's TP lab and a MoE model)
    schemas = params_of(route.path)
    groups = partners(route, set(schemas))
    held = {k for group in groups.values() for d in group for k in d}
    values: dict[str, list] = {}
    chosen: dict[tuple, dict] = {}

    def alone(name: str, value, query: dict) -> None:
        status = asker.get({**state, **query})
        if status < 400:
            values.setdefault(name, []).append(value)
            chosen[name, value] = query

    for name, schema in schemas.items():
        for v in bounds(schema):
            if name not in state and v != schema.get("default"):
                alone(name, v, {name: v})  # degrees and virtual at their bounds: asked alone
        if name in held:
            values.pop(name, None)
    for name, group in groups.items():
        layouts = [chosen["layout", i] for i in values.get("layout", [])]
        for i, d in enumerate(group):
            if asker.get({**state, **d}) < 400:
                values.setdefault(name, []).append(i)
                chosen[name, i] = d
                continue
            for more in layouts:  # a schedule needing more stages than the state's own
                if "pp" in more and more["pp"] >= 2 and asker.get({**state, **more, **d}) < 400:
                    values.setdefault(name, []).append(i)
                    chosen[name, i] = {**more, **d}
                    break
        taken[name] = taken.get(name, 0) + len(values.get(name, []))
    for name, domain_values in route.controls.items():
        if name not in state and name not in held:
            values[name] = [v for v in domain_values if v != route.defaults[name]]
            for v in values[name]:
                chosen[name, v] = {name: v}
    values = {k: v for k, v in values.items() if v}
    pairs = {pair_key((p, a), (q, b)) for p, q in combinations(values, 2)
             for a in values[p] for b in values[q]}
    for row in covering_rows(values, pairs):
        query = dict(state)
        for item in sorted(row.items(), key=lambda kv: kv[0] not in groups):
            query.update(chosen[item])  # partner values first, single controls over them
        if asker.get(query) < 400 and route.page:
            asker.get(query, base=route.page, htmx=True)


NUMBERED = [r for r in ROUTES if any(bounds(s) for s in params_of(r.path).values())]


@pytest.mark.parametrize("route", NUMBERED, ids=[r.path for r in NUMBERED])
def test_no_number_at_its_bounds_nor_partner_value_answers_a_5xx(client, route):
    asker = Asker(client, route)
    taken: dict[str, int] = {}
    for state in route.states().values():
        check(asker, route, state, taken)
    assert not asker.failures, (f"{len(asker.failures)} of {asker.asked} requests:\n"
                                + "\n".join(asker.failures[:40]))
    for name, count in taken.items():
        assert count, f"{route.path} took none of its {name} values: nothing beside them asked"
