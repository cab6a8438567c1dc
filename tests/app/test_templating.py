"""app/templating.py's environment: a render leaves no reference cycle behind (issue 31)."""

import gc
import weakref
from collections import OrderedDict

from jinja2 import ChoiceLoader, DictLoader
from markupsafe import Markup

from app import templating
from app.templating import templates


class Figure:  # a stand-in for a render's variables (a chart's figure): weakly referenceable
    pass


def freed_at_once(source: str) -> bool:
    """Whether a variable given to a render of ``source`` is freed as soon as the render
    returns, by reference counting alone (no garbage collection may run meanwhile)."""
    template = templates.env.from_string(source)
    figure = Figure()
    seen = weakref.ref(figure)
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        template.render(figure=figure)
        del figure
        return seen() is None
    finally:
        if was_enabled:
            gc.enable()


def test_a_template_with_a_macro_frees_its_variables_when_drawn():
    # A macro's function holds the context, and the context its macros: before, a cycle that
    # kept every variable of the render (an answer's figures) until a collection.
    assert freed_at_once("{% macro chart() %}{{ figure }}{% endmacro %}{{ chart() }}")


def test_a_template_importing_macros_with_context_frees_its_variables_when_drawn():
    assert freed_at_once('{% import "partials/_figure.html" as fig with context %}x')


def test_an_import_without_context_is_kept_for_the_next_render():
    # Jinja makes such a module once, keeps it on the imported template and calls its macros
    # in every later render: its context (whence the macro reads a global) must stay whole.
    env = templates.env.overlay(
        loader=ChoiceLoader(
            [
                DictLoader({"counts.html": "{% macro two() %}{{ range(2)|list }}{% endmacro %}"}),
                templates.env.loader,
            ]
        )
    )
    template = env.from_string('{% import "counts.html" as c %}{{ c.two() }}')
    assert template.render() == template.render() == "[0, 1]"


def kept_by(monkeypatch):
    """``kept`` over an empty cache, with a partial ``row.html`` drawing its data."""
    loader = ChoiceLoader([DictLoader({"row.html": "{{ label }}:{{ cell.share }}"}),
                           templates.env.loader])
    monkeypatch.setattr(templates.env, "loader", loader)
    monkeypatch.setattr(templating, "_KEPT", OrderedDict())
    return lambda **data: templating.kept("row.html", **data)


def test_kept_partials_stay_bounded_and_apart(monkeypatch):
    # kept() holds one HTML per partial and data: at most KEPT_PARTIALS, each its own data's
    # (a change deep in the data, or in any one argument, is another answer).
    kept = kept_by(monkeypatch)
    drawn = [kept(label="case", cell={"share": i}) for i in range(templating.KEPT_PARTIALS + 40)]
    assert drawn[:3] == ["case:0", "case:1", "case:2"] and drawn[-1] == "case:295"
    assert len(templating._KEPT) == templating.KEPT_PARTIALS
    assert kept(label="other", cell={"share": 295}) == "other:295"
    assert kept(label="case", cell={"share": 0.5}) == "case:0.5"
    assert len(templating._KEPT) == templating.KEPT_PARTIALS


def test_kept_draws_markup_data_each_time(monkeypatch):
    # Markup and a plain string of the same text escape differently: never one key.
    kept = kept_by(monkeypatch)
    assert kept(label="<b>", cell={"share": 1}) == "&lt;b&gt;:1"
    assert kept(label=Markup("<b>"), cell={"share": 1}) == "<b>:1"
    assert len(templating._KEPT) == 1


class Html:
    def __html__(self):
        return "<b>kept</b>"


ESCAPED = ["", "plain", "<a href='x'>&\"</a>", "ü €", 0, 7, -3.25, 1e-05, None, True,
           Markup("<i>safe</i>"), Html(), type("Tag", (str,), {})("<str subclass>")]


def test_templates_escape_as_markupsafe_does_in_one_call():
    # Every {{ ... }} of a compiled template escapes with app/templating.py's escape (issue 31:
    # markupsafe's goes through Markup's own constructor, a second Python call), which writes
    # markupsafe's text, as Markup, for every kind of value a template prints.
    import markupsafe

    template = templates.env.from_string("{{ value }}")
    assert template.root_render_func.__globals__["escape"] is templating.escape
    for value in ESCAPED:
        ours, theirs = templating.escape(value), markupsafe.escape(value)
        assert type(ours) is Markup and ours == theirs, value
        assert template.render(value=value) == str(theirs), value


def test_a_template_calls_macros_and_context_functions_as_jinja_does():
    # _Context.call takes a macro's short way; a function given the context still sees the
    # loop's variables, and one that raises StopIteration still gives an undefined value.
    from jinja2 import pass_context

    @pass_context
    def seen(ctx, name):
        return ctx.get(name)

    def stops():
        raise StopIteration

    template = templates.env.from_string(
        "{% macro m(x, y=2) %}[{{ x }}{{ y }}{{ caller() if caller }}]{% endmacro %}"
        "{% for i in range(2) %}{% set j = i %}{{ m(i) }}{{ m(i, y=i) }}{{ seen('j') }}{% endfor %}"
        "{% call m('c') %}called{% endcall %}{{ stops() is undefined }}")
    assert template.render(seen=seen, stops=stops) == "[02][00]0[12][11]1[c2called]True"
