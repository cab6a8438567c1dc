"""What a lab registers: its view (query model, run, figures, templates, cases, drills) and
the named diagrams it draws. The registry refuses duplicate names so one lab cannot shadow
another's routes or drills."""

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Generic, TypeVar
from urllib.parse import urlencode

from pydantic import BaseModel

from app.episodes import Episode

Q = TypeVar("Q", bound=BaseModel)
R = TypeVar("R")

FORM = "_form"  # errors that belong to no single control


@dataclass(frozen=True)
class Case:
    """A button that sets the controls to a telling state."""

    label: str
    query: Mapping[str, Any]
    why: str | Callable[[], str]  # a callable renders a figure from the lab (one computation)
    # The chart the case changes, brought into view after it (static/js/lab.js), where the
    # bench's first diagram would not change (EP04: the split stays, the efficiency moves).
    diagram: str | None = None
    # The step whose answer the case's whole state draws (EP05's 8 x 1: step 1's idle share,
    # every bar of its Gantt): on the lesson page lab.js holds the button as that step's try
    # links are held, until its guess, instead of drawing an all-grey veil (round-16 cold
    # reading of EP04-EP05, finding 2).
    held_until: str | None = None
    # What the case's headline shows only after a step's guess on the lesson page, and those
    # steps ("Its goodput and days", ("step-5",)): EP11's good case, whose goodput gives step
    # 5's answer. The button works from the first screen; its line says what waits and for
    # which guess while it waits, so a press that draws "?" and a veiled chart is not taken for
    # a broken button (round 17).
    # Each lab reads both off the case's state with the key function its headline's masks use
    # (a callable where that reads the lab's registered view: EP01's bench_keys).
    waiting: str = ""
    waits_for: tuple[str, ...] | Callable[[], tuple[str, ...]] = ()

    @property
    def waiting_on(self) -> tuple[str, ...]:
        """``waits_for``'s steps (computed where it is a callable)."""
        return self.waits_for() if callable(self.waits_for) else self.waits_for

    def wait(self) -> tuple[tuple[str, ...], str]:
        """``waiting_on``, and the line's first words while it waits: "Its goodput shows after
        step 5's guess." (empty where nothing waits). One reading of ``waits_for``: a callable
        runs the lab at the case's state (EP01's reads ``bench_keys``), so the bench
        (templates/partials/_bench.html) asks once a case."""
        waits = self.waiting_on
        if not (self.waiting and waits):
            return waits, ""
        guesses = " and ".join(f"{k.replace('-', ' ')}'s" for k in waits)
        plural = len(waits) > 1
        return waits, f"{self.waiting} after {guesses} guess{'es' if plural else ''}. "

    @property
    def held_note(self) -> str:
        """What a held button says when pressed."""
        number = (self.held_until or "").removeprefix("step-")
        return (f"That case draws step {number}'s answer: commit a guess in step {number}, "
                "or open its why, first.")

    @property
    def query_string(self) -> str:
        return urlencode(self.query)

    @property
    def text(self) -> str:
        """The line under the button, its figures read off the lab when ``why`` computes it."""
        return self.why() if callable(self.why) else self.why


@dataclass(frozen=True)
class Mistake:
    """A known wrong derivation of a numeric drill (an off-by-factor, the wrong bytes per
    parameter, a ring's 2 forgotten): ``value`` computes what it gives from the same figures the
    answer comes from (the engine's, never a typed number), and ``why`` says what is wrong with
    that derivation, without giving the answer. A try within the drill's tolerance of ``value``
    gets ``why`` instead of the drill's general hint."""

    name: str
    value: Callable[[], float]
    why: str


@dataclass(frozen=True)
class Drill:
    """A numeric question whose answer the lab computes (never typed in). ``kind`` is
    ``derive`` (work it out from the inputs the question states) or ``predict`` (guess what a
    state the page does not show will give, then see it: ``see`` is that state's query, linked
    only once the drill is answered, and a guess counts within ``rel_tol``)."""

    id: str
    question: str
    answer: Callable[[], float]
    unit: str
    hint: str | Callable[[], str]  # a function where it quotes the lab's figures
    # formatted with {answer}; a callable builds it from the lab's figures when it is shown
    explanation: str | Callable[[], str]
    rel_tol: float = 0.02
    kind: str = "derive"
    see: Mapping[str, Any] | None = None
    # The guesses that count, where the page's own first-order derivation and the lab's figure
    # differ by more than a tolerance (EP04's tp-predict-70b: about 81% from the page against
    # the lab's 75.8%): (low, high), from the lab; ``rel_tol`` then only sets the printing.
    band: Callable[[], tuple[float, float]] | None = None
    # Its commonest wrong derivations, each with its own feedback (a wrong try that matches none
    # gets the general hint).
    mistakes: tuple[Mistake, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in ("derive", "predict"):
            raise ValueError(f"{self.id}: a numeric drill is derive or predict, not {self.kind}")

    @property
    def role(self) -> str:
        """What the drill asks of the student, as its heading says it: its kind."""
        return self.kind


@dataclass(frozen=True)
class Option:
    """One choice of a decide drill, as the lab judged it: right or not, and why (with the
    lab's own figures), shown only once the drill is answered."""

    key: str
    right: bool
    why: str
    figure: str = ""  # the lab's figure for this option, as its why prints it


@dataclass(frozen=True)
class Decide:
    """Pick the plan, the change or the cause among 3-4 choices. The page shows only the
    labels; ``judge`` runs the lab and says which is right and why each is right or wrong, and
    ``solution`` is the worked solution shown after the answer. There is no shared hint: a
    wrong try is told its own option's reason, with that option's own figure."""

    id: str
    question: str
    choices: tuple[tuple[str, str], ...]  # (key, label), in the order shown
    judge: Callable[[], tuple[Option, ...]]
    solution: Callable[[], str]
    kind: str = "decide"
    see: Mapping[str, Any] | None = None
    # Phrases that state the right choice as its why or the solution words it, so a step or a
    # table saying it in other words is caught too: none may be on the page before the drill
    # is answered, and each must be in what answering shows (tests/app/test_drill_kinds.py).
    reveals: tuple[str, ...] = ()
    # A choice that predicts what a state will be (what Young's interval becomes at 4 times
    # the GPUs), not one that picks a plan, a change or a cause: headed "Predict", and not the
    # episode's decide drill (tests/app/test_drill_kinds.py). Its options keep their verdicts.
    predicts: bool = False

    def __post_init__(self) -> None:
        keys = {k for k, _ in self.choices}
        if not 3 <= len(self.choices) <= 4 or len(keys) != len(self.choices):
            raise ValueError(f"{self.id}: a decide drill has 3 or 4 choices with distinct keys")

    @property
    def role(self) -> str:
        """What the drill asks of the student, as its heading says it: a prediction, or the
        decision (a plan, a change or a cause) that TEACHING.md's decide drills are."""
        return "predict" if self.predicts else "decide"


@dataclass(frozen=True)
class Diagram:
    """One named figure of a lab: drawn in the lesson, embeddable alone at
    /embed/<lab>/<name>. ``element_id`` is the chart's DOM id (default ``<lab>-<name>``)."""

    name: str
    title: str
    element_id: str = ""
    embed_height: int = 560  # the iframe's first height, before the embed reports its own
    template: str = ""  # an HTML/SVG diagram's partial, drawn instead of a plotly figure
    # A diagram drawn on its own request (its figure costs far more than the rest of the
    # state: EP08's 2-D against 3-D sweep, fourteen planner searches): the lesson's section
    # carries a placeholder that fetches GET <episode path>/<name> with the state's query
    # when it comes into view (partials/_figure.html ``lazy``), which answers this partial;
    # its figure comes from the view's ``lazy_figures``, on that route and in its embed only.
    lazy_template: str = ""


@dataclass(frozen=True)
class LabView(Generic[Q, R]):
    name: str  # /api/<name>, /embed/<name>
    episode: Episode
    query_model: type[Q]
    run: Callable[[Q], R]  # query -> lab result; raises LabInputError
    to_api: Callable[[R], dict]
    # Every figure of a state, by diagram name; a diagram a state cannot draw is left out.
    figures: Callable[[R], dict[str, dict]]
    diagrams: tuple[Diagram, ...]
    summary: str  # OpenAPI description of the API route
    # Templates, by default named after the episode's lab (app/episodes.py):
    # episodes/<lab>.html, partials/_<lab>_controls.html, partials/_<lab>.html.
    page_template: str = ""
    controls_template: str = ""
    diagram_template: str = ""  # the lesson's diagram section (readouts and every chart)
    embed_height: int = 1000  # first height of the whole-lab embed's iframe
    # Each control's label, as the page shows it: error messages name it.
    labels: Mapping[str, str] = field(default_factory=dict)
    # Engine field -> page control, where they differ (the engine says pp, a page stages).
    aliases: Mapping[str, str] = field(default_factory=dict)
    # The JSON answer's schema, for /docs (the answer itself is built by to_api).
    response_model: type[BaseModel] | None = None
    # The key of a list of event rows in the JSON answer that ?events= may drop or transpose.
    events_key: str | None = None
    # Extra template context for a state (option lists that depend on it, say); its
    # "control_errors" ({control: message}) fill the controls' error slots (EP12's refusing panels).
    extra_context: Callable[[Any], dict] | None = None
    # Controls re-rendered out of band with every diagram swap, because their options
    # depend on the state (a model's layer count sets the valid PP degrees, say).
    oob_template: str | None = None
    good: Case | None = None
    bad: Case | None = None
    drills: tuple[Drill | Decide, ...] = field(default=())
    # Problems a drawn result carries that make its JSON answer a 422 ({control: message}):
    # a page may draw an inconsistent plan with its broken rules listed; the API refuses it.
    api_errors: Callable[[Any], dict[str, str]] | None = None
    # The results cache a view's runs are kept in (app/labkit/parsing.py; default its name):
    # a view with another run (the playground's EP08 panel) keeps its own.
    cache_name: str = ""
    # The figures of its lazy diagrams (Diagram.lazy_template), by name, as ``figures``: run
    # only for the diagram's own route and its embed, never for the page or a control's answer.
    lazy_figures: Callable[[R], dict[str, dict]] | None = None
    # The lesson page's state at its bare URL (no control given), where it is not the query
    # model's defaults ({control: value}): those stay the API's and the embeds' (what OpenAPI
    # documents), and a query naming any control fills the rest from them, so every old URL
    # draws what it drew. The page's canonical URL of the defaults' own state then names these
    # controls (render.py ``page_query``), so it never reads as the bare page. EP05 opens on
    # GPipe, the schedule its first steps teach (round-20 cold reading Q, finding 5).
    opening: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        lab = self.episode.lab
        for name, default in (("page_template", f"episodes/{lab}.html"),
                              ("controls_template", f"partials/_{lab}_controls.html"),
                              ("diagram_template", f"partials/_{lab}.html")):
            if not getattr(self, name):
                object.__setattr__(self, name, default)  # frozen: set once, here
        names = [d.name for d in self.diagrams]
        if not names or len(set(names)) != len(names):
            raise ValueError(f"{self.name}: diagram names must be present and distinct: {names}")
        if any(d.lazy_template for d in self.diagrams) and self.lazy_figures is None:
            raise ValueError(f"{self.name}: a lazy diagram needs the view's lazy_figures")
        fields = self.query_model.model_fields
        for engine_name, control in self.aliases.items():
            if control not in fields:
                raise ValueError(f"{self.name}: alias {engine_name} -> {control} is no control")
        if stray := [name for name in self.opening if name not in fields]:
            raise ValueError(f"{self.name}: the opening sets no control {stray}")

    def element_id(self, diagram: Diagram) -> str:
        return diagram.element_id or f"{self.name}-{diagram.name}"

    def diagram(self, name: str) -> Diagram | None:
        return self._diagrams_by_name.get(name)

    @cached_property
    def _diagrams_by_name(self) -> dict[str, Diagram]:
        """Each diagram by its name, the first of a name (every answer's embed codes ask)."""
        by_name: dict[str, Diagram] = {}
        for d in self.diagrams:
            by_name.setdefault(d.name, d)
        return by_name

    def label(self, name: str) -> str:
        return self.labels.get(name, name)

    @cached_property
    def control_labels(self) -> dict[str, str]:
        """Every control's label by its name (``label``), which every answer's context holds:
        built once, not per answer."""
        return {name: self.label(name) for name in self.query_model.model_fields}

    def lazy_path(self, diagram: Diagram) -> str:
        """The route of a lazy diagram: the lesson's path and the diagram's name."""
        return f"{self.episode.path}/{diagram.name}"


VIEWS: dict[str, LabView] = {}
DRILLS: dict[str, tuple[LabView, Drill | Decide]] = {}


def add_view(view: LabView) -> None:
    """Record a view and its drills; a name used twice is a programming error."""
    if view.name in VIEWS:
        raise ValueError(f"a lab view named {view.name!r} is already registered")
    ids = [d.id for d in view.drills]
    clash = [i for i in ids if i in DRILLS] or [i for i in ids if ids.count(i) > 1]
    if clash:
        raise ValueError(f"{view.name}: drill id {clash[0]!r} is already registered")
    VIEWS[view.name] = view
    for drill in view.drills:
        DRILLS[drill.id] = (view, drill)


def lesson_state(query_model: Callable[..., Any], run: Callable[[Any], Any],
                 to_api: Callable[[Any], dict]) -> Callable[..., dict]:
    """The maker of a lesson's fact: a state a step links to, run through the same query
    model, lab and ``to_api`` as its GET /api/<lab>, so the figures its prose quotes are the
    API's (tests/app/test_prose.py follows every link). ``state(**params)`` answers
    ``{"params": params, "result": ..., "api": ...}``."""
    def state(**params) -> dict:
        result = run(query_model(**params))
        return {"params": params, "result": result, "api": to_api(result)}
    return state
