"""EP04's split diagram as data for an HTML partial (templates/partials/_tp_split.html): each
matrix of one layer with its real shape, cut into one coloured strip per GPU, and the
collectives where Megatron puts them (Shoeybi et al. 2019 sec 3; Korthikanti et al. 2022 sec
4.2.2 for sequence parallelism). Boxes are drawn to one scale in px (floored), so a wide MLP
matrix looks wide; the details under the drawing give the exact sizes."""

from app.charts.units import fmt_bytes

# One colour per GPU of the group; a group larger than 8 repeats them.
GPU_COLOURS = ("#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#eeca3b",
               "#9d755d")
# Boxes in px on one scale (the largest dimension of the layer is BOX_PX), floored so a
# narrow matrix still shows its strips; the whole drawing fits a phone's diagram pane.
BOX_PX = 96
MIN_PX = 30
DETAIL_UP_TO = 16  # QKV strips show their Q, K and V parts up to this many GPUs
# EP04 step 2 asks how many key/value heads each GPU holds at t = 4: every count of a GPU's
# heads (W_QKV's label, its caption's heads and columns, attention's groups) waits on the
# lesson for that guess, drawn at every state (round-22 cold reading P, finding 4: the opening
# t = 8 drew "16 Q + 1 KV head a GPU", the answer's rule, beside the predict's 8 KV heads).
# An .answer-mask's key (static/js/lab.js maskAnswers); no step, as in the embed: shown.
HEADS_STEP = "step-2"


def _n(value: int) -> str:
    return f"{value:,}"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' if n != 1 else ''}"


def _box(rows: int, cols: int, largest: int) -> dict:
    return {"width_px": max(MIN_PX, round(BOX_PX * cols / largest)),
            "height_px": max(MIN_PX, round(BOX_PX * rows / largest))}


def _strips(t: int, parts: tuple[tuple[str, float], ...] = ()) -> list[dict]:
    """One strip per GPU; ``parts`` (label, share of the strip) subdivide each strip."""
    return [{"gpu": i, "colour": GPU_COLOURS[i % len(GPU_COLOURS)],
             "parts": [{"label": label, "share": share} for label, share in parts]}
            for i in range(t)]


def split_view(result) -> dict:
    inp, sh = result.input, result.shapes
    t, h, d, ffn = sh.tp, sh.hidden, sh.head_dim, sh.ffn
    tokens = inp.seq_len * inp.micro_batch
    size = fmt_bytes(result.collective_bytes)
    largest = max(h, sh.qkv_columns, ffn, sh.heads * d)
    q, kv = sh.heads_per_gpu * d, sh.kv_heads_per_gpu * d
    qkv_parts = (("Q", q), ("K", kv), ("V", kv)) if t <= DETAIL_UP_TO else ()
    per_gpu_qkv = q + 2 * kv
    replicated = t > sh.kv_heads
    # GQA: a key/value head is one head of K and one of V, shared by a group of a/kv query
    # heads; a GPU takes whole groups, kv/t of them (round-17 cold reading of EP04, finding 1:
    # "2 K + 2 V heads" read as four heads where step 2 says 2 key/value heads).
    group = sh.heads // sh.kv_heads
    heads_text = (f"{_count(sh.heads_per_gpu, 'Q head')} + "
                  f"{_count(sh.kv_heads_per_gpu, 'KV head')} (a K and a V each) = "
                  f"({sh.heads_per_gpu} + 2 × {sh.kv_heads_per_gpu}) × {d}")
    sp = inp.sp
    # Megatron's operators: f (identity forward, all-reduce backward) before a column-split
    # matrix, g (all-reduce forward, identity backward) after a row-split one; with SP,
    # Korthikanti's g (all-gather forward, reduce-scatter backward) and ḡ (the reverse).
    # Each badge's collectives, forward and backward: drawn as their short names and counted
    # (``drawn``), as many as the engine times (``TPResult.collectives_per_layer``).
    into = _badge(
        "g" if sp else "f", ("AG",) if sp else (), ("AG", "RS") if sp else ("AR",),
        forward=f"all-gather X from {_n(tokens // t)} tokens each to all {_n(tokens)}"
                if sp else "identity: X is already on every GPU",
        # With SP a GPU kept only its t-th of X: the weight gradient needs all of it, so
        # backward gathers it again (Korthikanti et al. 2022 sec 4.2.2; Megatron-LM).
        backward=f"all-gather X again for the weight gradient ({_n(tokens // t)} tokens "
                 f"each kept), then reduce-scatter of ∂X ({size})" if sp
                 else f"all-reduce of ∂X ({size})")
    out = _badge(
        "ḡ" if sp else "g", ("RS",) if sp else ("AR",), ("AG",) if sp else (),
        forward=f"reduce-scatter the partial sums ({size}) to {_n(tokens // t)} tokens each"
                if sp else f"all-reduce the partial sums ({size})",
        backward="all-gather ∂Z" if sp else "identity")
    # The model's own ops (round-19 cold reading X, finding 15: Llama's RMSNorm and no dropout
    # read "LayerNorm, dropout"): ModelSpec.norm, and dropout only where it trains with it.
    model = inp.model
    ops = ("LayerNorm" if model.norm == "layernorm" else "RMSNorm") + (
        ", dropout" if model.dropout else "") + ", residual"
    norms = (f"{ops} on {_n(tokens // t)} of {_n(tokens)} tokens per "
             "GPU (sequence parallel: their activations ÷ t)" if sp else
             f"{ops} on all {_n(tokens)} tokens, repeated on every GPU "
             "(their activations are not split)")
    # Each matrix's gloss, said in the figure's key where its name is first shown (task fixR
    # #5: "W_O" labelled the diagram beside EP04 step 1, defined nowhere on the page).
    qkv = {"name": "W_QKV", "gloss": "attention's query, key and value projections",
           "rows": h, "cols": sh.qkv_columns, "split": "columns",
           **_box(h, sh.qkv_columns, largest),
           "strips": _strips(t, tuple((k, v / per_gpu_qkv) for k, v in qkv_parts)),
           "caption": f"h × (a + 2·kv)·d = {_n(h)} × {_n(sh.qkv_columns)}, by columns",
           # The caption's rest, held for HEADS_STEP (and so not in the box's hover title).
           "held": f"each GPU {heads_text} = {_n(per_gpu_qkv)} columns"
                   + (" (KV heads replicated: t exceeds them)" if replicated else ""),
           # Drawn on the box itself, in view where EP04 step 2's why points (round-21 cold
           # reading P, finding 2: the caption's count sat below the bench's fold).
           "label": f"{sh.heads_per_gpu} Q + {_count(sh.kv_heads_per_gpu, 'KV head')} a GPU"}
    w_o = {"name": "W_O", "gloss": "attention's output projection",
           "rows": sh.heads * d, "cols": h, "split": "rows",
           **_box(sh.heads * d, h, largest), "strips": _strips(t),
           "caption": f"(a·d) × h = {_n(sh.heads * d)} × {_n(h)}, by rows: each GPU "
                      f"{_n(sh.heads_per_gpu * d)} rows, a partial sum of the full output"}
    mlp_in = [{"name": name, "gloss": gloss, "rows": h, "cols": ffn, "split": "columns",
               **_box(h, ffn, largest), "strips": _strips(t),
               "caption": f"h × f = {_n(h)} × {_n(ffn)}, by columns: {_n(ffn // t)} each"}
              for name, gloss in ((("W_gate", "the MLP's gate"), ("W_up", "its up projection"))
                                  if sh.gated else (("W_up", "the MLP's up projection"),))]
    w_down = {"name": "W_down", "gloss": "its down projection", "rows": ffn, "cols": h,
              "split": "rows",
              **_box(ffn, h, largest), "strips": _strips(t),
              "caption": f"f × h = {_n(ffn)} × {_n(h)}, by rows: {_n(ffn // t)} each"}
    blocks = [
        {"name": "Attention", "short": "Attention", "into": into, "columns": [qkv],
         "local": "attention", "rows": w_o, "out": out,
         "local_text": "attention of whole query heads on each GPU: softmax(QKᵀ)V needs no "
                       "communication",
         "held": f"{sh.heads_per_gpu} whole query heads per GPU"
                 + (f", each group of {group} sharing one of its "
                    f"{_count(sh.kv_heads_per_gpu, 'KV head')}" if group > 1 else ""),
         "limit": f"Limit: t ≤ {sh.kv_heads} KV heads for training (Megatron divides the query "
                  "groups by t); beyond that each GPU must hold a replica of a KV head, as "
                  "inference engines do"},
        {"name": "MLP" + (" (SwiGLU)" if sh.gated else ""), "short": "MLP",
         "into": into, "columns": mlp_in, "local": "SwiGLU" if sh.gated else "GeLU",
         "rows": w_down, "out": out,
         "local_text": ("SiLU(X·W_gate) ⊙ X·W_up" if sh.gated else "GeLU")
                       + f" on each GPU's {_n(ffn // t)} columns: elementwise, no "
                         "communication",
         "held": "", "limit": ""},
    ]
    drawn = sum(len(b[k]["ops"]) for b in blocks for k in ("into", "out"))
    return {
        "tp": t, "sp": sp, "blocks": blocks, "norms": norms, "heads_step": HEADS_STEP,
        "legend": [{"gpu": i, "colour": GPU_COLOURS[i]} for i in range(min(t, 8))],
        "more_gpus": t - 8 if t > 8 else 0,
        "equations": {
            "x": f"{_n(tokens)} × {_n(h)}", "w": f"{_n(h)} × {_n(ffn)}",
            "wi": f"{_n(h)} × {_n(ffn // t)}", "yi": f"{_n(tokens)} × {_n(ffn // t)}",
            "vi": f"{_n(ffn // t)} × {_n(h)}", "z": f"{_n(tokens)} × {_n(h)}",
            "last": t - 1,
        },
        "collective_size": size,
        # The engine's count (round-14 cold reading of EP04, finding 5: with SP the caption
        # said 8 where the engine times 10), which the badges draw one by one.
        "collectives_per_layer": result.collectives_per_layer,
        "drawn": drawn,
    }


def _badge(op: str, fwd: tuple[str, ...], bwd: tuple[str, ...], forward: str,
           backward: str) -> dict:
    """Megatron's operator at one end of a block: its collectives forward and backward, a
    line each ("–" for a pass with none), so a phone's row stays as wide as it was."""
    return {"op": op, "lines": [f"{name} {x}" for name, ops in (("fwd", fwd), ("bwd", bwd))
                                for x in ops or ("–",)],
            "ops": fwd + bwd, "forward": forward, "backward": backward}
