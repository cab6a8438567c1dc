"""What the Megatron-LM and torchtitan readers share: the text's bounds, ANSI colour codes
stripped, a printed value read back, a shape matched to a preset, and a plan's degrees checked
against the world size before EP08 sees them."""

from __future__ import annotations

import math
import re
import statistics

from labs.core.errors import LabInputError
from labs.core.limits import MAX_LOG_BYTES, MODEL_BOUNDS
from labs.model.code import canonical, encode
from labs.model.presets import models
from labs.model.spec import ModelSpec

FIELD = "log"  # the form and API field every reading error names
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")  # torchtitan's Color codes (torchtitan/tools/utils)
NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"


def text_of(raw: str | bytes) -> str:
    """The pasted text, bounded (MAX_LOG_BYTES, checked before decoding) and ANSI-free."""
    if isinstance(raw, bytes):
        if len(raw) > MAX_LOG_BYTES:
            raise LabInputError(FIELD, too_large())
        raw = raw.decode("utf-8", "replace")
    if not isinstance(raw, str):
        raise LabInputError(FIELD, "paste the log as text")
    if len(raw.encode("utf-8", "replace")) > MAX_LOG_BYTES:
        raise LabInputError(FIELD, too_large())
    return ANSI.sub("", raw.replace("\r\n", "\n").replace("\r", "\n"))


def too_large() -> str:
    return (f"more than the {MAX_LOG_BYTES:,}-byte limit: paste the arguments block (or the "
            "TOML) and a few dozen iteration lines")


def value(text: str) -> object:
    """A printed Python value read back: None, True/False, an int, a float or the string."""
    text = text.strip()
    if text == "None":
        return None
    if text in ("True", "False"):
        return text == "True"
    if re.fullmatch(r"[-+]?\d{1,18}", text):
        return int(text)
    if re.fullmatch(NUMBER, text):
        number = float(text)
        return number if number == number and abs(number) != float("inf") else text
    return text


def finite(text: str) -> float | None:
    """A printed number, or None when it is not finite (1e400, 10^400 digits): a log line
    with such a figure is read as saying nothing."""
    try:
        number = float(text.replace(",", ""))
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def whole(name: str, found: object, low: int = 1, high: int = 1 << 40) -> int:
    """A degree or size the log gives, as a whole number in bounds (else a 422 naming it)."""
    if isinstance(found, bool) or not isinstance(found, int) or not low <= found <= high:
        raise LabInputError(FIELD, f"{name} = {found!r} in the log: expected a whole number "
                                   f"from {low:,} to {high:,}")
    return found


def shape(name: str, found: object) -> int:
    low, high = MODEL_BOUNDS[name]
    return whole(name, found, low, high)


def model_value(spec: ModelSpec) -> tuple[str, ModelSpec, bool]:
    """(a preset's id, the preset, True) when the shape is a preset's (same model code), else
    (the shape's code, its canonical spec, False)."""
    code = encode(spec)
    for preset_id, preset in models().items():
        if encode(preset) == code:
            return preset_id, preset, True
    return code, canonical(spec), False


def check_world(tp: int, pp: int, cp: int, dp: int, world: int | None, where: str) -> int:
    """TP x PP x CP x DP must be the world size (Megatron's initialize_model_parallel rule)."""
    product = tp * pp * cp * dp
    if world is not None and product != world:
        raise LabInputError(FIELD, f"contradictory arguments in the {where}: TP {tp} × PP {pp} "
                                   f"× CP {cp} × DP {dp} = {product:,}, but the world size is "
                                   f"{world:,}")
    return product


def microbatches(global_batch: int, micro_batch: int, dp: int, where: str) -> int:
    per_step = micro_batch * dp
    if global_batch % per_step:
        raise LabInputError(FIELD, f"contradictory arguments in the {where}: the global batch "
                                   f"{global_batch:,} is not a multiple of micro-batch "
                                   f"{micro_batch} × DP {dp}")
    return global_batch // per_step


def params_of(fields: dict[str, object]) -> tuple[tuple[str, str], ...]:
    """EP08 controls as a URL carries them (booleans as true/false)."""
    return tuple((k, ("true" if v else "false") if isinstance(v, bool) else str(v))
                 for k, v in fields.items())


def no_lines(looked_for: str) -> LabInputError:
    return LabInputError(FIELD, f"no recognisable lines: looked for {looked_for}")
