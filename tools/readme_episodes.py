"""The two derived tables: README.md's episodes, written from the lab registry (one row per
lab of app/episodes.py, in teaching order, with its page, embeds, the whole lab then each
diagram of its view, and JSON route), and docs/architecture.md's floors of labs/ (one row per
package: the ``FLOOR`` its ``__init__.py`` declares and the first paragraph of its docstring).
Nobody edits those tables by hand: adding a lab adds its rows here.

Run from the repository root::

    python tools/readme_episodes.py           # print the tables
    python tools/readme_episodes.py --write   # rewrite them in README.md and docs/architecture.md

tests/test_project.py checks that those files hold exactly these tables.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
ARCHITECTURE = ROOT / "docs" / "architecture.md"
HEADER = ("| # | episode | page | embed (all / one diagram) | JSON |", "|---|---|---|---|---|")
FLOOR_HEADER = ("| floor | package | what it answers |", "|---|---|---|")


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


def floors() -> dict[str, tuple[int, str]]:
    """Every package of labs/: its declared floor and the first paragraph of its docstring,
    read with ``ast`` (nothing is imported)."""
    found = {}
    for init in sorted((ROOT / "labs").glob("*/__init__.py")):
        tree = ast.parse(init.read_text(encoding="utf-8"))
        floor = next((node.value.value for node in tree.body if isinstance(node, ast.Assign)
                      and [getattr(t, "id", None) for t in node.targets] == ["FLOOR"]
                      and isinstance(node.value, ast.Constant)), None)
        doc = ast.get_docstring(tree)
        if not isinstance(floor, int) or not doc:
            raise SystemExit(f"{init}: a labs package's __init__.py declares its docstring "
                             "and FLOOR = <n> (docs/architecture.md's floor table)")
        found[init.parent.name] = (floor, " ".join(doc.split("\n\n")[0].split()))
    return found


def floor_table() -> list[str]:
    """The floor table's lines, header included: by floor, then by name."""
    rows = list(FLOOR_HEADER)
    for package, (floor, text) in sorted(floors().items(), key=lambda kv: (kv[1][0], kv[0])):
        rows.append(f"| {floor} | `{package}/` | {text} |")
    return rows


def replaced(text: str, rows: list[str]) -> str:
    """Markdown text with the table that ``rows`` starts with (its header and every table
    line after it, at any indent) replaced by ``rows``, indented as the text's is."""
    lines = text.split("\n")
    start = next(i for i, line in enumerate(lines) if line.strip() == rows[0].strip())
    indent = lines[start][:len(lines[start]) - len(lines[start].lstrip())]
    end = start
    while end < len(lines) and lines[end].lstrip().startswith("|"):
        end += 1
    return "\n".join([*lines[:start], *(indent + row.strip() for row in rows), *lines[end:]])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true",
                        help="rewrite the tables in README.md and docs/architecture.md")
    args = parser.parse_args()
    if args.write:
        README.write_text(replaced(README.read_text(), table()))
        ARCHITECTURE.write_text(replaced(ARCHITECTURE.read_text(), floor_table()))
    else:
        print("\n".join([*table(), "", *floor_table()]))


if __name__ == "__main__":
    main()
