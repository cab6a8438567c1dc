"""No chart's text crowds another's or falls off its chart (issue 19), in Chromium at
1280×800 and at 390×844 (touch): for every lesson, its default state and each case button's,
every drawn plotly chart's text labels (annotations, tick labels, legend entries, axis titles,
bar and point text) are measured with ``getBoundingClientRect``; no two may overlap (by more
than OVERLAP px each way) and each must lie inside its chart's box (within EDGE px). A legend
that needs a scroll bar (its entries clipped out of sight) fails too. One page load per lesson
per size, on test_bench_view's case-button walk; the case buttons move it through its states,
as a student moves it (test_embed_fit checks every embed with the same rule)."""

OVERLAP = 1.0  # px: glyph boxes that touch are not crowded
EDGE = 1.0  # px a label may run past its chart's box (antialiasing)

# Every text plotly draws in SVG, by kind; empty or hidden ones are skipped.
CROWDING = """(selectors) => {
    const problems = [];
    const shown = el => {
        if (!el.textContent.trim()) return false;
        for (let e = el; e && e.tagName !== 'svg'; e = e.parentElement) {
            const s = getComputedStyle(e);
            if (s.display === 'none' || s.visibility === 'hidden' || +s.opacity === 0) return false;
        }
        const r = el.getBoundingClientRect();
        return r.width > 0 && r.height > 0;
    };
    for (const chart of document.querySelectorAll('.js-plotly-plot')) {
        const box = chart.getBoundingClientRect();
        if (box.width === 0 || box.height === 0) continue;  // a chart not drawn in this state
        const name = '#' + chart.id;
        const texts = [];
        for (const [kind, sel] of Object.entries(selectors)) {
            for (const el of chart.querySelectorAll(sel)) {
                if (!shown(el)) continue;
                texts.push({kind, text: el.textContent.trim(), r: el.getBoundingClientRect()});
            }
        }
        for (const t of texts) {
            const r = t.r, e = %EDGE%;
            if (r.left < box.left - e || r.right > box.right + e || r.top < box.top - e
                    || r.bottom > box.bottom + e) {
                problems.push(`${name}: ${t.kind} "${t.text}" clipped by the chart`
                    + ` (${Math.round(r.left - box.left)},${Math.round(r.top - box.top)}`
                    + ` ${Math.round(r.width)}x${Math.round(r.height)} in`
                    + ` ${Math.round(box.width)}x${Math.round(box.height)})`);
            }
        }
        for (let i = 0; i < texts.length; i++) for (let j = i + 1; j < texts.length; j++) {
            const a = texts[i].r, b = texts[j].r;
            const w = Math.min(a.right, b.right) - Math.max(a.left, b.left);
            const h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
            if (w > %OVERLAP% && h > %OVERLAP%) {
                problems.push(`${name}: ${texts[i].kind} "${texts[i].text}" overlaps`
                    + ` ${texts[j].kind} "${texts[j].text}"`
                    + ` (${Math.round(w)}x${Math.round(h)} px)`);
            }
        }
        for (const bar of chart.querySelectorAll('.legend .scrollbar')) {
            const r = bar.getBoundingClientRect();
            if (r.height > 0 && r.width > 0) problems.push(`${name}: its legend scrolls`);
        }
    }
    return problems;
}""".replace("%EDGE%", str(EDGE)).replace("%OVERLAP%", str(OVERLAP))
SELECTORS = {
    "annotation": ".annotation-text",
    "x tick": ".xtick text, .x2tick text, .x3tick text",
    "y tick": ".ytick text, .y2tick text, .y3tick text",
    "legend": ".legendtext, .legendtitletext",
    "axis title": ".xtitle, .ytitle, .x2title, .y2title, .x3title, .y3title",
    "chart title": ".gtitle",
    "bar text": ".bartext",
    "point text": ".textpoint text",
}


def crowding(page, where: str) -> list[str]:
    return [f"{where}: {p}" for p in page.evaluate(CROWDING, SELECTORS)]


# The walk that checks CROWDING on every lesson (its default state and each case button's, at
# SIZES) is test_bench_view's test_case_buttons_keep_the_chart_in_view: one page load per lesson
# and size for its rule, this one and test_changed_in_view's case-button rule.
