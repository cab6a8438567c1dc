"""One way to write sizes, counts and shares, for charts, readouts and prose alike.

Bytes are decimal (GB = 10^9 bytes, TB = 10^12, PB = 10^15), as GPU vendors state memory
(NVIDIA's H100 datasheet: 80 GB), so a page never shows "14,168,336.2 GB". Counts read the
way model cards write them: 7B, 1.2T.
"""

import math

BYTE_UNITS = ((1e15, "PB"), (1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "kB"))
COUNT_UNITS = ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k"))


def _scaled(value: float, units) -> tuple[float, str]:
    """The largest unit that keeps the number at or above 1 (after rounding to 3 digits)."""
    size = abs(value)
    for scale, unit in units:
        # 999.96 GB rounds to "1,000.0 GB": promote it to TB instead.
        if size >= scale * 0.9995:
            return value / scale, unit
    return value, ""


def _digits(number: float) -> str:
    """Three significant figures at most, never a trailing ".0" past 100."""
    size = abs(number)
    if size >= 100:
        return f"{number:,.0f}"
    if size >= 10:
        return f"{number:,.1f}"
    return f"{number:,.2f}"


def fmt_bytes(value: float) -> str:
    """Bytes in decimal units: 7.0e9 -> "7.00 GB", 1.13e12 -> "1.13 TB", 0 -> "0 GB"."""
    if value == 0:
        return "0 GB"
    number, unit = _scaled(value, BYTE_UNITS)
    return f"{_digits(number)} {unit or 'B'}"


def fmt_gb2(value: float) -> str:
    """Bytes as GB with every digit to two decimals, no trailing zeros (24.5, 26.25, 27.56 GB):
    what each GPU sends in EP02, whose 2 × 15/16 × 14 GB is 26.25 (round-21 cold reading P,
    finding 17: fmt_bytes printed 26.2 beside the drill's 26.25). Below 1 GB, fmt_bytes."""
    return f"{round(value / 1e9, 2):g} GB" if value >= 1e9 else fmt_bytes(value)


def fmt_link_gbs(bytes_per_s: float) -> str:
    """A link preset's rate in GB/s as its preset states it, every digit it has (367.6,
    26.24, 48, 738): one physical link prints one figure on every page (round-19 cold reading
    X, finding 7: NVLink 4's ring printed as 367 in EP02 and 367.6 in EP03)."""
    return f"{bytes_per_s / 1e9:g}"


def fmt_busbw(bytes_per_s: float) -> str:
    """A bus bandwidth to three significant figures, so a formula the page prints with it gives
    the figure it prints (45.5 GB/s, 2.99 GB/s, 431 GB/s; round-13 cold reading of EP04,
    finding 7: "45 GB/s" beside a crossover that needs 45.5)."""
    return f"{_digits(bytes_per_s / 1e9)} GB/s"


def fmt_count(value: float, figures: int = 3) -> str:
    """A count as model cards write it: 7e9 -> "7B", 70.55e9 -> "70.6B", 1.2e12 -> "1.2T".
    ``figures`` asks for more significant figures where a sum must read right: EP12 step 7's
    rest of Mixtral, 1.606B, whose half is 803M ("1.61B" read as a half of 805M; round-16 cold
    reading, finding 2). Templates write it ``x|si_count(4)``."""
    number, unit = _scaled(value, COUNT_UNITS)
    if not unit:
        return f"{value:,.0f}"
    whole = len(f"{abs(number):.0f}")
    text = _digits(number) if figures == 3 else f"{number:,.{max(figures - whole, 0)}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return f"{text}{unit}"


def fmt_count_for(value: float, factor: float) -> str:
    """A count to the figures (three at least) that ``factor`` bytes times it needs to give
    the product the page prints, ``fmt_bytes(factor * value)``: EP03 step 8's "4 B × 2.1B =
    8.41 GB" read as 8.4 (issue 36, round 21); it prints 2.1013B."""
    want = fmt_bytes(factor * value)
    scale = next((s for s, unit in COUNT_UNITS if fmt_count(value).endswith(unit)), 1.0)
    for figures in range(3, 10):
        text = fmt_count(value, figures)
        number = float(text.rstrip("".join(u for _, u in COUNT_UNITS)).replace(",", ""))
        if fmt_bytes(factor * number * scale) == want:
            return text
    return fmt_count(value, 10)


def fmt_num(value: float, digits: int = 2) -> str:
    """A number with ``digits`` decimals and its thousands separated, as every figure the lab
    prints past 999 is: 1013.83 -> "1,013.83" (issue 36, round 16: EP02 printed "1013.83x").
    Templates write it ``x|num(2)``, never ``'%.2f'|format(x)``, which has no separator."""
    return f"{value:,.{digits}f}"


def fmt_times(value: float, digits: int = 2) -> str:
    """A speed-up: 1013.83 -> "1,013.83×"."""
    return f"{fmt_num(value, digits)}×"


def fmt_plain(value) -> str:
    """A value as the API gives it (a lesson's figure with no unit), its whole part's thousands
    separated: 1013.83 -> "1,013.83", 1024 -> "1,024"; anything else as str() writes it."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    text = repr(value)
    if "e" in text or "n" in text:  # 1e-05, inf, nan: as they are
        return text
    whole, _, fraction = text.partition(".")
    return f"{int(whole):,}" + (f".{fraction}" if fraction else "")


def tflops(flops_per_s: float) -> float:
    """A GPU's FLOP/s in TFLOP/s as a page prints the rate it computes with, to one decimal
    (674.4), so a worked line that multiplies the printed rate gives the printed result."""
    return round(flops_per_s / 1e12, 1)


def fmt_tflops(flops_per_s: float) -> str:
    """``tflops`` written out: 674.44e12 -> "674.4" (the unit follows in the prose)."""
    return f"{tflops(flops_per_s):,.1f}"


_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def fmt_sci(value: float) -> str:
    """A large or small count in scientific notation as prose writes it, three significant
    figures: 1.7209e14 -> "1.72 × 10¹⁴" (not Python's "1.72e+14")."""
    mantissa, exponent = f"{value:.2e}".split("e")
    return f"{mantissa} × 10{str(int(exponent)).translate(_SUPERSCRIPT)}"


def fmt_pct(fraction: float) -> str:
    """A fraction as a percentage with one decimal: 0.1795 -> "17.9%". A fraction short of 1
    that one decimal would round up to 100.0% keeps the digits that show it is short
    (0.99978 -> "99.98%"), so a page never prints 100.0% beside a loss it draws."""
    text = f"{100 * fraction:.1f}%"
    if text == "100.0%" and fraction < 1:
        for digits in (2, 3):
            text = f"{100 * fraction:.{digits}f}%"
            if not text.startswith("100."):
                break
        else:
            text = "99.999%"
    return text


def axis_unit(largest_bytes: float) -> tuple[float, str]:
    """(scale, unit) for an axis whose largest value is ``largest_bytes``: GB up to 1 TB,
    then TB, then PB, so tick labels stay short."""
    _, unit = _scaled(largest_bytes, BYTE_UNITS[:3])
    return {"PB": (1e15, "PB"), "TB": (1e12, "TB")}.get(unit, (1e9, "GB"))


def _nice_step(span: float, ticks: int = 6) -> float:
    """A 1, 2, 2.5 or 5 × 10^k step giving about ``ticks`` intervals over ``span``."""
    raw = span / ticks
    power = 10 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)


def gb_axis(top_bytes: float, per: str = "per GPU") -> dict:
    """A y-axis whose data are GB (so every chart's numbers stay in one unit) but whose ticks
    and title read in the unit the size calls for: 0.4, 0.8, 1.2 "TB per GPU", not 1,200 GB."""
    scale, unit = axis_unit(top_bytes)
    top = top_bytes / scale
    step = _nice_step(top)
    count = int(top / step + 1e-9) + 1
    values = [i * step for i in range(count)]
    return {
        "title": {"text": f"{unit} {per}"},
        "range": [0, top_bytes / 1e9],
        "tickmode": "array",
        "tickvals": [round(v * scale / 1e9, 6) for v in values],
        "ticktext": [f"{v:,.{_decimals(step)}f}" for v in values],
        "gridcolor": "#e6e9ef",
        "fixedrange": True,
    }


def gb_bar(name: str, x: list, values: list[float], hover: str, **marker) -> dict:
    """A bar trace of bytes on a ``gb_axis``: each bar in GB (3 places), its bytes as the page
    writes them in ``customdata`` for ``hover``; ``marker``: its colour, opacity, outline."""
    return {"type": "bar", "name": name, "x": x, "y": [round(v / 1e9, 3) for v in values],
            "marker": marker, "customdata": [fmt_bytes(v) for v in values],
            "hovertemplate": hover}


def _decimals(step: float) -> int:
    """Digits after the point that a tick step needs: 0.25 -> 2, 0.5 -> 1, 20 -> 0."""
    text = f"{step:.6f}".rstrip("0").rstrip(".")
    return len(text.split(".")[1]) if "." in text else 0


def fmt_params(value: float | str) -> str:
    """A custom parameter count as the control takes it, 7e9 or 6.72e9 (round-19 cold reading
    X, finding 16: the field showed the parsed float, "7000000000.0")."""
    if isinstance(value, str):
        return value
    return f"{value:g}".replace("e+0", "e").replace("e+", "e")


def fmt_factor_ms(seconds: float, count: int, total: float | None = None) -> str:
    """A time a count multiplies, in ms with the fewest decimals (two at least) whose product
    with the count prints as the printed result does, ``fmt_ms(total)`` (count × seconds by
    default; a state's whole all-reduce where its last bucket is smaller), so "13,352 ×
    0.2931 ms = 3,913 ms" adds up from what it prints (round-19 cold reading X, finding 8:
    "× 0.29 ms = 3,828 ms" gave 3,872)."""
    ms = seconds * 1e3
    whole = fmt_ms(count * seconds if total is None else total)
    for digits in range(2, 7):
        if fmt_ms(count * round(ms, digits) / 1e3) == whole:
            return f"{ms:,.{digits}f} ms"
    return f"{ms:,.6f} ms"


def fmt_ms(seconds: float) -> str:
    """Seconds as pages show them: milliseconds, three significant figures (0.0076 -> "7.60
    ms"), for every lab that quotes times."""
    ms = seconds * 1e3
    return f"{ms:,.0f} ms" if ms >= 100 else f"{ms:,.1f} ms" if ms >= 10 else f"{ms:,.2f} ms"


_YEAR_S = 365.25 * 86_400  # the Julian year


def fmt_duration(seconds: float) -> str:
    """A span of wall time in the unit that reads best, three significant figures:
    5.42 ms, 11.0 s, 41.7 min, 3.09 h, 2.06 days, 5.78 years. A year is the Julian year of
    365.25 days, so 2,111.5 days reads 5.78 years (with 365 days it sat on the rounding edge,
    5.785, and printed 5.79)."""
    if seconds < 1:
        return f"{seconds * 1e3:.3g} ms"
    for unit, size, below in (("s", 1, 60), ("min", 60, 3600), ("h", 3600, 172_800),
                              ("days", 86_400, _YEAR_S)):
        if seconds < below:
            return f"{seconds / size:.3g} {unit}"
    return f"{seconds / _YEAR_S:,.3g} years"


def worked_digits(values: tuple[float, ...], places: tuple[int, ...], checks, spare: int = 5
                  ) -> tuple[str, ...]:
    """``values`` printed for a worked sum: each with its own ``places`` of decimals, or as
    few more as it takes (``spare`` at most, in all) for every check to hold on the printed
    figures. A check is (formula, figure, format): the formula run on the printed values must
    print as the engine's figure does, so a student who redoes the sum gets the page's figure
    (TEACHING.md, "Numbers"; round-21 cold reading Q, finding 5: 549 ÷ 47.4 gave 2,534 where
    the page printed the engine's 2,535). Raises ValueError if no spread of places does."""
    from itertools import product

    for extra in range(spare + 1):  # the fewest more places, spread as evenly as may be
        spreads = [a for a in product(range(extra + 1), repeat=len(values)) if sum(a) == extra]
        for adds in sorted(spreads, key=max):
            texts = tuple(f"{v:,.{p + a}f}" for v, p, a in zip(values, places, adds, strict=True))
            shown = [float(t.replace(",", "")) for t in texts]
            if all(fmt(formula(*shown)) == fmt(figure) for formula, figure, fmt in checks):
                return texts
    raise ValueError(f"no printing of {values} within {spare} more places gives {checks}")
