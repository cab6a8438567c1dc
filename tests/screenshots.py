"""Screenshots of every live episode at desktop and phone widths, for looking at changes.

Run: ``python tests/screenshots.py`` (starts its own uvicorn on a free port). Saves
``build/screenshots/<name>-<width>.png`` (full page) and refreshes the README's pictures,
``static/img/<episode>-desktop.png`` (the first screen at 1280 px).
"""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.browser.helpers import wait_drawn  # noqa: E402
from tests.conftest import CHROMIUM, CHROMIUM_ARGS, free_port  # noqa: E402

PAGES = {
    "home": "/",
    "ep01": "/episodes/memory",
    "ep01-embed": "/embed/memory?model=mixtral-8x7b&dp=8&zero=3",
    "ep05": "/episodes/pipeline?stages=8&microbatches=32&recompute=none",
    "ep05-zb": "/episodes/pipeline?schedule=zb-h1&stages=8&microbatches=16",
    "ep05-embed": "/embed/pipeline?schedule=interleaved-1f1b&stages=4&microbatches=8&virtual=2",
}
README_PICTURES = {"ep01": "ep01-desktop.png", "ep05": "ep05-desktop.png"}


def main() -> None:
    from playwright.sync_api import sync_playwright

    out = ROOT / "build/screenshots"
    out.mkdir(parents=True, exist_ok=True)
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "uvicorn", "app.main:app", "--port",
                               str(port), "--log-level", "warning"], cwd=ROOT)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(base + "/healthz", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            for width in (1280, 390):
                page = browser.new_page(viewport={"width": width, "height": 900})
                for name, path in PAGES.items():
                    page.goto(base + path)
                    if page.locator("script.figure").count():
                        wait_drawn(page)
                    page.screenshot(path=out / f"{name}-{width}.png", full_page=True)
                    if width == 1280 and name in README_PICTURES:
                        page.screenshot(path=ROOT / "static/img" / README_PICTURES[name])
                    print(f"{name} at {width}px: {page.evaluate('document.body.scrollHeight')}"
                          " px tall")
                page.close()
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=10)


if __name__ == "__main__":
    main()
