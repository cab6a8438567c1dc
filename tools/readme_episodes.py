"""The README's episode table, written from the lab registry: one row per lab of
app/episodes.py, in teaching order, with its page, embeds (the whole lab, then each diagram of
its view) and JSON route. Nobody edits that table by hand: adding a lab adds its row here.

Run from the repository root::

    python tools/readme_episodes.py           # print the table
    python tools/readme_episodes.py --write   # rewrite it in README.md

tests/test_project.py checks that README.md holds exactly this table.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
HEADER = ("| # | episode | page | embed (all / one diagram) | JSON |", "|---|---|---|---|---|")


def table() -> list[str]:
    """The table's lines, header included."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    import app.main  # noqa: F401  (registers every lab's view)
    from app.episodes import EPISODES
    from app.labkit import VIEWS

    views = {view.episode.slug: view for view in VIEWS.values()}
    rows = list(HEADER)
    for episode in EPISODES:
        view = views[episode.slug]
        embeds = ", ".join(f"`/embed/{view.name}{path}`"
                           for path in ["", *(f"/{d.name}" for d in view.diagrams)])
        rows.append(f"| {episode.code} | {episode.title} | `{episode.path}` | {embeds} "
                    f"| `/api/{view.name}` |")
    return rows


def replaced(text: str, rows: list[str]) -> str:
    """README text with its episode table (the header and every table line after it)
    replaced by ``rows``."""
    lines = text.split("\n")
    start = lines.index(HEADER[0])
    end = start
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    return "\n".join([*lines[:start], *rows, *lines[end:]])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="rewrite the table in README.md")
    args = parser.parse_args()
    rows = table()
    if args.write:
        README.write_text(replaced(README.read_text(), rows))
    else:
        print("\n".join(rows))


if __name__ == "__main__":
    main()
