"""EP12's controls: every field of the playground's query, grouped (the shared plan, then each
lab's own), each rendered by its type (a select with the episodes' own words for a choice, a
slider, a number within its bounds); the controls template calls ``control_groups``."""

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from app.cluster_controls import INTER, INTRA
from app.model_controls import model_choices
from app.options import gpu_options, model_options
from app.routers.pipeline import SCHEDULE_LABELS
from app.routers.playground_panels import (
    PANELS,
    SHARED_LABELS,
    PlaygroundQuery,
    control_choices,
    labels,
)
from labs.hardware.links import links


@dataclass(frozen=True)
class Control:
    name: str
    label: str
    kind: str  # select | number | slider
    value: Any
    options: tuple[tuple[str, str], ...] = ()
    low: float | None = None
    high: float | None = None
    unit: str = ""


SLIDERS = {"nodes": (1, 64, "nodes"), "pp": (1, 32, "stages"),
           "microbatches": (1, 128, "micro-batches"), "micro_batch": (1, 16, "sequences"),
           "virtual": (1, 8, "chunks per rank")}
SHARED_GROUPS = (
    ("Model and cluster", ("model", "gpu", "nodes", "gpus_per_node", "intra_link", "inter_link")),
    ("The plan: TP × PP × CP × DP = GPUs (DP follows the nodes and the degrees)",
     ("tp", "pp", "dp", "cp", "ep", "zero", "recompute", "schedule", "virtual", "micro_batch",
      "microbatches", "seq_len")),
)


@lru_cache(maxsize=1)
def _named_options() -> dict[str, tuple[tuple[str, str], ...]]:
    names = {k: v.name for k, v in links().items()}
    return {
        "model": model_options(), "gpu": gpu_options(),
        "intra_link": tuple((k, names[k]) for k in INTRA),
        "inter_link": tuple((k, names[k]) for k in INTER),
        "schedule": tuple(SCHEDULE_LABELS.items()),
    }


@lru_cache(maxsize=1)
def _choice_labels() -> dict[str, dict[str, str]]:
    """The words the episodes' own controls show for a choice, by the field's unprefixed name
    (round-18 cold reading B, finding 18: EP12's "more controls" showed raw ids, "adam16",
    "separate-pd", "every-2nd"), from the same records those episodes read."""
    from app.routers.rl import PLACEMENT_LABELS, recipes, stand_in_label
    from labs.core.catalogue import RECIPES
    from labs.core.recomputation import RECOMPUTATION
    from labs.parallel.rank_map import GROUP_SHORT, GROUP_TITLES

    return {
        "recipe": {k: r.label for k, r in RECIPES.items()},
        "recompute": {k: r.label for k, r in RECOMPUTATION.items()},
        "ep_dispatch": {"alltoall": "NCCL all-to-all", "deepep": "DeepEP"},
        "placement": dict(PLACEMENT_LABELS),
        "preset": {k: stand_in_label(r) for k, r in recipes().items()},
        "group": {k: f"{GROUP_SHORT[k]} ({GROUP_TITLES[k]})" for k in GROUP_SHORT},
        "kv_dtype": {"bf16": "BF16", "fp8": "FP8"},
        "pipeline_link": {"none": "none", **{k: v.name for k, v in links().items()}},
    }


def _choice_words(name: str, choice: str) -> str:
    """A choice's words for the control ``name`` (prefixed or not), or the choice itself."""
    for field, words in _choice_labels().items():
        if name == field or name.endswith("_" + field):
            return words.get(choice, choice)
    return choice


def _bounds(info) -> tuple[float | None, float | None]:
    low = high = None
    for meta in info.metadata:
        low = getattr(meta, "ge", getattr(meta, "gt", low))
        high = getattr(meta, "le", getattr(meta, "lt", high))
    return low, high


def control(name: str, label: str, value) -> Control:
    info = PlaygroundQuery.model_fields[name]
    choices, optional = control_choices(info)
    if name == "model":  # presets and, when the state uses one, the pasted model's code
        return Control(name, label, "select", value,
                       tuple(model_choices(_named_options()["model"], value, custom=False)))
    if name in _named_options():
        return Control(name, label, "select", value, _named_options()[name])
    if choices:
        opts = tuple((c, _choice_words(name, c)) for c in choices)
        return Control(name, label, "select", "" if value is None else value,
                       ((("", "lab default"),) if optional else ()) + opts)
    if bool in (info.annotation, *getattr(info.annotation, "__args__", ())):
        opts = (("true", "on"), ("false", "off"))
        shown = "" if value is None else ("true" if value else "false")
        return Control(name, label, "select", shown,
                       ((("", "lab default"),) if optional else ()) + opts)
    if name in SLIDERS:
        low, high, unit = SLIDERS[name]
        return Control(name, label, "slider", value, low=low, high=high, unit=unit)
    low, high = _bounds(info)
    return Control(name, label, "number", "" if value is None else value, low=low, high=high)


def control_groups(query) -> list[tuple[str, list[Control]]]:
    values = query.model_dump()
    groups = [(title, [control(n, SHARED_LABELS[n], values[n]) for n in names])
              for title, names in SHARED_GROUPS]
    names = labels()
    for panel in PANELS:
        own = [panel.show_field, *(panel.prefixed(f) for f in panel.own_fields())]
        groups.append((f"{panel.view.episode.code} · {panel.view.episode.topic}",
                       [control(n, names[n], values[n]) for n in own]))
    return groups
