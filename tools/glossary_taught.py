"""Where each glossary term is taught: the first lesson, in teaching order, whose lede or steps
use it (where app/glossary.py's ``define_terms`` marks its first use, ``id="term-<slug>"``).
/glossary links each entry to that mark, in the step it sits in ("Taught in EP03: ...").
The table names the lesson only, so that prose moving a first use from one step to another
leaves it right; the link follows the mark.

The lessons' prose decides it, so it is found by rendering every episode at its opening state,
not typed in: this writes app/glossary_taught.py, and tests/app/test_glossary_taught.py checks
that the file holds what the pages give and that every link resolves to an element id.

Run from the repository root::

    python tools/glossary_taught.py           # print the table
    python tools/glossary_taught.py --write   # rewrite app/glossary_taught.py
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET = ROOT / "app" / "glossary_taught.py"
STEP = re.compile(r'<section class="step[^"]*" id="([^"]+)"')


def step_of(html: str, slug: str) -> str | None:
    """The id of the step holding the term's marked first use on a page ("" where it is in the
    lede, before every step), or None where the page does not use it."""
    at = html.find(f'id="term-{slug}"')
    if at < 0:
        return None
    steps = [m.group(1) for m in STEP.finditer(html, 0, at)]
    return steps[-1] if steps else ""


def taught(get) -> dict[str, str]:
    """Slug -> episode slug for every term some lesson uses; ``get(path)`` returns a page's HTML
    (a test client's, or this tool's)."""
    from app.episodes import EPISODES
    from app.glossary import GLOSSARY

    found: dict[str, str] = {}
    for episode in EPISODES:
        html = get(episode.path)
        for term in GLOSSARY:
            if term.slug not in found and step_of(html, term.slug) is not None:
                found[term.slug] = episode.slug
    return found


def source(found: dict[str, str]) -> str:
    from app.glossary import GLOSSARY

    lines = ['"""Written by tools/glossary_taught.py (do not edit): the first lesson, in teaching',
             "order, whose prose uses each glossary term (its first use there carries the id",
             'term-<slug>). tests/app/test_glossary_taught.py checks it against the pages."""', "",
             "TAUGHT_IN: dict[str, str] = {"]
    lines += [f'    "{t.slug}": "{found[t.slug]}",' for t in GLOSSARY if t.slug in found]
    return "\n".join([*lines, "}", ""])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="rewrite " + TARGET.name)
    args = parser.parse_args()
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from fastapi.testclient import TestClient

    from app.main import app

    with TestClient(app) as client:
        text = source(taught(lambda path: client.get(path).text))
    if args.write:
        TARGET.write_text(text)
    else:
        print(text, end="")


if __name__ == "__main__":
    main()
