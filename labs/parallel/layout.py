"""The parallel layout of a training job: degrees, groupings, Megatron's rank order and rules.

One type for every degree the labs use: tensor (TP), pipeline (PP), context (CP), data (DP),
expert (EP) and expert-tensor (expert-TP) parallelism. Sources:
- world = TP·PP·CP·DP; the dense layers group ranks as TP x CP x DP x PP and the routed
  experts regroup the *same* ranks of each pipeline stage as expert-TP x EP x expert-DP, so
  expert-DP = TP·CP·DP / (EP·expert-TP) (Megatron Core MoE docs, "expert-model-parallel-size",
  "expert-tensor-parallel-size"; DeepSeek-V3, arXiv:2412.19437, sec 3.2);
- rank order: Megatron-LM's ``RankGenerator`` with its default order "tp-cp-ep-dp-pp": TP
  varies fastest, then CP, (EP), DP, and PP slowest (megatron/core/parallel_state.py), so a TP
  group is consecutive ranks, i.e. one node's NVLink domain;
- the divisibility rules are Megatron's argument checks (heads and query groups by TP, layers
  by PP unless the first/last stage is uneven, experts by EP) and zigzag context parallelism
  (sequence by 2·CP; Megatron's CP load balancing, Liu et al. ring attention).

``problems`` lists *every* rule a plan breaks, in control order; the ledger raises the first,
planners and audits show them all.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import product

from labs.core.errors import LabInputError
from labs.core.limits import MAX_DEGREE, MAX_DP, MAX_WORLD
from labs.core.validate import whole
from labs.model.spec import ModelSpec

DENSE_ORDER = ("tp", "cp", "dp", "pp")  # fastest first
EXPERT_ORDER = ("etp", "ep", "edp", "pp")
DEGREE_NAMES = {
    "tp": "tensor parallel degree", "pp": "pipeline stages", "cp": "context parallel degree",
    "dp": "data parallel degree", "ep": "expert parallel degree",
    "etp": "expert tensor parallel degree",
}


def divisors(n: int, limit: int = MAX_DEGREE) -> list[int]:
    """The divisors of ``n`` up to ``limit``, ascending."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return [d for d in sorted({*small, *(n // d for d in small)}) if d <= limit]


def _listed(n: int) -> str:
    return ", ".join(map(str, divisors(n)))


@dataclass(frozen=True)
class ParallelLayout:
    """Degrees of one job. Each is validated as a whole number in range where built; the
    cross-rules (what divides what) are checked by ``problems`` so all can be listed."""

    tp: int = 1
    pp: int = 1
    cp: int = 1
    dp: int = 1
    ep: int = 1
    etp: int = 1

    def __post_init__(self) -> None:
        for name in ("tp", "pp", "cp", "ep", "etp"):
            whole(name, getattr(self, name), 1, MAX_DEGREE, DEGREE_NAMES[name])
        whole("dp", self.dp, 1, MAX_DP, DEGREE_NAMES["dp"])

    @property
    def world_size(self) -> int:
        return self.tp * self.pp * self.cp * self.dp

    @property
    def stage_ranks(self) -> int:
        """GPUs per pipeline stage: TP·CP·DP, regrouped by the experts as etp·EP·expert-DP."""
        return self.tp * self.cp * self.dp

    @property
    def expert_dp(self) -> int:
        """Expert-data-parallel degree TP·CP·DP / (EP·expert-TP), floored when it does not
        divide (``problems`` reports that case)."""
        return max(1, self.stage_ranks // (self.ep * self.etp))

    @property
    def dense_shard_group(self) -> int:
        """Ranks the distributed optimizer shards dense state over: DP x CP (Megatron's
        distributed optimizer uses the data-parallel group *with* context parallelism)."""
        return self.dp * self.cp

    @classmethod
    def for_world(cls, gpus: int, *, tp: int = 1, pp: int = 1, cp: int = 1, ep: int = 1,
                  etp: int = 1) -> ParallelLayout:
        """The layout of ``gpus`` GPUs with the given model-parallel degrees; DP takes the
        rest. Raises the first of ``world_problems`` when the degrees do not fit."""
        whole("gpus", gpus, 1, MAX_WORLD, "the number of GPUs")
        found = world_problems(gpus, tp=tp, pp=pp, cp=cp, ep=ep, etp=etp)
        if found:
            raise found[0]
        return cls(tp=tp, pp=pp, cp=cp, dp=gpus // (tp * pp * cp), ep=ep, etp=etp)

    def _sizes(self, expert: bool) -> dict[str, int]:
        if expert:
            return {"etp": self.etp, "ep": self.ep, "edp": self.expert_dp, "pp": self.pp}
        return {"tp": self.tp, "cp": self.cp, "dp": self.dp, "pp": self.pp}

    def rank(self, **coords: int) -> int:
        """Global rank of dense coordinates (tp, cp, dp, pp), TP fastest (Megatron's order)."""
        rank, stride = 0, 1
        for name in DENSE_ORDER:
            rank += coords.get(name, 0) * stride
            stride *= getattr(self, name)
        return rank

    def groups(self, kind: str) -> list[tuple[int, ...]]:
        """The rank groups of one kind, e.g. "tp", "dp", "pp", "cp", "dp-cp" (the distributed
        optimizer's group) or, for the experts, "ep", "etp", "edp".

        Ranks of a group differ only in the named dimensions; the groups are listed with the
        other coordinates in Megatron's order, so ``groups("tp")[0]`` is ranks 0..TP-1.
        """
        offsets, fixed = self.group_pattern(kind)
        found = []
        for outer in product(*(range(size) for _, size in reversed(fixed))):
            base = sum(i * stride for (stride, _), i in zip(reversed(fixed), outer, strict=True))
            found.append(tuple(base + o for o in offsets))
        return sorted(found)

    def group_pattern(self, kind: str) -> tuple[tuple[int, ...], tuple[tuple[int, int], ...]]:
        """The groups of ``kind`` without listing them: the first group's ranks (sorted; every
        other group is it shifted by a base) and the (stride, size) of each other dimension,
        whose combinations are the bases. What a walk over all ranks would find, in O(group)."""
        names = tuple(kind.split("-"))
        expert = any(n in ("ep", "etp", "edp") for n in names)
        sizes = self._sizes(expert)
        order = EXPERT_ORDER if expert else DENSE_ORDER
        if not names or any(n not in sizes for n in names):
            raise LabInputError("group", f"unknown group {kind!r}; use one or more of "
                                         f"{', '.join(DENSE_ORDER + ('ep', 'etp', 'edp'))}")
        strides, stride = {}, 1
        for name in order:
            strides[name] = stride
            stride *= sizes[name]
        offsets = [0]
        for n in order:  # each named dimension multiplies the group, at its stride
            if n in names:
                offsets = [o + i * strides[n] for i in range(sizes[n]) for o in offsets]
        offsets.sort()
        fixed = tuple((strides[n], sizes[n]) for n in order if n not in names)
        return tuple(offsets), fixed


def world_problems(gpus: int, *, tp: int = 1, pp: int = 1, cp: int = 1, ep: int = 1,
                   etp: int = 1) -> list[LabInputError]:
    """The world-size rules for a job of ``gpus`` GPUs: divisible by TP·PP·CP (the dense
    grouping) and by EP·expert-TP·PP (the expert grouping), as Megatron's initialisation
    asserts."""
    found = []
    if gpus % (tp * pp * cp):
        found.append(LabInputError("gpus", f"{gpus:,} GPUs do not divide by TP x PP x CP = "
                                           f"{tp * pp * cp:,}, so DP would not be whole"))
    if gpus % (ep * etp * pp):
        found.append(LabInputError("gpus", f"{gpus:,} GPUs do not divide by EP x expert-TP x "
                                           f"PP = {ep * etp * pp:,}, so expert-DP would not "
                                           "be whole"))
    return found


def problems(model: ModelSpec, layout: ParallelLayout, *, seq_len: int | None = None,
             uneven_pp: bool = False, mode: str = "train") -> list[LabInputError]:
    """Every rule ``layout`` breaks for ``model`` (empty when the plan is legal), in the
    order of the page's controls: the world size, then TP, PP, CP and EP.

    Each entry names its canonical field (``tp``, ``pp``, ...) and says what would be accepted.
    """
    found: list[LabInputError] = []
    m, lay = model, layout
    if lay.world_size > MAX_WORLD:
        found.append(LabInputError("dp", f"TP x PP x CP x DP = {lay.world_size:,} GPUs; the "
                                         f"lab simulates at most {MAX_WORLD:,}"))
    if m.heads % lay.tp:
        found.append(LabInputError("tp", f"Megatron splits attention by heads: {m.heads} heads "
                                         f"do not divide by TP={lay.tp}; choose one of "
                                         f"{_listed(m.heads)}"))
    elif not m.uses_mla and m.kv_heads % lay.tp and (mode == "train" or lay.tp % m.kv_heads):
        # Megatron asserts num_query_groups % TP == 0 for training; inference engines (vLLM)
        # also accept TP a multiple of the KV heads, replicating each KV head.
        found.append(LabInputError("tp", f"{m.kv_heads} KV heads (grouped-query attention) "
                                         f"do not divide by TP={lay.tp}; choose one of "
                                         f"{_listed(m.kv_heads)}"))
    if lay.pp > m.layers:
        found.append(LabInputError("pp", f"{m.layers} layers cannot fill {lay.pp} pipeline "
                                         "stages; each stage needs at least one layer"))
    elif m.layers % lay.pp and not uneven_pp:
        found.append(LabInputError("pp", f"{m.layers} layers do not split evenly into "
                                         f"{lay.pp} stages; choose one of {_listed(m.layers)} "
                                         "(or allow uneven stages)"))
    if seq_len is not None and lay.cp > 1 and seq_len % (2 * lay.cp):
        found.append(LabInputError("cp", f"zigzag context parallelism cuts the sequence into "
                                         f"2 x CP = {2 * lay.cp:,} equal chunks (rank r takes "
                                         "chunks r and 2CP-1-r to balance causal work); the "
                                         f"sequence length {seq_len:,} must be a multiple of "
                                         f"{2 * lay.cp:,}"))
    if not m.is_moe and (lay.ep != 1 or lay.etp != 1):
        field = "ep" if lay.ep != 1 else "etp"
        found.append(LabInputError(field, f"{m.name} is dense (no experts): expert "
                                          "parallelism must be 1"))
    elif m.is_moe and m.experts % lay.ep:
        found.append(LabInputError("ep", f"EP={lay.ep} must divide the {m.experts} experts so "
                                         f"every GPU holds the same number; choose one of "
                                         f"{_listed(m.experts)}"))
    if lay.stage_ranks % (lay.ep * lay.etp):
        # Experts regroup the TP·CP·DP ranks of each stage, so the world size must divide by
        # EP·expert-TP·PP as well as by TP·PP·CP.
        found.append(LabInputError("ep", f"EP x expert-TP = {lay.ep * lay.etp} must divide "
                                         f"TP x CP x DP = {lay.stage_ranks}: experts regroup "
                                         "the same GPUs of each pipeline stage, they do not "
                                         "add GPUs"))
    return found
