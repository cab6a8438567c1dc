"""Screenshots of every episode at two laptop sizes and a phone, for looking at changes.

Run: ``python tests/screenshots.py`` (starts its own uvicorn on a free port). Saves into
``build/screenshots/``: ``<name>-<w>x<h>.png`` (the first screen), ``<name>-<w>x<h>-full.png``
(the whole page), ``<lesson>-step<N>-<w>x<h>.png`` (the screen after a step's first "try it"
link, the step's diagram in view), the same in dark mode for EP05, and a print rendering;
refreshes the README's picture, ``static/img/ep01-desktop.png`` (first screen, 1280×800).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.episodes import BY_LAB, EPISODES  # noqa: E402
from tests.browser.helpers import release, wait_drawn  # noqa: E402
from tests.conftest import CHROMIUM, CHROMIUM_ARGS, running_app  # noqa: E402

MEMORY, PIPELINE = BY_LAB["memory"].path, BY_LAB["pipeline"].path
# The home page and every lesson of the registry (app/episodes.py) at its default state, then
# a few more states of EP01 and EP05.
PAGES = {
    "home": "/",
    **{episode.code.lower(): episode.path for episode in EPISODES},
    "ep01-embed": "/embed/memory?model=mixtral-8x7b&dp=8&zero=3",
    "ep05": PIPELINE + "?stages=8&microbatches=32&recompute=none",
    "ep05-zb": PIPELINE + "?schedule=zb-h1&stages=8&microbatches=16",
    "ep05-embed": "/embed/pipeline?schedule=interleaved-1f1b&stages=4&microbatches=8&virtual=2",
}
README_PICTURES = {"ep01": "ep01-desktop.png"}
SIZES = [(1280, 800), (1440, 900), (390, 844)]
STEPS = {"ep01": (MEMORY, [1, 5]), "ep05": (PIPELINE, [1, 4, 6])}


def try_step(page, base: str, path: str, step: int) -> None:
    """Open a lesson, open step N's why (its links are held until then), follow its first try
    link, wait for the redraw."""
    page.goto(base + path)
    wait_drawn(page)
    link = page.locator(f"#step-{step} a.try").first
    href = link.get_attribute("href")
    release(link)
    link.click()
    page.wait_for_url("**" + href.split("?", 1)[1] + "**")
    wait_drawn(page)


def main() -> None:
    from playwright.sync_api import sync_playwright

    out = ROOT / "build/screenshots"
    out.mkdir(parents=True, exist_ok=True)
    with running_app() as base, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        for width, height in SIZES:
            size = f"{width}x{height}"
            page = browser.new_page(viewport={"width": width, "height": height},
                                    is_mobile=width < 500, has_touch=width < 500)
            for name, path in PAGES.items():
                page.goto(base + path)
                if page.locator("script.figure").count():
                    wait_drawn(page)
                page.screenshot(path=out / f"{name}-{size}.png")
                page.screenshot(path=out / f"{name}-{size}-full.png", full_page=True)
                if size == "1280x800" and name in README_PICTURES:
                    page.screenshot(path=ROOT / "static/img" / README_PICTURES[name])
            for name, (path, steps) in STEPS.items():
                for step in steps:
                    try_step(page, base, path, step)
                    page.screenshot(path=out / f"{name}-step{step}-{size}.png")
            page.close()
            dark = browser.new_page(viewport={"width": width, "height": height},
                                    color_scheme="dark")
            try_step(dark, base, PIPELINE, 6)
            dark.screenshot(path=out / f"ep05-dark-{size}.png")
            dark.close()
        printed = browser.new_page(viewport={"width": 1280, "height": 800})
        printed.goto(base + MEMORY)
        wait_drawn(printed)
        printed.emulate_media(media="print")
        printed.screenshot(path=out / "ep01-print.png", full_page=True)
        printed.close()
        browser.close()


if __name__ == "__main__":
    main()
