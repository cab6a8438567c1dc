"""Every figure the lab prints past 999 has its thousands separated (issue 36, round 16: EP02
printed "1013.83×" on 1024 GPUs, EP04's readout "16045.0 ms on one GPU", EP09's timeline
hover "950.8 s to 1412.2 s"). Read over every lesson's opening page and each state its try
links open: the visible text (code, preformatted text and the exports, which a program reads,
left out) and what its charts print (labels, legend names, hover, ticks, summaries)."""

import html
import json
import re

import pytest

from app.episodes import EPISODES

# A number of four or more digits, whole or with decimals, with no separator in it.
BARE = re.compile(r"(?<![\w.,\-/#=%:])(\d{4,})(\.\d+)?(?![\w,]|\.\d)")
# Numbers that are names, not quantities: a year, a paper's arXiv id, a product (RTX 4090),
# an issue or pull request.
NAMED = re.compile(r"(arXiv:|RTX |issues? (\d+, )*|PR |pull request |amax_history_len=)$")
FIGURE = re.compile(r'<script type="application/json" class="figure"[^>]*>(.*?)</script>', re.S)
# What a chart prints of its figure: plotly draws these strings.
PRINTED = {"text", "name", "hovertemplate", "summary", "customdata", "hovertext", "ticktext"}


def bare(text: str) -> list[str]:
    """Each number past 999 in ``text`` without a thousands separator, in its context."""
    found = []
    for m in BARE.finditer(text):
        year = not m[2] and 1900 <= int(m[1]) <= 2099
        if year or NAMED.search(text[max(0, m.start() - 30):m.start()]):
            continue
        found.append(re.sub(r"\s+", " ", text[max(0, m.start() - 60):m.end() + 20]))
    return found


def printed(value, key: str = "") -> list[str]:
    """The strings a chart's figure prints, from its JSON."""
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in printed(v, k)]
    if isinstance(value, list):
        return [s for v in value for s in printed(v, key)]
    return [value] if isinstance(value, str) and key in PRINTED else []


# A value a hover template prints, with its d3 format: "%{y:.3g}" prints 1013.8 as 1.01e+3,
# "%{x}" 1024 bare; "," in the format separates the thousands.
SPEC = re.compile(r"%\{(x|y|z|base|customdata)(?:\[(\d+)\])?(?::([^}]*))?\}")


def numbers(value) -> list[float]:
    if isinstance(value, list):
        return [n for v in value for n in numbers(v)]
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    return [abs(value)] if ok else []


def hovered(trace: dict) -> list[str]:
    """Each hover or text template of a trace that prints a value past 999 with no separator."""
    found = []
    for key in ("hovertemplate", "texttemplate"):
        templates = trace.get(key) or []
        for template in templates if isinstance(templates, list) else [templates]:
            for m in SPEC.finditer(template):
                name, index, spec = m[1], m[2], m[3] or ""
                # SI and percent formats need none; "GPU 2047", "node 255" name one.
                if "," in spec or spec.endswith(("s", "%")) or re.search(
                        r"(GPU|node|rank) $", template[:m.start()]):
                    continue
                values = trace.get(name) or []
                if index is not None:
                    values = [v[int(index)] for v in values if isinstance(v, list)]
                if max(numbers(values), default=0) >= 999.5:
                    found.append(f"{template} ({trace.get('name')})")
    return found


def shown(page: str) -> list[str]:
    """A page's visible text, less code, and its charts' printed strings (a hover template
    that would print a figure past 999 bare, as itself: none passes ``bare``)."""
    figures = [json.loads(m[1]) for m in FIGURE.finditer(page)]
    charts = [s for f in figures for s in printed(f)]
    charts += [f"{h} 1000.0" for f in figures for t in f.get("data", []) for h in hovered(t)]
    body = re.sub(r"<(script|style|pre|code|textarea)\b.*?</\1>", " ", page, flags=re.S)
    return [html.unescape(re.sub(r"<[^>]+>", " ", body)), *charts]


def test_hovered_finds_a_hover_that_prints_a_figure_bare():
    trace = {"x": [8, 1024], "y": [7.6, 1013.8], "hovertemplate": "%{x} GPUs: %{y:.3g}×"}
    assert hovered(trace) == ["%{x} GPUs: %{y:.3g}× (None)"] * 2
    assert not hovered({**trace, "hovertemplate": "%{x:,} GPUs: %{y:,.3~r}×"})


def test_bare_finds_a_bare_figure_and_passes_names():
    assert len(bare("at 1024 GPUs 1013.83× (16045.0 ms), bucket 1742 of 1,764")) == 4
    assert not bare("1,024 GPUs, 1,013.83×, Narayanan et al. 2021, arXiv:2104.04473, an RTX "
                    "4090, TE issues 1261, 1429, PR 647, 0.0001 s")


@pytest.mark.parametrize("episode", EPISODES, ids=[e.slug for e in EPISODES])
def test_no_figure_past_999_is_printed_without_its_separator(client, episode):
    opening = client.get(episode.url).text
    links = sorted({html.unescape(h) for h in re.findall(r'<a class="try" href="([^"]+)"',
                                                         opening)})
    found = {}
    for url in [episode.url, *links]:
        page = opening if url == episode.url else client.get(url).text
        for text in shown(page):
            for hit in bare(text):
                found.setdefault(hit, url)
    assert not found, found
