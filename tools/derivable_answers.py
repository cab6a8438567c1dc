"""Which step predictions could be answered from two figures on the screen before the guess?

Run from a tree's root::

    python tools/derivable_answers.py              # every candidate, with both figures' context
    python tools/derivable_answers.py --near 200   # only figures printed within 200 characters

For each step prediction that declares its figure (``answer=``, data-answer: "1.5×", "33.3%",
"85.9 GB"), it reads the screens tests/app/test_answers_hidden.py reads before that guess (the
opening state, the case buttons' states and the previous step's try links, without the whys
of this step and the later ones), collects every number printed with a unit, and lists the
pairs that give the answer: a ratio of two like quantities for an answer in × or % ("1.5×"
from 30 ms and 20 ms), a difference for an answer in bytes or time. Bytes and times compare
across units (1.13 TB against 128 GB). A match must hold within the rounding of all three
printed figures (half the last digit of each decimal; a whole number is taken as exact), and
a figure is not paired with an equal one.

Why this is an audit, not a test (issue 36): on main at the time of writing it read 341
screens for 63 declared answers, about 80 figures a screen, and listed 166 distinct pairs
(11 with ``--near 200``), every one a coincidence on inspection: a table's neighbouring
cells (EP05's 2.85 GB ÷ 8.56 GB = 33.3%), a select's presets (20 ÷ 10 GB/s = 2×), a
readout's "Per GPU 1.22 TB, over by 1.14 TB" against 85.9 GB. None printed a step's answer
as the ratio or difference it asks for, so a test on it would have been all false alarms.
Read its output when a lesson adds figures near a prediction; a pair it lists is worth a look.
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import sys
from pathlib import Path

ROOT = Path.cwd()

# A printed unit: (dimension, its size in the dimension's base unit). "B" is left out: the
# pages write parameter counts as "70.6B".
UNITS = {
    "PB": ("bytes", 1e15), "TB": ("bytes", 1e12), "GB": ("bytes", 1e9), "MB": ("bytes", 1e6),
    "kB": ("bytes", 1e3), "bytes": ("bytes", 1.0),
    "days": ("s", 86400.0), "hours": ("s", 3600.0), "h": ("s", 3600.0),
    "minutes": ("s", 60.0), "min": ("s", 60.0), "s": ("s", 1.0), "ms": ("s", 1e-3),
    "µs": ("s", 1e-6), "GB/s": ("bytes/s", 1e9), "TFLOP/s": ("FLOP/s", 1e12),
    "%": ("%", 1.0), "×": ("×", 1.0),
}
DIMENSIONLESS = ("%", "×")
NUMBER = r"\d+(?:,\d{3})*(?:\.\d+)?"
UNIT = "|".join(sorted(map(re.escape, UNITS), key=len, reverse=True))
PRINTED = re.compile(rf"(?<![\d.,])({NUMBER})\s?({UNIT})(?![A-Za-z/])")


def quantity(number: str, unit: str) -> tuple[float, str, float] | None:
    """(value in the base unit, dimension, relative half-width of its printed rounding)."""
    digits = number.replace(",", "")
    value = float(digits)
    if value == 0:
        return None
    decimals = len(digits.partition(".")[2])
    dimension, size = UNITS[unit]
    return value * size, dimension, (0.5 * 10 ** -decimals / value) if decimals else 0.0


def candidates(answer: tuple[float, str, float], text: str, near: int | None = None):
    """Pairs of figures printed in ``text`` whose ratio or difference is ``answer``."""
    value, dimension, error = answer
    found = {}
    for m in PRINTED.finditer(text):
        q = quantity(m[1], m[2])
        if q:
            found.setdefault(m[0], (q, m.start()))
    for (sa, ((a, da, ea), ia)), (sb, ((b, db, eb), ib)) in itertools.permutations(
            found.items(), 2):
        if da != db or a == b or (near is not None and abs(ia - ib) > near):
            continue
        if dimension in DIMENSIONLESS and da not in DIMENSIONLESS:
            ratio = a / b * (100 if dimension == "%" else 1)
            if abs(ratio - value) <= (error + ea + eb) * value:
                yield "÷", sa, sb, ia, ib
        if (dimension == da and dimension not in DIMENSIONLESS
                and abs(a - b - value) <= error * value + ea * a + eb * b):
            yield "−", sa, sb, ia, ib


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--near", type=int, help="only figures within this many characters")
    args = parser.parse_args()
    sys.path[0] = str(ROOT)
    os.environ.pop("HIDE_ANSWERS", None)
    from fastapi.testclient import TestClient

    from app.labkit import VIEWS
    from app.main import app
    from tests.app.test_answers_hidden import case_urls, screen, try_urls
    from tests.app.test_step_beats import BEATS, steps

    app.state.render_processes = 0
    screens = answers = 0
    pairs = set()
    with TestClient(app) as client:
        for name in BEATS:
            path = VIEWS[name].episode.path
            html = client.get(path).text
            found = steps(html)
            ids = [step_id for step_id, _ in found]
            for n, (step_id, step) in enumerate(found):
                form = re.search(r'<form class="predict-form"[^>]*>', step)
                declared = form and re.search(r'data-answer="([^"]*)"', form.group(0))
                whole = declared and re.fullmatch(rf"({NUMBER})\s?({UNIT})", declared[1].strip())
                if not whole:
                    continue
                answers += 1
                answer = quantity(whole[1], whole[2])
                for url in [path] + case_urls(html) + (try_urls(found[n - 1][1]) if n else []):
                    text = screen(client, url, ids, step_id)
                    screens += 1
                    for op, a, b, ia, ib in candidates(answer, text, args.near):
                        if (name, step_id, a, b) in pairs:
                            continue
                        pairs.add((name, step_id, a, b))
                        print(f"{name} {step_id}: {declared[1]} = {a} {op} {b}  ({url})")
                        for at in (ia, ib):
                            print("    …" + text[max(0, at - 80):at + 40] + "…")
    print(f"{answers} declared answers, {screens} screens, {len(pairs)} distinct pairs")


if __name__ == "__main__":
    main()
