"""The Jinja2 environment shared by every router."""

from pathlib import Path

from fastapi.templating import Jinja2Templates

from app.assets import asset_url
from app.charts.pipeline import memory_ranks, schedule_name
from app.charts.units import fmt_bytes, fmt_count, fmt_pct
from app.episodes import EPISODES

TEMPLATES = Path(__file__).resolve().parent.parent / "templates"

templates = Jinja2Templates(directory=TEMPLATES)
templates.env.globals.update(asset_url=asset_url, episodes=EPISODES)


def gb(value: float) -> str:
    """Bytes as decimal GB (10^9), the unit pages show."""
    return f"{value / 1e9:,.1f}"


def tb(value: float) -> str:
    """Bytes as decimal TB (10^12)."""
    return f"{value / 1e12:,.2f}"


def options(values, fmt: str = "{}") -> list[tuple]:
    """(value, text) pairs for a select, from plain values."""
    return [(v, fmt.format(v)) for v in values]


templates.env.filters.update(gb=gb, tb=tb, options=options)
# Sizes in GB/TB/PB, counts as 7B/1.2T, shares as 17.9%: the charts' own formatters.
templates.env.filters.update(bytes=fmt_bytes, si_count=fmt_count, pct=fmt_pct,
                            schedule_name=schedule_name, chart_ranks=memory_ranks)
# EP07: times as the pages show them (ms).
from app.charts.units import fmt_ms  # noqa: E402

templates.env.filters.update(ms=fmt_ms)
