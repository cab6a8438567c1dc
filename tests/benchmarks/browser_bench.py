"""Input to redrawn chart, in a real browser: how live the lesson's sliders feel.

Run: ``python tests/benchmarks/browser_bench.py [--rounds N]`` (starts its own uvicorn on a
free port of 127.0.0.1 and Debian's Chromium). For each lesson it moves one slider to a new
value N times (one input event each, as a keyboard step or a click on the track does) and
times from the input event to the chart the slider moves (the one lab.js keeps in view at
1280×800) and to every chart of the lesson redrawn with that state (lab.js's ``lab:drawn``,
after Plotly.react resolves), or, out of sight, marked stale with it (drawn when it scrolls
into view): median and p95. Then a drag: 100 input events
16 ms apart (1.6 s), counting the ``lab:drawn`` events during the drag (an unchanged figure's,
not redrawn, included) and timing the last input to the final state drawn. A benchmark, not a
test: figures vary with the machine.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from app.episodes import BY_LAB  # noqa: E402
from tests.browser.helpers import IN_SIGHT, MOVED_BY, wait_drawn  # noqa: E402
from tests.conftest import CHROMIUM, CHROMIUM_ARGS, running_app  # noqa: E402

# (lesson, starting state, slider name, values it cycles through). No value is the
# control's default: the state string leaves defaults out, so they could not be waited for.
MEMORY, PIPELINE = BY_LAB["memory"], BY_LAB["pipeline"]
CASES = [
    (f"{MEMORY.code} memory", MEMORY.path, "micro_batch", [2, 4, 8, 16, 32, 3]),
    (f"{PIPELINE.code} pipeline", PIPELINE.path + "?stages=8&microbatches=16", "microbatches",
     [24, 32, 12, 10, 16, 20]),
]
# Every other lesson, on its main slider.
for lab, slider, values in (("data_parallel", "nics_per_node", [2, 4, 8, 3, 6, 5]),
                            ("zero", "micro_batch", [2, 4, 8, 3, 6, 5]),
                            ("tensor_parallel", "micro_batch", [2, 4, 8, 3, 6, 5]),
                            ("context_parallel", "tokens", [32, 48, 24, 40, 56, 64]),
                            ("moe", "skew", [0.25, 0.5, 0.75, 0.85, 0.4, 0.6]),
                            ("recipe", "microbatches", [24, 32, 12, 8, 20, 28]),
                            ("rl", "prompts", [16, 32, 4, 12, 24, 20]),
                            ("playground", "micro_batch", [2, 4, 3, 2, 4, 3]),
                            ("precision", "micro_batch", [2, 4, 8, 3, 6, 5]),
                            ("failures", "interval", [60, 300, 600, 3600, 10800, 30])):
    if lab in BY_LAB:
        CASES.append((f"{BY_LAB[lab].code} {lab}", BY_LAB[lab].path, slider, values))

# Resolves when every chart of the page shows the state with name=value, or is out of sight
# and marked stale with it (lab.js draws those when they scroll into view).
WAIT_STATE = """(name, value) => new Promise(resolve => {
    const want = new RegExp('(^|&)' + name + '=' + value + '(&|$)');
    const inSight = IN_SIGHT;
    const done = () => {
        const scripts = [...document.querySelectorAll('script.figure[data-target]')];
        return scripts.length > 0 && scripts.every(s => {
            const chart = document.getElementById(s.dataset.target);
            return want.test(s.dataset.state) && chart && (chart.dataset.drawn === s.dataset.state
                || (chart.dataset.stale === s.dataset.state && !inSight(chart)));
        });
    };
    if (done()) return resolve();
    const check = () => {
        if (done()) { document.removeEventListener('lab:drawn', check); resolve(); }
    };
    document.addEventListener('lab:drawn', check);
})"""

STEP = """async ([name, values]) => {
    const waitState = WAIT_STATE;
    const input = document.querySelector('[name="' + name + '"]');
    // The chart the slider moves (lab.js keeps it in view; where it is an HTML diagram,
    // EP04's split, the first chart in sight).
    const charts = [...document.querySelectorAll('script.figure[data-target]')]
        .map(s => document.getElementById(s.dataset.target));
    const moved = (MOVED_BY)(input);
    const first = charts.some(c => c.id === moved) ? moved
        : (charts.find(c => (IN_SIGHT)(c)) || charts[0]).id;
    // Where a move's time goes: Plotly.react timed per chart (lab.js calls it through
    // window.Plotly), the fragment's request from its resource timing and Server-Timing.
    if (!window.__labReacts) {
        const react = window.Plotly.react;
        window.__labReacts = [];
        window.Plotly.react = function (el, ...rest) {
            const t = performance.now();
            return react.call(this, el, ...rest).then(out => {
                window.__labReacts.push([el.id, t, performance.now()]);
                return out;
            });
        };
    }
    const times = [], seen = [], parts = [];
    for (const value of values) {
        performance.clearResourceTimings();
        window.__labReacts.length = 0;
        const t0 = performance.now();
        let t1 = null;
        const mark = e => { if (e.target.id === first && t1 === null) t1 = performance.now(); };
        document.addEventListener('lab:drawn', mark);
        input.value = value;
        input.dispatchEvent(new Event('input', {bubbles: true}));
        await waitState(name, value);
        document.removeEventListener('lab:drawn', mark);
        const end = performance.now();
        times.push(end - t0);
        seen.push((t1 === null ? end : t1) - t0);
        const asked = performance.getEntriesByType('resource').filter(
            e => e.initiatorType === 'xmlhttprequest' || e.initiatorType === 'fetch');
        const last = asked[asked.length - 1];
        const server = last ? last.serverTiming.reduce((a, s) => a + s.duration, 0) : 0;
        const response = last ? last.responseEnd - t0 : 0;
        const reacts = window.__labReacts;
        const plotly = reacts.reduce((a, [, s, e]) => a + (e - s), 0);
        const firstReact = reacts.find(([id]) => id === first);
        const stale = document.querySelectorAll('[data-stale]').length;
        parts.push({server, wire: response - server, plotly, charts: reacts.length, stale,
                    swap: (firstReact ? firstReact[1] : end) - t0 - response});
    }
    return [times, seen, parts, first];
}"""


DRAG = """async ([name, lo, hi]) => {
    const waitState = WAIT_STATE;
    const input = document.querySelector('[name="' + name + '"]');
    // A 16 ms pause that a headless (background) page's timer throttling does not stretch.
    const pause = ms => new Promise(resolve => {
        const end = performance.now() + ms, ch = new MessageChannel();
        ch.port1.onmessage = () => performance.now() >= end ? resolve() : ch.port2.postMessage(0);
        ch.port2.postMessage(0);
    });
    let redraws = 0;
    const count = () => redraws++;
    document.addEventListener('lab:drawn', count);
    let value = lo;
    for (let i = 0; i < 100; i++) {
        input.value = lo + (hi - lo) * i / 99;  // the range input snaps it to its step
        value = input.value;
        input.dispatchEvent(new Event('input', {bubbles: true}));
        await pause(16);
    }
    const t0 = performance.now();
    await waitState(name, value);
    const tail = performance.now() - t0;
    document.removeEventListener('lab:drawn', count);
    return [redraws, tail];
}"""


WAIT_STATE = WAIT_STATE.replace("IN_SIGHT", IN_SIGHT)
STEP, DRAG = (js.replace("WAIT_STATE", WAIT_STATE).replace("MOVED_BY", MOVED_BY)
              .replace("IN_SIGHT", IN_SIGHT) for js in (STEP, DRAG))


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10, help="passes over each value list")
    parser.add_argument("--only", default="",
                        help="comma-separated lessons (EP12,EP03): those alone")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with running_app() as base, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        print(f"input -> chart redrawn, {args.rounds} x values per lesson, localhost")
        only = {code.strip().upper() for code in args.only.split(",") if code.strip()}
        for label, path, name, values in CASES:
            if only and label.split()[0] not in only:
                continue
            page.goto(base + path)
            wait_drawn(page)
            page.evaluate(STEP, [name, values[:2]])  # warm-up
            times, seen, parts, moved = page.evaluate(STEP, [name, values * args.rounds])
            redraws, tail = page.evaluate(DRAG, [name, min(values), max(values)])
            print(f"{label} (n={len(times)}): the chart it moves (#{moved}) median"
                  f" {statistics.median(seen):.1f} ms, p95 {p95(seen):.1f} ms;"
                  f" all charts in sight median {statistics.median(times):.1f} ms,"
                  f" p95 {p95(times):.1f} ms; 1.6 s drag: {redraws} chart redraws during"
                  f" it, final value drawn {tail:.1f} ms after the last input")
            part = {k: statistics.median(p[k] for p in parts) for k in parts[0]}
            print(f"    where a move's time goes (medians): server {part['server']:.1f} ms,"
                  f" request and wire {part['wire']:.1f} ms, swap and parse until that"
                  f" chart's redraw {part['swap']:.1f} ms, Plotly.react {part['plotly']:.1f} ms"
                  f" over {part['charts']:.0f} charts redrawn, {part['stale']:.0f} out of"
                  f" sight left stale")
        browser.close()


if __name__ == "__main__":
    main()
