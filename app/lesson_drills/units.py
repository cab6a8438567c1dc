"""How drills print the lab's figures (a choice's feedback, a decide drill's solution)."""

import math


def gb(value: float) -> str:
    return f"{value / 1e9:,.1f} GB"


def mb(value: float) -> str:
    return f"{value / 1e6:,.0f} MB"


def ms(value: float) -> str:
    return f"{value * 1e3:,.1f} ms"


def pct(value: float) -> str:
    return f"{value * 100:,.1f}%"


def per_s(value: float) -> str:
    return f"{value:,.2f} samples/s"


def ms_or_unfit(value: float) -> str:
    return "does not fit" if math.isinf(value) else ms(value)
