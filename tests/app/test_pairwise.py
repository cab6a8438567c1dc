"""Every pair of every /api/ route's enumerated and boolean controls: no 5xx (issue 31).

A class found a 500 by combination: ``recipe_tp_overlap=all`` beside a Mixtral state (TP overlap
"all" looked for a GEMM a MoE layer without shared experts does not have), which a test that
changes one control at a time cannot reach. Here each route, read from the app's OpenAPI
schema (a new route is included the moment it is registered), is asked on its default state
and, where it takes a model, on a mixture-of-experts state (Mixtral) and an MLA one (DeepSeek-V3),
and where it takes dp_shard, on a ZeRO-3 one with HSDP's shard degrees enumerated (``HSDP``),
with each value of each enumerated or boolean control beside each value of every other:

1. each value alone (the other controls at their defaults) or, where the route refuses it
   so, with the one other value it needs, which every request with it then carries where it
   does not set that control (a GPU with the NVLink it ships with);
2. a covering array (all-pairs, built greedily) over the values each state takes, every
   control left at its default where no uncovered pair needs it: each pair of values meets in
   at least one request;
3. a request the lab refuses (4xx) covers nothing, since it masks every other pair in it, so
   its pairs are covered again in smaller rows; what a few rounds leave is asked alone, the
   pair beside the defaults, and where the lab refuses two values it takes alone, its answer
   names both controls.

A route's lab page takes the same query names: each covering row the API takes is asked of
its HTML fragment too. One test per route and state, all its failures in one message.
"""

from __future__ import annotations

import re
from collections import defaultdict
from itertools import combinations
from urllib.parse import urlencode

import pytest

import app.main
from app.labkit import VIEWS
from labs.hardware.gpus import gpus
from labs.hardware.links import links

SCHEMA = app.main.app.openapi()
# A mixture-of-experts state (the Mixtral at TP 2, EP 8 on two nodes, with two pipeline
# stages so that the schedules meet it) and an MLA one (DeepSeek-V3: MLA attention and shared
# experts, with CP 2 so that the ring meets MLA's keys), each cut to the controls a route has. A
# route searching plans (``gpus``) searches 16 GPUs.
MOE = {"model": "mixtral-8x7b", "gpu": "h100-sxm", "nodes": 2, "tp": 2, "pp": 2, "dp": 4,
       "ep": 8, "cp": 1, "gpus": 16}
MLA = {"model": "deepseek-v3", "gpu": "h100-sxm", "nodes": 2, "tp": 2, "pp": 1, "dp": 4,
       "ep": 8, "cp": 2, "gpus": 16}
ROUNDS = 3  # covering rounds before what is left is asked pair by pair
# HSDP: ``dp_shard`` is an integer the schema cannot enumerate, and acts only at ZeRO-3 with a DP
# it divides. A route that takes it is asked on a ZeRO-3 state too, its default cluster's GPUs
# as TP 4 x PP x DP 4, where it is enumerated: 1 (a whole replica on each rank) and 2 (HSDP, the
# shard group inside a node) beside its default 0 (plain FSDP over all of DP). There the pairs
# asked are those with a control that acts at ZeRO-3 alone (``ZERO3_ONLY``: the shard degree,
# FSDP's prefetch and reshard), each beside every value of every other control; two other
# controls already meet in the default state's pairs (a full cross there was half of the
# suite's three slowest tests' time, ~1,000 requests a route).
HSDP = {"zero": 3, "tp": 4, "dp": 4}
SHARDS = [1, 2]
ZERO3_ONLY = ("dp_shard", "fsdp_prefetch", "reshard_after_forward")


# A GPU or link control the schema leaves a free string (a preset id the lab checks itself)
# is crossed over its presets' ids where a GPU meets a link: /api/dp's gpu and link, /api/tp's
# link, intra_link and inter_link (round-22 cold reading P, finding 2:
# /api/dp?gpu=h100-pcie&link=nvlink-4 answered for PCIe 5.0, a pair no sweep asked).
PRESET_IDS = {
    "gpu": list(gpus()),
    "link": list(links()),
    "intra_link": [k for k, x in links().items() if x.kind == "scale-up"],
    "inter_link": [k for k, x in links().items() if x.kind == "scale-out"],
}
FREE_PRESETS = {"/api/dp": ("gpu", "link"), "/api/tp": ("link", "intra_link", "inter_link")}


def domain(schema: dict) -> list | None:
    if "enum" in schema:
        return list(schema["enum"])
    if schema.get("type") == "boolean":
        return [False, True]
    if "const" in schema:
        return [schema["const"]]
    for sub in schema.get("anyOf", []):
        values = domain(sub)
        if values:
            return values
    return None


def api_routes() -> list[tuple[str, list[dict]]]:
    return [(path, ops["get"].get("parameters", []))
            for path, ops in SCHEMA["paths"].items()
            if path.startswith("/api/") and "get" in ops]


def text(value) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


class Route:
    """One GET /api/ route: its enumerated controls, their defaults, and how to ask it."""

    def __init__(self, path: str, params: list[dict]) -> None:
        self.path = path
        self.names = {p["name"] for p in params}
        self.controls: dict[str, list] = {}
        self.defaults: dict[str, object] = {}
        self.in_path: set[str] = set()
        given = {p["name"]: p.get("schema", {}).get("default") for p in params}
        self.shard = next((n for n in self.names if n.endswith("dp_shard")), None)
        self.hsdp = {**HSDP, "pp": given["nodes"] * given["gpus_per_node"] // 16} \
            if self.shard else None
        for p in params:
            values = domain(p.get("schema", {})) or (
                PRESET_IDS[p["name"]] if p["name"] in FREE_PRESETS.get(path, ()) else None)
            if not values:
                continue
            self.controls[p["name"]] = values
            if p["in"] == "path":
                self.in_path.add(p["name"])
                self.defaults[p["name"]] = values[0]
            else:
                self.defaults[p["name"]] = p.get("schema", {}).get("default")
        name = path.removeprefix("/api/")
        self.page = VIEWS[name].episode.url if name in VIEWS else None

    def states(self) -> dict[str, dict]:
        out = {"default": {}}
        if "model" in self.names:
            for label, state in (("moe", MOE), ("mla", MLA)):
                out[label] = {k: v for k, v in state.items() if k in self.names}
        return out

    def crossed(self) -> dict[str, tuple[dict, dict[str, list], set[str] | None]]:
        """Each state whose controls are crossed, by name, with the controls enumerated in it
        beside the schema's and the controls each of its pairs must hold one of (None: every
        pair): ``states``, and HSDP's where the route takes dp_shard."""
        out = {label: (state, {}, None) for label, state in self.states().items()}
        if self.hsdp:
            focus = {n for n in self.names if n.endswith(ZERO3_ONLY)}
            out["hsdp"] = (self.hsdp, {self.shard: [0, *SHARDS]}, focus)
        return out

    def url(self, query: dict, base: str | None = None) -> str:
        path = base or self.path
        for name in self.in_path:
            path = path.replace("{" + name + "}", text(query.get(name, self.defaults[name])))
        rest = {k: text(v) for k, v in query.items() if k not in self.in_path}
        return f"{path}?{urlencode(rest)}" if rest else path


def covering_rows(values: dict[str, list], pairs: set) -> list[dict]:
    """Greedy all-pairs (AETG's idea, deterministic): each row starts from an uncovered pair and
    takes, control by control, the value meeting the most uncovered pairs with the row so far;
    a control no uncovered pair needs stays at its default."""
    order = list(values)
    rows = []
    left = set(pairs)
    while left:
        count = defaultdict(int)
        for (p, _), (q, _) in left:
            count[p] += 1
            count[q] += 1
        (p, a), (q, b) = min(left, key=lambda pq: (-count[pq[0][0]] - count[pq[1][0]],
                                                   repr(pq)))
        row = {p: a, q: b}
        for name in sorted(order, key=lambda n: -count[n]):
            if name in row or not count[name]:
                continue
            best, gain = None, 0
            for v in values[name]:
                got = sum(pair_key((name, v), (o, w)) in left for o, w in row.items())
                if got > gain:
                    best, gain = v, got
            if best is not None:
                row[name] = best
        for x, y in combinations(row.items(), 2):
            left.discard(pair_key(x, y))
        rows.append(row)
    return rows


def pair_key(x: tuple, y: tuple) -> tuple:
    return (x, y) if (x[0], repr(x[1])) < (y[0], repr(y[1])) else (y, x)


def bare(control: str) -> str:
    """A playground control's name without its lab's prefix."""
    return re.sub(r"^(recipe|memory|zero|dp|tp|cp|moe|pipeline|placement)_", "", control)


def spaced(words: str) -> str:
    return re.sub(r"[-_]", " ", words)


def names_both(body: str, a: tuple, b: tuple, with_: dict) -> bool:
    """Whether a refusal names both controls of a pair: each by its name (a playground
    control's also without its lab's prefix), by the value chosen ("inference" for mode=infer,
    "NVLink 4" for intra_link=nvlink-4) or by the value it came with (``with_``: the B200 an
    NVLink 5 came with); a playground panel's show_ control by the panel's episode."""
    def named(control: str, value) -> bool:
        if control.startswith("show_") and re.search(r"EP\d\d", body):
            return True  # the playground names the panel a show_ control draws by its episode
        words = {control, bare(control)}
        if not isinstance(value, bool) and len(str(value)) > 2:
            words.add(str(value))
        return any(re.search(rf"(?<![a-z]){re.escape(spaced(w))}", spaced(body), re.I)
                   for w in words)
    def named_or_its_companion(item: tuple) -> bool:
        return named(*item) or any(named(*more) for more in with_.get(item, {}).items())
    return named_or_its_companion(a) and named_or_its_companion(b)


class Asker:
    def __init__(self, client, route: Route) -> None:
        self.client, self.route = client, route
        self.failures: list[str] = []
        self.asked = 0

    def get(self, query: dict, base: str | None = None, htmx: bool = False) -> int:
        url = self.last_url = self.route.url(query, base)
        self.asked += 1
        try:
            got = self.client.get(url, headers={"HX-Request": "true"} if htmx else {})
        except Exception as exc:  # an in-process 500 raises here
            self.failures.append(f"{url}{' (htmx)' if htmx else ''}: {type(exc).__name__}: "
                                 f"{exc}"[:300])
            return 500
        if got.status_code >= 500:
            self.failures.append(f"{url}: {got.status_code} {got.text[:200]}")
        self.last = got
        return got.status_code


def completion(asker: Asker, route: Route, query: dict, named: str = "") -> dict | None:
    """The one more control value that makes the route take a query it refuses, if one does:
    the playground takes a MoE model once its TP lab (EP04, dense models only) is off; a GPU
    is taken with the NVLink it ships with, an inference-only recipe in inference mode. With
    ``named`` (the refusal), only the controls it names are tried ("GPU and link do not
    match": gpu and the links; "does not fit mode 'train'": mode)."""
    def says(name: str) -> bool:
        words = {name, bare(name), bare(name).rsplit("_", 1)[-1]}
        return any(re.search(rf"(?<![a-z]){re.escape(spaced(w))}(?![a-z])", spaced(named),
                             re.I) for w in words)

    for name, values in route.controls.items():
        if named and not says(name):
            continue
        for v in values:
            if (name not in query and v != route.defaults[name]
                    and asker.get({**query, name: v}) < 400):
                return {name: v}
    return None


def check_state(asker: Asker, route: Route, state: dict, more_controls: dict | None = None,
                focus: set[str] | None = None) -> None:
    controls = {**route.controls, **(more_controls or {})}
    defaults = {**route.defaults, **{name: values[0] for name, values in
                                     (more_controls or {}).items()}}
    if asker.get(state) >= 400:
        more = completion(asker, route, state)
        if more is None:
            return  # the route refuses this state as a whole (EP04's TP lab and a MoE model)
        state = {**state, **more}
    # Each value the route takes alone, or with the one other value it needs (``with_``),
    # which a row or a pair gets where it does not set that control itself.
    values: dict[str, list] = {}
    with_: dict[tuple, dict] = {}
    for name, domain_values in controls.items():
        if name in state:
            continue
        for v in domain_values:
            if v == defaults[name]:
                continue
            if asker.get({**state, name: v}) >= 400:
                more = completion(asker, route, {**state, name: v}, asker.last.text)
                if more is None:
                    continue
                with_[name, v] = more
            values.setdefault(name, []).append(v)

    def ask(row: dict, **page) -> int:
        query = dict(row)
        for item in row.items():
            for k, w in with_.get(item, {}).items():
                query.setdefault(k, w)
        return asker.get({**state, **query}, **page)

    pairs = {pair_key((p, a), (q, b)) for p, q in combinations(values, 2)
             if focus is None or p in focus or q in focus
             for a in values[p] for b in values[q]}
    for _ in range(ROUNDS):
        if not pairs:
            break
        for row in covering_rows(values, pairs):
            if ask(row) < 400:
                for x, y in combinations(row.items(), 2):
                    pairs.discard(pair_key(x, y))
                if route.page:
                    ask(row, base=route.page, htmx=True)
    for (p, a), (q, b) in sorted(pairs, key=repr):
        status = ask({p: a, q: b})
        if 400 <= status < 500 and not names_both(asker.last.text, (p, a), (q, b), with_):
            asker.failures.append(f"{asker.last_url}: refused, but its answer does not name "
                                  f"both {p} and {q}: {asker.last.text[:200]}")


ROUTES = [Route(path, params) for path, params in api_routes()]
# One test a route and state, so that the heaviest routes (the recipe, the playground and the
# planner, whose answers run the planner) spread over the suite's workers.
CASES = [(route, label) for route in ROUTES for label in route.crossed()]


@pytest.mark.parametrize("route, label", CASES, ids=[f"{r.path}-{label}" for r, label in CASES])
def test_no_pair_of_controls_answers_a_5xx(client, route, label):
    asker = Asker(client, route)
    state, more_controls, focus = route.crossed()[label]
    check_state(asker, route, state, more_controls, focus)
    assert not asker.failures, (f"{len(asker.failures)} of {asker.asked} requests:\n"
                                + "\n".join(asker.failures[:40]))


def test_the_covering_rows_meet_every_pair_in_fewer_requests_than_the_cross():
    values = {"a": [1, 2, 3], "b": [True], "c": ["x", "y", "z", "w"], "d": [5, 6], "e": [7, 8, 9]}
    pairs = {pair_key((p, v), (q, w)) for p, q in combinations(values, 2)
             for v in values[p] for w in values[q]}
    rows = covering_rows(values, pairs)
    met = {pair_key(x, y) for row in rows for x, y in combinations(row.items(), 2)}
    assert pairs <= met
    assert 12 <= len(rows) < len(pairs) // 4  # c x a (or e) needs 12 rows at least
