"""The cluster of an RL placement (EP09): the recipe's checks and every GPU's role.

- Checks: the world-size rules (GPUs divisible by TP·PP·CP for whole data-parallel replicas
  and by EP·expert-TP·PP for the expert grouping, expert-TP 1 as slime runs it,
  ``labs.parallel.layout.world_problems``), Megatron's model
  rules (``layout.problems``, uneven stages allowed as --decoder-last-pipeline-num-layers
  does), and the serving engines' own: engines tile a colocated pool, a dense engine's TP
  divides the attention heads and a MoE engine's EP the experts (vLLM/SGLang), an engine packs
  into or spans whole 8-GPU nodes, and a prefill/decode split keeps at least one whole engine
  of each.
- GPU map: training ranks in Megatron's rank order (TP fastest, then CP, DP, PP; see
  ``labs.parallel``) on the first nodes, rollout engines from the next node boundary; GPUs that
  make no whole replica are "unplaced", the rest of a node "idle".
"""

from __future__ import annotations

import math

from labs.parallel.layout import ParallelLayout, problems
from labs.rl.inputs import Check, RLPlacementInput

GPUS_PER_NODE = 8  # the curriculum's recipes: 8 GPUs per node (HGX boards)
# Expert tensor parallelism: slime's scripts all pass --expert-tensor-parallel-size 1
# (THUDM/slime scripts/run-*.sh); Megatron-LM's default is the dense TP (arguments.py:
# expert_tensor_parallel_size = tensor_model_parallel_size), and then the expert grouping is
# ETP·EP·PP (parallel_state). Round-19 cold reading Z, finding 2.
EXPERT_TP = 1


def layout_checks(inp: RLPlacementInput, bill) -> list[Check]:
    m, n = inp.model, inp.train_gpus
    mp, emp = inp.tp * inp.pp * inp.cp, inp.ep * EXPERT_TP * inp.pp
    dp = n // mp if n % mp == 0 else 0
    checks = [
        Check("world size", n % mp == 0,
              f"{n} GPUs / (TP {inp.tp} x PP {inp.pp} x CP {inp.cp} = {mp}) = "
              + (f"DP {dp}" if dp else f"{n / mp:.2f}: not a whole number of replicas")),
        Check("expert grouping", n % emp == 0,
              f"{n} GPUs / (EP {inp.ep} x expert-TP {EXPERT_TP} x PP {inp.pp} = {emp}) = "
              + (f"{n // emp} expert-data-parallel rank{'s' if n // emp != 1 else ''} "
                 "per stage" if n % emp == 0
                 else f"{n / emp:.2f}: experts cannot regroup the ranks")),
    ]
    layout = ParallelLayout(tp=inp.tp, pp=inp.pp, cp=inp.cp, dp=max(dp, 1), ep=inp.ep)
    found = problems(m, layout, seq_len=inp.seq_len, uneven_pp=True)
    by_field = {e.field: e.message for e in found}
    checks.append(Check("heads by TP", "tp" not in by_field,
                        by_field.get("tp", f"{m.heads} heads / TP {inp.tp} = "
                                           f"{m.heads // inp.tp} per rank")))
    layers = bill.stage_layers if bill else ()
    even = m.layers % inp.pp == 0
    # The split only where the ledger made it (a layout that does not divide has no bill;
    # round-14 cold reading of EP09, finding 8: "even ()"); an even one is plain.
    split = (f" ({' + '.join(map(str, layers))})" if layers
             else f" ({m.layers // inp.pp} a stage)" if even else "")
    checks.append(Check("layers by PP", "pp" not in by_field, by_field.get(
        "pp", f"{m.layers} layers over {inp.pp} stages: "
              + ("even" if even else "uneven") + split)))
    checks.append(Check("experts by EP", "ep" not in by_field, by_field.get(
        "ep", f"{m.experts} experts / EP {inp.ep} = {m.experts // inp.ep} per rank"
              if m.is_moe else "dense model: EP 1")))
    return checks


def engine_checks(inp: RLPlacementInput) -> list[Check]:
    m, e = inp.model, inp.engine_gpus
    checks = []
    if inp.colocated:
        checks.append(Check("engines tile the pool", inp.train_gpus % e == 0,
                            f"{inp.train_gpus} GPUs / {e} per engine = "
                            f"{inp.train_gpus / e:g} engines"))
    split_ok = (m.experts % e == 0) if m.is_moe else (m.heads % e == 0)
    what = f"{m.experts} experts" if m.is_moe else f"{m.heads} attention heads"
    checks.append(Check("engine split", split_ok, f"{what} over {e} GPUs per engine"
                        + ("" if split_ok else ": does not divide")))
    nodes_ok = (e <= GPUS_PER_NODE and GPUS_PER_NODE % e == 0) or e % GPUS_PER_NODE == 0
    checks.append(Check("engine in whole nodes", nodes_ok,
                        f"an engine of {e} GPUs " + ("packs" if nodes_ok else "straddles")
                        + f" {GPUS_PER_NODE}-GPU nodes"))
    if inp.placement == "separate-pd":
        p = inp.prefill_count
        ok = 1 <= p < inp.engine_count
        checks.append(Check("prefill/decode split", ok,
                            f"{p} prefill + {inp.engine_count - p} decode engines"
                            + ("" if ok else ": need at least one of each")))
    return checks


def gpu_roles(inp: RLPlacementInput, dp: int, fits: dict[str, bool],
              divides: bool = True) -> tuple[dict, ...]:
    """Every cluster GPU with its role, node and (training) Megatron coordinates; where the
    layout does not divide (``divides`` false: no memory bill, so no fit to
    judge), each training GPU says so ("divides": false) rather than "does not fit"."""
    tp, cp, pp, e = inp.tp, inp.cp, inp.pp, inp.engine_gpus
    mp = tp * pp * cp
    placed = (inp.train_gpus // mp) * mp  # GPUs that make whole model-parallel replicas
    train_nodes = math.ceil(inp.train_gpus / GPUS_PER_NODE)
    total = (train_nodes * GPUS_PER_NODE
             + math.ceil(inp.rollout_gpus / GPUS_PER_NODE) * GPUS_PER_NODE)
    stage_ranks = tp * cp * max(dp, 1)
    out = []
    for g in range(total):
        row = {"gpu": g, "node": g // GPUS_PER_NODE, "role": "idle", "fits": True}
        if g < inp.train_gpus:
            if g < placed:
                # Megatron's order tp-cp-dp-pp: TP fastest, PP slowest (labs.parallel.layout).
                row.update(tp=g % tp, cp=(g // tp) % cp, dp=(g // (tp * cp)) % max(dp, 1),
                           pp=g // stage_ranks if dp else (g // (tp * cp)) % pp)
                row["role"] = "colocated" if inp.colocated else "training"
            else:
                row["role"] = "unplaced"  # no whole TP x PP x CP replica: the recipe fails here
            if inp.colocated and g < inp.engine_count * e:
                row["engine"] = g // e
            row["fits"] = fits["colocated" if inp.colocated else "training"]
            if not divides:
                row["divides"] = False
        elif g >= train_nodes * GPUS_PER_NODE:
            r = g - train_nodes * GPUS_PER_NODE
            if r < inp.rollout_gpus:
                engine = r // e
                role = "rollout"
                if inp.placement == "separate-pd":
                    role = "prefill" if engine < inp.prefill_count else "decode"
                row.update(role=role, engine=engine, fits=fits[role])
        out.append(row)
    return tuple(out)
