"""Rendering a lab's state as HTML: the lesson page, the htmx fragment and the iframe embed.

Templates get the state's *typed* values (``query``) and, apart, the strings of the controls
that failed (``raw``): a template never compares a user's string with a number.
"""

import re
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import urlencode

import orjson
from fastapi import Request
from fastapi.responses import Response
from jinja2 import pass_context
from jinja2.utils import htmlsafe_json_dumps
from markupsafe import Markup, escape
from starlette.datastructures import URL

from app.labkit.parsing import State, parse, parse_with_fallback
from app.labkit.view import FORM, VIEWS, Diagram, LabView
from app.settings import SETTINGS
from app.templating import templates

VARY = {"Vary": "HX-Request, HX-Target, HX-History-Restore-Request"}
THEMES = ("light", "dark")


def public_origin(request: Request) -> str:
    """The site's origin as embed codes spell it: PUBLIC_URL when set (a forged Host header
    then never reaches a snippet), else the request's own (a laptop, a test)."""
    if SETTINGS.public_url:
        return SETTINGS.public_url
    server = request.scope.get("server")
    return request_origin(request.scope.get("scheme", "http"), request.headers.get("host"),
                          None if server is None else tuple(server))


@lru_cache(maxsize=64)
def request_origin(scheme: str, host: str | None, server: tuple | None) -> str:
    """A request's origin as Starlette's ``request.url`` spells it, from what it reads for
    it: the scheme, the first Host header, the server's address. The whole URL, query and all,
    was built and split again for it on every answer (issue 31: 0.8% of a class's misses)."""
    headers = [] if host is None else [(b"host", host.encode("latin-1"))]
    url = URL(scope={"scheme": scheme, "server": server, "path": "/", "headers": headers})
    return f"{url.scheme}://{url.netloc}"


def public_base_url(request: Request) -> str:
    """The site's address as embed codes and share links spell it: origin and BASE_PATH."""
    return public_origin(request) + SETTINGS.base_path


def with_query(path: str, query: str) -> str:
    """A path and its query string, with no dangling '?' when the query is empty."""
    return f"{path}?{query}" if query else path


def state_query(state: State) -> str:
    """The canonical URL query of a state: the controls that differ from their defaults."""
    return urlencode(state.query.model_dump(exclude_defaults=True, mode="json"))


def page_query(view: LabView, state: State) -> str:
    """``state_query``, except where it is empty on a view with an opening (LabView.opening):
    the defaults' state then names the opening's controls at its own values, since the bare
    URL would draw the opening instead."""
    query = state_query(state)
    if query or not view.opening:
        return query
    values = state.query.model_dump(mode="json")
    return urlencode({name: values[name] for name in view.opening})


def page_items(view: LabView, items: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """A lesson page's query: its opening (LabView.opening) where it gives no control."""
    fields = view.query_model.model_fields
    if view.opening and not any(key in fields and value != "" for key, value in items):
        return [(name, str(value)) for name, value in view.opening.items()]
    return items


def embed_path(view: LabView, diagram: Diagram | None = None) -> str:
    return f"/embed/{view.name}/{diagram.name}" if diagram else f"/embed/{view.name}"


@dataclass(frozen=True)
class Chart:
    """One diagram of the state drawn, as templates use it (see partials/_figure.html)."""

    name: str
    title: str
    element_id: str
    figure: dict | None  # None: this state cannot draw it
    embed_url: str  # relative, at the state drawn
    embed_height: int
    # A lazy diagram's own route at the state drawn (relative; "" for the others): on the page
    # its figure is None and partials/_figure.html's ``lazy`` fetches this when it comes near.
    lazy_url: str = ""


def error_slots(view: LabView) -> list[str]:
    """Every error slot of a lab's form: one per control, plus the form's own."""
    return [*view.query_model.model_fields, FORM]


@lru_cache(maxsize=64)  # one per lab
def cleared_error_slots(lab: str) -> Markup:
    """Every error slot of a lab's form, empty, out of band: what each answer to a control
    change sends after its diagram. The same bytes for every state of the lab, so drawn once
    (issue 31: 0.05-0.24 ms of each answer's template, the playground's the most)."""
    return Markup(templates.get_template("partials/_errors_oob.html").render(
        fields=error_slots(VIEWS[lab]), errors={}))


templates.env.globals["cleared_error_slots"] = cleared_error_slots


# An embed code: the iframe at a state, and the script that lets the host page resize it to the
# height the embed reports by postMessage (only for messages from this site's origin).
EMBED_IFRAME = ('<iframe src="{src}" width="100%" height="{height}" style="border:0;width:100%" '
                'loading="lazy" title="Parallelism Lab: {title}"></iframe>\n')
EMBED_SCRIPT = ('<script>addEventListener("message",function(e){{var d=e.data;'
                'if(e.origin!=={origin}||!d||d.type!=="parallelism-lab:height")return;document.querySelectorAll("iframe")'
                '.forEach(function(f){{if(f.contentWindow===e.source)f.style.height=d.height+"px"}})'
                '}})</script>')
EMBED_CHOICE = ('\n  <p class="embed-choice"><label for="{id}">{label}</label></p>\n'
                '  <textarea id="{id}" rows="3" readonly>{code}</textarea>\n'
                '  <button type="button" data-copy-target="{id}">Copy</button>\n  ')


@pass_context
def embed_codes(ctx) -> Markup:
    """"Embed a diagram" (partials/_embed_code.html): an iframe code at the state drawn for each
    diagram the state draws, and one for the whole lab; nothing inside an embed. Written here
    rather than by a Jinja loop and macro, since every answer to a control change carries it
    (issue 31)."""
    if ctx["embedding"]:
        return Markup()
    view, episode, base = ctx["view"], ctx["episode"], escape(ctx["base_url"])
    script = EMBED_SCRIPT.format(origin=htmlsafe_json_dumps(ctx["public_origin"]))

    def choice(element_id: str, label: str, url: str, height: int, title: str) -> str:
        code = EMBED_IFRAME.format(src=base + escape(url), height=escape(height),
                                   title=escape(title)) + script
        return EMBED_CHOICE.format(id=element_id, label=label, code=code)

    lab = escape(view.name)
    parts = ['\n<details class="embed">\n  <summary>Embed a diagram</summary>\n  ']
    for c in ctx["charts"].values():
        diagram = view.diagram(c.name)
        if c.figure or (diagram is not None and diagram.template):
            parts.append(choice(f"embed-code-{lab}-{escape(c.name)}", escape(c.title),
                                c.embed_url, c.embed_height, c.title))
    parts.append(choice(f"embed-code-{lab}", f"Every diagram of {escape(episode.code)}",
                        ctx["embed_url"], view.embed_height, episode.title))
    parts.append('<p class="embed-note">Add <code>&amp;theme=dark</code> for a dark page, '
                 '<code>&amp;controls=1</code> to let readers move the controls.</p>\n'
                 '</details>\n')
    return Markup("".join(parts))


templates.env.globals["embed_codes"] = embed_codes

# A figure's JSON as Jinja's ``tojson`` writes it (templating.py's compact separators, every
# character past ASCII as a \\u escape, then <, >, & and ' escaped for a script element:
# jinja2.utils.htmlsafe_json_dumps), by orjson: 0.026 ms of CPU a figure against json's 0.06
# over tools/snapshot.py's 1,020 figures, the same values (both write a float as its shortest
# round trip, though orjson spells a small one 0.00001 where json writes 1e-05: those
# figures compared by value, the rest byte for byte). An int key is written as its string, as
# json does.
NON_ASCII = re.compile(r"[^\x00-\x7f]")


def _ascii(match: re.Match) -> str:
    """One character past ASCII as json's ensure_ascii writes it (a surrogate pair past the
    Basic Multilingual Plane)."""
    code = ord(match.group())
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 | code >> 10:04x}\\u{0xDC00 | code & 0x3FF:04x}"


def figure_json(figure: dict) -> str:
    text = orjson.dumps(figure, option=orjson.OPT_NON_STR_KEYS).decode()
    if not text.isascii():
        text = NON_ASCII.sub(_ascii, text)
    return (text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("'", "\\u0027"))


CHART = ('\n\n<div id="{id}" class="chart{extra}" hx-preserve="true" role="figure" '
         'aria-label="{summary}"></div>\n<script type="application/json" class="figure" '
         'data-target="{id}" data-state="{state}">{json}</script>\n')


VEILED_LABEL = "This chart's figures show once its step is guessed."


def chart_label(figure: dict, embedding: bool) -> str:
    """A chart's aria-label as the server writes it. On a lesson page a masked chart's
    (``layout.meta.masked``) is what lab.js says while the chart is veiled (``summaryOf``):
    each owner's part of the summary masked, or, with none, that the figures wait for the
    guess. A screen reader reads the label before lab.js has drawn, and the summary states
    the answer (issue 36); lab.js writes the real one once the step is guessed."""
    summary = figure.get("summary", "")
    meta = (figure.get("layout") or {}).get("meta") or {}
    if embedding or "masked" not in meta:
        return summary
    parts = [owner["summary"] for owner in meta.get("owners", []) if "summary" in owner]
    for part, mask in parts:
        summary = summary.replace(part, mask)
    return summary if parts else VEILED_LABEL


@pass_context
def figure_chart(ctx, name: str, extra_class: str = "") -> Markup:
    """One chart of a lab (partials/_figure.html's ``chart``): its div and its figure JSON,
    which lab.js draws with Plotly.react; nothing where the state cannot draw it. Written here
    rather than by a Jinja macro: an answer draws 3-10 of them (issue 31)."""
    c = ctx["charts"][name]
    if not c.figure:
        return Markup("\n")
    text = figure_json(c.figure)
    return Markup(CHART.format(id=escape(c.element_id),
                               extra=f" {escape(extra_class)}" if extra_class else "",
                               summary=escape(chart_label(c.figure, ctx.get("embedding"))),
                               state=escape(ctx["state_query"]), json=text))


templates.env.globals["figure_chart"] = figure_chart


@pass_context
def figure_summary(ctx, name: str) -> Markup:
    """A chart's summary as its caption writes it, each part a step asks for (the figure's
    ``layout.meta.owners``: ``summary``, its text and its mask) masked on a lesson page until
    that step's guess (an ``answer-mask`` span, static/js/lab.js)."""
    figure = ctx["charts"][name].figure or {}
    text = escape(figure.get("summary", ""))
    owners = ((figure.get("layout") or {}).get("meta") or {}).get("owners", [])
    # An owner of the whole caption masks it alone: the other owners' spans would nest in
    # it, and lab.js puts a lifted mask back as text, so theirs would not come back anyway.
    whole = [o for o in owners if o.get("summary", [None])[0] == figure.get("summary")]
    for owner in whole[:1] or owners:
        if "summary" not in owner:
            continue
        part, mask = (escape(t) for t in owner["summary"])
        text = text.replace(part, Markup(
            f'<span class="answer-mask" data-after-guess="{escape(owner["step"])}" '
            f'data-mask="{mask}">{part}</span>'))
    return Markup(text)


templates.env.globals["figure_summary"] = figure_summary


def context(request: Request, view: LabView, state: State, errors: dict[str, str],
            raw: dict[str, str], alone: Diagram | None = None) -> dict:
    """``alone``: the one diagram asked for (its embed, or a lazy diagram's route), whose
    figure is drawn even where it is lazy; a lazy diagram's figure is drawn for nothing else."""
    figures = view.figures(state.result)
    if alone is not None and alone.lazy_template and view.lazy_figures:
        figures = {**figures, **view.lazy_figures(state.result)}
    query = page_query(view, state)
    extra = dict(view.extra_context(state)) if view.extra_context else {}
    # A lab's own complaints about a state it drew (EP12: a panel that refuses it), shown in
    # the controls' error slots beside the query's own errors, which win.
    errors = {**extra.pop("control_errors", {}), **errors}
    charts = {
        d.name: Chart(d.name, d.title, view.element_id(d), figures.get(d.name),
                      with_query(embed_path(view, d), query), d.embed_height,
                      with_query(view.lazy_path(d), query) if d.lazy_template else "")
        for d in view.diagrams
    }
    return {
        "view": view,
        "episode": view.episode,
        "state": state,
        "result": state.result,
        "query": state.query.model_dump(),  # typed values of the state drawn
        "raw": raw,  # {control: the string given}, for controls whose value was refused
        "charts": charts,
        "errors": errors,
        "fields": error_slots(view),
        "labels": view.control_labels,
        "state_query": query,
        "page_url": with_query(view.episode.url, query),
        "embed_url": with_query(embed_path(view), query),
        "base_url": public_base_url(request),
        "public_origin": public_origin(request),  # what an embed's postMessage comes from
        "embedding": False,
        **extra,
    }


def is_fragment(request: Request) -> bool:
    # A history restore must get the full page (htmx docs, "History Support").
    return (
        request.headers.get("hx-request") == "true"
        and request.headers.get("hx-history-restore-request") != "true"
    )


def _errors_only(request: Request, view: LabView, errors: dict[str, str]) -> Response:
    # Keep the last good chart: swap nothing but the error slots (out of band), and do not
    # push the bad state into the history.
    headers = {**VARY, "HX-Reswap": "none", "HX-Push-Url": "false"}
    return templates.TemplateResponse(
        request, "partials/_errors_oob.html",
        {"errors": errors, "fields": error_slots(view)}, status_code=422, headers=headers,
    )


def render_page(request: Request, view: LabView) -> Response:
    items = page_items(view, request.query_params.multi_items())
    if is_fragment(request):
        state, errors, raw = parse(view, items)
        if state is None:
            return _errors_only(request, view, errors)
        # Case buttons and step links replace the whole bench (controls too); a control
        # change replaces only the diagram and clears the error slots out of band.
        template = (
            "partials/_bench.html" if request.headers.get("hx-target") == "bench"
            else "partials/_fragment.html"
        )
        ctx = context(request, view, state, errors, {})
        return templates.TemplateResponse(request, template, ctx, headers=VARY)
    state, errors, raw = parse_with_fallback(view, items)
    ctx = context(request, view, state, errors, raw)
    return templates.TemplateResponse(
        request, view.page_template, ctx, status_code=422 if errors else 200, headers=VARY
    )


def render_embed(request: Request, view: LabView, diagram: Diagram | None) -> Response:
    """The whole lab's diagram section, or one diagram: a title, the link back to the lesson,
    the chart, and with ``controls=1`` the lab's form (which then swaps this embed)."""
    items = request.query_params.multi_items()
    theme = request.query_params.get("theme", "light")
    show_controls = request.query_params.get("controls") == "1"
    if is_fragment(request):
        state, errors, raw = parse(view, items)
        if state is None:
            return _errors_only(request, view, errors)
        ctx = context(request, view, state, errors, {}, diagram)
        ctx.update(embedding=True, diagram=diagram)
        return templates.TemplateResponse(request, "partials/_fragment.html", ctx, headers=VARY)
    state, errors, raw = parse_with_fallback(view, items)
    ctx = context(request, view, state, errors, raw, diagram)
    ctx.update(
        embedding=True, diagram=diagram,
        theme=theme if theme in THEMES else "light", show_controls=show_controls,
    )
    return templates.TemplateResponse(
        request, "embed.html", ctx, status_code=422 if errors else 200, headers=VARY
    )


def render_lazy(request: Request, view: LabView, diagram: Diagram) -> Response:
    """A lazy diagram (Diagram.lazy_template) at a state: to htmx, the partial the lesson's
    placeholder swaps in; otherwise a page of its own, with the link back to the lesson at
    that state (the placeholder's link, for a browser without JavaScript). A bad query is a
    422: to htmx, its error slots only; otherwise the page at the nearest valid state."""
    items = request.query_params.multi_items()
    if is_fragment(request):
        state, errors, _ = parse(view, items)
        if state is None:
            return _errors_only(request, view, errors)
        ctx = context(request, view, state, errors, {}, diagram)
        return templates.TemplateResponse(request, diagram.lazy_template, ctx, headers=VARY)
    state, errors, raw = parse_with_fallback(view, items)
    ctx = context(request, view, state, errors, raw, diagram)
    ctx["diagram"] = diagram
    return templates.TemplateResponse(request, "lazy_diagram.html", ctx,
                                      status_code=422 if errors else 200, headers=VARY)
