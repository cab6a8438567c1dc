"""The labs of the curriculum, in teaching order: the one list the app is built from.

The list is read from the lesson templates: each ``templates/episodes/<lab>.html`` opens with
its episode's front matter, a Jinja comment (it renders nothing): ``{#- episode`` on the first
line, then one ``key: value`` line for each of number, slug, title, question and, where the lab
serves more routers, ``extra_routers`` (space-separated), then ``-#}`` (see EP08's,
templates/episodes/recipe.html), so adding a lab hand-edits no list: its template's file name
is its internal name (``lab``), the one name its other files follow (app/labkit/view.py reads
the templates from it):

- ``labs/<lab>/``: the engine (a lab may use another's: EP07's ``moe`` runs ``labs/experts``);
- ``app/routers/<lab>.py``: its view (``register(router, VIEW)``), plus ``extra_routers``
  (more modules of app/routers/ it serves);
- ``app/charts/<lab>.py``: its figures;
- ``templates/episodes/<lab>.html`` (the lesson), ``templates/partials/_<lab>.html`` (the
  diagram section) and ``templates/partials/_<lab>_controls.html`` (the form).

app/main.py includes every lab's routers in this order; the home page, ``/api/diagrams``, the
README's episode table (tools/readme_episodes.py), the tests, the screenshots and the
benchmarks read it. The public names (``/episodes/<slug>``, ``/api/<view name>``,
``/embed/<view name>``) are the view's and the slug's: they never change with ``lab``.
"""

import re
from dataclasses import dataclass
from pathlib import Path

from app.settings import url


@dataclass(frozen=True)
class Episode:
    number: int
    slug: str
    title: str
    question: str
    lab: str  # the internal name: app/routers/<lab>.py, templates, charts (see above)
    extra_routers: tuple[str, ...] = ()  # more modules of app/routers/ the lab serves

    @property
    def code(self) -> str:
        return f"EP{self.number:02d}"

    @property
    def topic(self) -> str:
        """The title without its subtitle ("The memory ledger: it does not fit" -> "The memory
        ledger"): a panel or a section headed by an episode names its topic, since a subtitle
        there reads as the verdict on what the panel shows (round-21 cold reading R, 10)."""
        return self.title.partition(": ")[0]

    @property
    def path(self) -> str:
        """The route's path inside the app (what a router registers)."""
        return f"/episodes/{self.slug}"

    @property
    def url(self) -> str:
        """The path as a browser asks for it: under BASE_PATH (app/settings.py)."""
        return url(self.path)

    @property
    def routers(self) -> tuple[str, ...]:
        """The modules of app/routers/ this lab serves, its own first."""
        return (f"app.routers.{self.lab}", *(f"app.routers.{r}" for r in self.extra_routers))


TEMPLATES = Path(__file__).resolve().parent.parent / "templates" / "episodes"
# The front matter a lesson template opens with: a Jinja comment, so it renders nothing.
_FRONT = re.compile(r"\A\{#-? *episode *\n(.*?)\n *-?#\}", re.S)
_FIELDS = {"number", "slug", "title", "question", "extra_routers"}


def _episode(template: Path) -> Episode:
    """The episode a lesson template declares in its front matter (see the module's text)."""
    match = _FRONT.match(template.read_text(encoding="utf-8"))
    if not match:
        raise RuntimeError(f"{template}: a lesson template opens with its episode's front "
                           "matter, {#- episode ... -#} (app/episodes.py)")
    fields: dict[str, str] = {}
    for line in match.group(1).splitlines():
        key, sep, value = line.partition(":")
        key = key.strip()
        if not sep or key not in _FIELDS or key in fields or not value.strip():
            raise RuntimeError(f"{template}: front matter line {line!r}: expected one of "
                               f"{sorted(_FIELDS)} once, as 'key: value'")
        fields[key] = value.strip()
    missing = _FIELDS - {"extra_routers"} - set(fields)
    if missing or not fields["number"].isdigit():
        raise RuntimeError(f"{template}: front matter needs {sorted(missing) or 'a whole number'}")
    return Episode(int(fields["number"]), fields["slug"], fields["title"], fields["question"],
                   lab=template.stem,
                   extra_routers=tuple(fields.get("extra_routers", "").split()))


def _episodes(folder: Path = TEMPLATES) -> tuple[Episode, ...]:
    """Every lesson template's episode, in teaching order: numbered 1..N, slugs distinct."""
    episodes = tuple(sorted(map(_episode, folder.glob("*.html")), key=lambda e: e.number))
    if [e.number for e in episodes] != list(range(1, len(episodes) + 1)):
        raise RuntimeError(f"{folder}: episodes are numbered 1..N, once each; found "
                           f"{[e.number for e in episodes]}")
    if len({e.slug for e in episodes}) != len(episodes):
        raise RuntimeError(f"{folder}: two lesson templates declare the same slug")
    return episodes


EPISODES: tuple[Episode, ...] = _episodes()

BY_SLUG = {episode.slug: episode for episode in EPISODES}
BY_LAB = {episode.lab: episode for episode in EPISODES}
