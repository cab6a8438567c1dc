"""plotly.js's own style rules as a file (static/css/plotly.css), so that no page needs an inline
<style>: the Content-Security-Policy's style-src is 'self' alone (app/security.py).

plotly.js inserts its rules (its src/css, compiled into the bundle) into a <style
id="plotly.js-style-global"> it creates, unless an element with that id and the class
``no-inline-styles`` exists (plotly.js src/lib/dom.js, addRelatedStyleRule): base.html gives
it that id on the <link> of this file. The rules are read from the pinned bundle itself by
recording what it passes to CSSStyleSheet.insertRule, so the file follows a plotly upgrade:
``python tests/browser/plotly_css.py`` rewrites it; tests/browser/test_csp_browser.py fails
when it is stale.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from app.assets import ASSETS  # noqa: E402  (the bundle static/vendor/build.mjs writes)

BUNDLE = ASSETS["vendor/plotly.min.js"]
OUT = ROOT / "static/css/plotly.css"
HEADER = ("/* plotly.js's own rules, read from the pinned bundle by tests/browser/plotly_css.py"
          " (do not edit: rerun it). */\n")

RECORD = """() => { window.__rules = [];
  const insert = CSSStyleSheet.prototype.insertRule;
  CSSStyleSheet.prototype.insertRule = function (rule, index) {
    window.__rules.push([rule, index]); return insert.call(this, rule, index); }; }"""


def plotly_rules(page) -> list[str]:
    """The rules plotly.js inserts on load, in the order its sheet ends up holding them."""
    page.set_content("<!doctype html><html><head></head><body></body></html>")
    page.evaluate(RECORD)
    page.add_script_tag(path=str(BUNDLE))
    calls = page.evaluate("window.__rules")
    sheet: list[str] = []
    for rule, index in calls:  # plotly inserts each at index 0: replay to get the order
        sheet.insert(index if index is not None else len(sheet), rule)
    return sheet


def css_text(rules: list[str]) -> str:
    return HEADER + "".join(rule + "\n" for rule in rules)


def main() -> None:
    from playwright.sync_api import sync_playwright

    from tests.conftest import CHROMIUM, CHROMIUM_ARGS

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        rules = plotly_rules(browser.new_page())
        browser.close()
    OUT.write_text(css_text(rules))
    print(f"{OUT.relative_to(ROOT)}: {len(rules)} rules")


if __name__ == "__main__":
    main()
