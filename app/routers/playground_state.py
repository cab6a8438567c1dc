"""EP12's state: the playground's one state run through every lab (``PlaygroundState``,
``run``: each lab through its own view, app/routers/playground_panels translating the shared
query), its labs' figures with their own lessons' veils stripped (``unveiled``) and its JSON
answer (``to_api``). ``app.routers.playground`` draws them together, with what of them waits
for which of its steps, the lesson's states, controls and page context."""

from dataclasses import dataclass

from pydantic import BaseModel

from app.labkit.render import state_query
from app.routers.playground_panels import PANELS, PanelState, run_panel


@dataclass(frozen=True)
class PlaygroundState:
    query: BaseModel
    panels: tuple[PanelState, ...]

    def panel(self, lab: str) -> PanelState:
        return next(p for p in self.panels if p.lab == lab)

    @property
    def errors(self) -> dict[str, str]:
        """Every lab's complaint, by the playground control it names."""
        found: dict[str, dict[str, list[str]]] = {}  # control -> message -> episodes
        for p in self.panels:
            for control, message in p.errors.items():
                found.setdefault(control, {}).setdefault(message, []).append(
                    p.view.episode.code)
        return {control: "; ".join(f"{', '.join(codes)}: {message}"
                                   for message, codes in by_message.items())
                for control, by_message in found.items()}


def run(query) -> PlaygroundState:
    return PlaygroundState(query, tuple(run_panel(panel, query) for panel in PANELS))


def diagram_name(lab: str, name: str) -> str:
    return f"{lab}-{name}"


# What a lab's figure carries for its own lesson page: which of that lesson's steps or drills
# it waits for (layout.meta, static/js/lab.js). Its keys name the lesson's step ids
# ("step-3") and charts, which on the playground are the playground's own: EP05's Gantt at
# one micro-batch waited for the playground's step 1 (round-14 review). The playground asks
# none of a lab's questions, so it draws every figure whole.
LESSON_VEIL = ("after", "owners", "masked", "partly", "names", "axes")


def unveiled_figures(view, result) -> dict[str, dict]:
    return {name: unveiled(figure) for name, figure in view.figures(result).items()}


def unveiled(figure: dict) -> dict:
    meta = figure.get("layout", {}).get("meta")
    if not meta or not any(key in meta for key in LESSON_VEIL):
        return figure
    rest = {key: value for key, value in meta.items() if key not in LESSON_VEIL}
    layout = {key: value for key, value in figure["layout"].items() if key != "meta"}
    return {**figure, "layout": {**layout, **({"meta": rest} if rest else {})}}


def lab_query(p: PanelState) -> str:
    """The lab's own URL query for this state: its lesson draws the same picture (none for a
    state the lab refuses: its lesson then opens at its own defaults)."""
    if p.query is None or p.errors:
        return ""
    return state_query(_Stateful(p.query))


@dataclass(frozen=True)
class _Stateful:  # state_query reads .query only
    query: BaseModel


def to_api(state: PlaygroundState) -> dict:
    panels = {}
    for p in state.panels:
        if not p.diagrams:
            continue
        panels[p.lab] = {
            "episode": p.view.episode.code,
            "diagrams": list(p.diagrams),
            "query": lab_query(p),
            "errors": p.errors,
            "note": p.note,
            "answer": p.view.to_api(p.result) if p.result is not None else None,
        }
    return {"panels": panels}


def api_errors(state: PlaygroundState) -> dict[str, str]:
    return state.errors
