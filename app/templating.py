"""The Jinja2 environment shared by every router."""

import threading
from collections import OrderedDict
from pathlib import Path

import orjson
from fastapi.templating import Jinja2Templates
from jinja2 import Template
from jinja2.runtime import Context, Macro
from markupsafe import Markup, _escape_inner

from app.assets import asset_url
from app.charts.context_parallel import rank_colour, token_ranges
from app.charts.pipeline import LABEL_BARS, MAX_BARS, event_kinds, memory_ranks, schedule_name
from app.charts.units import (
    fmt_busbw,
    fmt_bytes,
    fmt_count,
    fmt_count_for,
    fmt_gb2,
    fmt_link_gbs,
    fmt_pct,
)
from app.episodes import EPISODES
from app.settings import SETTINGS, url
from labs.core.catalogue import ACTIVATION_MODEL_RECORDS
from labs.core.recomputation import RECOMPUTATION
from labs.model.code import count_label
from labs.recipe.plan_space import PLAN_VIRTUAL

TEMPLATES = Path(__file__).resolve().parent.parent / "templates"


class _Renders(threading.local):
    def __init__(self) -> None:
        self.made: list[list[Context]] = []  # per render under way: the contexts it made


_RENDERS = _Renders()


_MARKUP = str.__new__  # _MARKUP(Markup, text): Markup(text) for a plain str, without its checks


def escape(value) -> Markup:
    """markupsafe's ``escape``, the same Markup of the same text (markupsafe's own escaping,
    ``_escape_inner``, its C speedup), in one Python call where it takes two: Markup's own
    constructor (a Python function: an ``__html__`` look-up, then ``super()``) is skipped for
    the plain str that escaping gives, and a Markup is returned as it is, not copied. Every
    ``{{ ... }}`` of an autoescaped template calls it (issue 31: about 180 times an answer,
    130 of them on a str; escape and Markup's constructor were 5% of a render process's CPU in
    a py-spy profile of 4,000 class answers)."""
    if type(value) is str:
        return _MARKUP(Markup, _escape_inner(value))
    if type(value) is Markup:  # a macro's output, say: markupsafe returns a copy of it
        return value
    if hasattr(value, "__html__"):
        return Markup(value.__html__())
    return _MARKUP(Markup, _escape_inner(str(value)))


class _Context(Context):
    """Jinja's context, noted by the render under way that made it (``_Template``)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if _RENDERS.made:
            _RENDERS.made[-1].append(self)

    def call(__self, __obj, *args, **kwargs):  # noqa: N805 - Jinja's own signature
        """A template's call (``{{ f(x) }}``, ``{% call %}``), as Jinja's: a macro, which takes
        neither the context nor the environment (neither it nor its ``__call__`` is marked
        ``pass_context`` and the like), is called without Jinja's four look-ups for the marks
        (issue 31: about 55 macro calls an answer)."""
        if type(__obj) is not Macro:
            return super().call(__obj, *args, **kwargs)
        kwargs.pop("_block_vars", None)
        kwargs.pop("_loop_vars", None)
        try:
            return __obj(*args, **kwargs)
        except StopIteration:
            return __self.environment.undefined(
                "value was undefined because a callable raised a StopIteration exception")


class _Template(Template):
    """A template whose render leaves no reference cycle behind. A template that defines a
    macro, or imports one (``{% import ... with context %}``), makes a cycle: the context
    holds the macro (its ``vars``), the macro's function holds the context. Each such context
    holds the render's variables (``parent``: the charts, their figures, the result), so every
    answer's figures outlived it until a garbage collection found the cycle, and each young
    collection walked them first (issue 31: about 280 objects of cyclic garbage an answer, a
    tenth of a render process's CPU in its collections). Once the text is written, nothing
    reads those contexts again: their variables are dropped, the cycles broken, and the
    answer's objects freed as soon as it is."""

    def render(self, *args, **kwargs) -> str:
        made: list[Context] = []
        _RENDERS.made.append(made)
        try:
            return super().render(*args, **kwargs)
        finally:
            _RENDERS.made.pop()
            for context in made:
                context.vars.clear()
                context.parent = {}

    @classmethod
    def _from_namespace(cls, environment, namespace, globals):
        # A compiled template's module: its ``{{ ... }}`` escape with ``escape`` above, the
        # same text as markupsafe's (Jinja imports markupsafe's into the module: runtime.py).
        namespace["escape"] = escape
        return super()._from_namespace(environment, namespace, globals)

    def _get_default_module(self, ctx=None):
        # An import without context is made once and kept by the template (``_module``),
        # its macros called by every later render: its context is never dropped.
        _RENDERS.made.append([])
        try:
            return super()._get_default_module(ctx)
        finally:
            _RENDERS.made.pop()


templates = Jinja2Templates(directory=TEMPLATES)
templates.env.context_class = _Context
templates.env.template_class = _Template
# Templates are compiled once (compile_templates below) and never change under a running
# server: without this, every render of every include stats its file for a change (Jinja's
# auto_reload). Restart the app after editing a template (docs/capacity.md).
templates.env.auto_reload = False
# Figure JSON as compact as JSON goes and in the figure's own key order: Jinja's default policy
# sorts keys (Jinja docs, "Policies": json.dumps_kwargs), which costs time on every chart and
# buys nothing here (plotly reads keys by name).
templates.env.policies["json.dumps_kwargs"] = {"separators": (",", ":")}
# url('/episodes/memory'): every link, form and hx-get an app template writes goes through it,
# so the whole site follows BASE_PATH (app/settings.py).
templates.env.globals.update(asset_url=asset_url, episodes=EPISODES, url=url,
                             base_path=SETTINGS.base_path, hide_answers=SETTINGS.hide_answers)
# EP05's Gantt: one bar per action up to MAX_BARS, micro-batch labels up to LABEL_BARS; the note
# under the chart says which, from the same constants as the chart (app/charts/pipeline.py).
templates.env.globals.update(gantt_max_bars=MAX_BARS, gantt_label_bars=LABEL_BARS)
# EP08's plan search: the interleaved chunk counts it tries, as the twod chart's note says
# (round-20 audit N1: a 10-chunk plan beat its "best" on 1,024 GPUs, unsaid).
templates.env.globals.update(plan_virtual=PLAN_VIRTUAL)
# The shared choices' option lists, (value, text) pairs from their records (labs.core.catalogue).
templates.env.globals.update(
    recompute_options=tuple((k, r.label) for k, r in RECOMPUTATION.items()),
    activation_model_options=tuple((k, a.label) for k, a in ACTIVATION_MODEL_RECORDS.items()))


# A partial whose HTML depends only on the plain data it is given (``kept``): rendered once per
# distinct data, at most KEPT_PARTIALS of them per process (least recently used dropped).
KEPT_PARTIALS = 256
_KEPT: OrderedDict[tuple[str, bytes], Markup] = OrderedDict()
_KEPT_LOCK = threading.Lock()
_PLAIN = orjson.OPT_PASSTHROUGH_SUBCLASS | orjson.OPT_PASSTHROUGH_DATACLASS


def _not_plain(value):
    raise TypeError(type(value).__name__)


def kept(name: str, **data) -> Markup:
    """``{{ kept("partials/_tp_split.html", split=split) }}``: the partial ``name`` rendered with
    ``data`` alone (and the globals), as ``{% include %}`` would draw it where it reads nothing
    else. Its HTML is kept by ``name`` and the data's JSON, so one answer never gets another's:
    the key is every input the partial reads. Data that is not plain JSON (a Markup string, an
    object) is rendered every time (issue 31: EP04's split diagram, ~180 template calls an
    answer, depends only on the model's shape, t and SP)."""
    template = templates.env.get_template(name)
    try:
        key = (name, orjson.dumps(data, default=_not_plain, option=_PLAIN))
    except TypeError:
        return Markup(template.render(**data))
    with _KEPT_LOCK:
        html = _KEPT.get(key)
        if html is not None:
            _KEPT.move_to_end(key)
            return html
    html = Markup(template.render(**data))
    with _KEPT_LOCK:
        _KEPT[key] = html
        while len(_KEPT) > KEPT_PARTIALS:
            _KEPT.popitem(last=False)
    return html


templates.env.globals.update(kept=kept)


def gb(value: float) -> str:
    """Bytes as decimal GB (10^9), the unit pages show."""
    return f"{value / 1e9:,.1f}"


def tb(value: float) -> str:
    """Bytes as decimal TB (10^12)."""
    return f"{value / 1e12:,.2f}"


def options(values, fmt: str = "{}") -> list[tuple]:
    """(value, text) pairs for a select, from plain values."""
    return [(v, fmt.format(v)) for v in values]


NUMBER_WORDS = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
                "ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen",
                "seventeen", "eighteen", "nineteen", "twenty")


def spelled(count: int) -> str:
    """A count in words as prose writes it ("ten"); digits past twenty."""
    return NUMBER_WORDS[count] if 0 <= count < len(NUMBER_WORDS) else f"{count:,}"


templates.env.filters.update(gb=gb, tb=tb, options=options, spelled=spelled)
# A parameter count with the model menu's digits (405.9B, 70.6B): EP01's ledger.
templates.env.filters.update(model_count=count_label)
# What each GPU sends in EP02, to two decimals: 26.25 GB.
templates.env.filters.update(gb2=fmt_gb2)
# Sizes in GB/TB/PB, counts as 7B/1.2T, shares as 17.9%: the charts' own formatters.
templates.env.filters.update(bytes=fmt_bytes, si_count=fmt_count, si_count_for=fmt_count_for,
                            pct=fmt_pct, busbw=fmt_busbw,
                            link_gbs=fmt_link_gbs,
                            schedule_name=schedule_name, chart_ranks=memory_ranks,
                            event_kinds=event_kinds)
# Times as the pages show them (ms).
from app.charts.units import (  # noqa: E402
    fmt_duration,
    fmt_factor_ms,
    fmt_ms,
    fmt_num,
    fmt_params,
    fmt_plain,
    fmt_sci,
    fmt_tflops,
    fmt_times,
)

templates.env.filters.update(ms=fmt_ms, duration=fmt_duration, tflops=fmt_tflops, sci=fmt_sci)
# A time a printed count multiplies, with the digits its printed product needs (EP02 steps 5
# and 6); a custom parameter count as the model control takes it (7e9).
templates.env.filters.update(factor_ms=fmt_factor_ms, params_text=fmt_params)
# Numbers past 999 with their thousands separated (1,013.83×): num(2), times(2), plain.
templates.env.filters.update(num=fmt_num, times=fmt_times, plain=fmt_plain)
# Tokens per GPU (T*, a state's tokens) as the crossover chart labels them, so the chart, its
# note, its table and the prose round the one figure once, alike (EP02, EP03).
from app.charts.crossover import tokens  # noqa: E402

templates.env.filters.update(tokens=tokens)
# EP06: a rank's colour in the mask, and a rank's tokens as runs (0–1, 6–7).
templates.env.filters.update(rank_colour=rank_colour, token_ranges=token_ranges)


# The glossary's inline definitions at each term's first use in a lesson (app/glossary.py).
from app.glossary import define_terms  # noqa: E402

templates.env.filters.update(define_terms=define_terms)
templates.env.globals.update(terms_seen=set)


def placed_in(drill, html: str) -> bool:
    """Whether a lesson's steps already hold this drill (templates/partials/_predict.html)."""
    return f'id="drill-{drill.id}"' in str(html)


templates.env.tests.update(placed_in=placed_in)


def compile_templates() -> None:
    """Compile every template before the first student arrives: Jinja compiles on first use,
    about 1 s for all of them, which a class's first page loads would otherwise wait for (the
    app's start, app/main.py, and each render pool child, app/render_pool.py)."""
    for name in templates.env.list_templates(extensions=["html"]):
        templates.env.get_template(name)
