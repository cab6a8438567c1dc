"""The pipeline schedules: ids, names and families, one source for every lab that reads them."""

from __future__ import annotations

# Schedule id (stable, used in the API) -> the name the field and PyTorch give it.
SCHEDULES: dict[str, str] = {
    "gpipe": "GPipe",
    "1f1b": "1F1B",
    "interleaved-1f1b": "Interleaved 1F1B",
    "looped-bfs": "Looped BFS",
    "zb-h1": "ZB-H1",
    "interleaved-zb": "Interleaved zero bubble",
    "zb-v": "ZB-V",
    "dualpipe-v": "DualPipeV",
}
# v chunks per rank, piece k on rank k % p; their textbook bubble is (p-1)/(v*m+p-1).
INTERLEAVED = ("interleaved-1f1b", "looped-bfs", "interleaved-zb")
# Rounds of micro-batches (labs.schedules.generators.rounds): m must split into whole rounds.
ROUNDS = ("interleaved-1f1b", "interleaved-zb")

# Schedules that split the backward into I (input gradient) and W (weight gradient).
SPLIT_BACKWARD = ("zb-h1", "interleaved-zb", "zb-v", "dualpipe-v")
