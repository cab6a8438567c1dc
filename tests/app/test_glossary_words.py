"""Issue 36, standard 4 (round 19): every term of art a page uses is in the glossary and marked
at its first use there, on the pages beyond the lessons too (the validation page, your run, the
cheat sheet, the home page). A sweep of each page's prose lists every acronym (a word that
opens with two capitals: DTensor, MBS, TP8) and the jargon a student meets in lower case (ring
attention, buckets): each must be a glossary term where it stands, or a name the lab does not
teach (a GPU, a model, a unit, a paper's venue), listed in ``NAMES`` with why."""

import re
from pathlib import Path

import pytest

import app.main  # noqa: F401  (registers every lab view)
from app.episodes import EPISODES
from app.glossary import GLOSSARY
from tests.app.test_glossary import Prose

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "runs"
RECIPE = "/episodes/recipe-3d"
PAGES = [*[e.slug for e in EPISODES], "validation", "cheatsheet", "your-run", "home"]

# The round-19 list (issue 36, standard 4): used on a page with no entry, or, for the buckets,
# not marked at EP02's first use. Each has an entry with its source.
ROUND_19 = ("dtensor", "vpp", "mbs", "gbs", "ring-attention", "mamf", "wps")
# What the sweep below found besides: SMs, MoE, MLP, QKV, NVLink, RDMA, FP8 (and AC, SP, TE,
# HBM3, TPS, which now mark the entries that spell them out).
SWEPT = ("sm", "moe", "mlp", "qkv", "nvlink", "rdma", "fp8-formats")

# Names, not terms of art: hardware and software products, models, companies, units, file
# formats, paper venues and the lab's own labels. A student needs none defined to follow the
# lesson (a GPU's name is a choice in a list, a unit is a unit); a new acronym not here and not
# in the glossary fails the sweep.
# fmt: off
NAMES = {
    # units and sizes
    "GB", "MB", "TB", "KB", "GiB", "MiB", "TFLOP", "PFLOP", "GFLOP", "FLOP", "FLOPs", "MT",
    # the lab's own labels: episode codes, its API and pages
    "EP", "API", "JSON", "URL", "POST", "TOML", "README",
    # GPUs, boards, their makers and parts (a choice in a list, with its datasheet)
    "GPU", "GPUs", "CPU", "CPUs", "NVIDIA", "AMD", "SXM", "HGX", "DGX", "RTX", "MI", "GH",
    "PCIe", "RAM", "NIC", "NICs", "NVL", "GeForce", "SuperPOD",
    # networks, memories and transports by product or standard name (InfiniBand generations,
    # Ethernet's RDMA flavour, host memory)
    "HDR", "XDR", "RoCE", "IB", "GPUDirect", "DDR", "TCP",
    # models and their makers
    "GPT", "GLM", "LLaMA", "A22B", "A3B", "LM",
    # software, libraries, methods and files by name, each cited where it stands
    "CUDA", "SGLang", "GShard", "GPTQ", "LLM", "ML", "DCP", "CONFIG", "AI", "NET",
    # named, and said in words, in the same sentence: SHARP ("sums in a ... network switch"),
    # DMA ("direct memory access"), Looped BFS ("Breadth-First Pipeline Parallelism"), NCCL's
    # PAT (EP02 step 3's note: "for all-gather and reduce-scatter with one GPU a node")
    "SHARP", "DMA", "BFS", "PAT",
    # symbols of a formula (softmax(QKᵀ)V, QKᵀ and AV, the cheat sheet's KV = 1.68 GB), a
    # spec's and a class's names (OCP MX, TE's MXFP8BlockScaling) and a log's words ("CE loss")
    "QK", "AV", "KV", "MX", "MXFP", "CE",
    # paper venues and citations
    "ICLR", "CACM", "FGCS", "OCP", "SOSP",
}
# fmt: on


def _prose(html: str, roots: frozenset[str]) -> Prose:
    prose = Prose(roots)
    prose.feed(html.split('id="step-drill"')[0])
    return prose


@pytest.fixture(scope="module")
def pages(client) -> dict[str, list[Prose]]:
    """Every page's prose, each part that marks its own first uses parsed on its own: a
    lesson's lede and steps, the validation page's main, the cheat sheet's lines, your run's
    lede and its answer for a Megatron-LM log, the home page's episode list."""
    out = {
        e.slug: [_prose(client.get(e.path).text, frozenset({"lede", "steps"}))] for e in EPISODES
    }
    out["validation"] = [_prose(client.get(f"{RECIPE}/validation").text, frozenset({"main"}))]
    out["cheatsheet"] = [
        _prose(client.get("/episodes/playground/cheatsheet").text, frozenset({"cheatsheet-lines"}))
    ]
    run = client.post(
        f"{RECIPE}/your-run",
        data={"log": (FIXTURES / "megatron_llama3_8b.log").read_text(), "gpu": "h100-sxm"},
    ).text
    out["your-run"] = [_prose(run, frozenset({"lede"})), _prose(run, frozenset({"run-answer"}))]
    out["home"] = [_prose(client.get("/").text, frozenset({"episodes"}))]
    return out


def test_round_19_terms_have_entries_with_a_source(client):
    terms = {t.slug: t for t in GLOSSARY}
    glossary = client.get("/glossary").text
    for slug in (*ROUND_19, *SWEPT):
        assert slug in terms, slug
        assert terms[slug].source, slug
        assert f'data-testid="source-{slug}">Source: ' in glossary, slug
    vpp, wps = terms["vpp"], terms["wps"]
    assert vpp.regex.search("PP 4 x VP 10") and vpp.regex.search("TP 2, PP 8, VPP 4")
    assert not terms["interleaved"].regex.search("VPP 4")  # VPP's own tip, not interleaved's
    assert "so tokens/s per GPU" in wps.definition
    assert wps.regex.search("WPS = tokens/s per GPU") and wps.regex.search("TPS/GPU")
    buckets = terms["gradient-buckets"].regex
    assert buckets.search("DDP groups gradients into buckets (25 MiB by default)")
    assert not buckets.search("one weight-update bucket, streamed a bucket at a time")  # EP09


def _first_own_use(text: str, term):
    """The term's first use that is not part of a longer term's words (the GEMM of "grouped
    GEMM" is the grouped GEMM's use, as define_terms reads it)."""
    for match in term.regex.finditer(text):
        if not any(
            other is not term
            and any(
                m.start() <= match.start()
                and m.end() >= match.end()
                and m.end() - m.start() > match.end() - match.start()
                for m in other.regex.finditer(
                    text, max(0, match.start() - 40), min(len(text), match.end() + 40)
                )
            )
            for other in GLOSSARY
        ):
            return match
    return None


@pytest.mark.parametrize("page", PAGES)
def test_every_term_a_page_uses_is_marked_at_its_first_use(pages, page):
    """The lessons' check (test_glossary.py), on every page that marks terms."""
    for prose in pages[page]:
        assert prose.text, page
        for term in GLOSSARY:
            used = _first_own_use(prose.text, term)
            if not used:
                continue
            assert prose.defined.get(term.slug) == used.start(), (
                page,
                term.slug,
                prose.text[max(0, used.start() - 60) : used.start() + 40],
            )


@pytest.mark.parametrize(
    ("page", "slugs"),
    [
        ("validation", {"dtensor", "vpp", "mbs", "gbs", "ring-attention", "wps", "rdma"}),
        ("cheatsheet", {"ring-attention", "mamf"}),
        ("data-parallel", {"gradient-buckets", "nvlink"}),
        ("context-parallel", {"ring-attention"}),
    ],
)
def test_round_19_terms_are_marked_where_they_were_missing(pages, page, slugs):
    """Fails on the old pages: none of these had an entry, and EP02's 'gradients into buckets'
    went unmarked (its first marked use was EP08's)."""
    defined = set().union(*(set(p.defined) for p in pages[page]))
    assert slugs <= defined, slugs - defined


ACRONYM = re.compile(r"\b[A-Z]{2}[A-Za-z]*")  # DTensor, MBS, NVLink; TP8 -> TP; HBM2e -> HBM
JARGON = re.compile(r"\bring attention\b|\bbuckets\b", re.I)


def _covered(text: str, start: int, end: int) -> bool:
    """Whether a glossary term's pattern matches over text[start:end] where it stands, or
    matches the acronym alone (a layout's TP8 is TP's)."""
    for term in GLOSSARY:
        if term.regex.fullmatch(text[start:end]):
            return True
        for match in term.regex.finditer(text, max(0, start - 40), min(len(text), end + 40)):
            if match.start() <= start and match.end() >= end:
                return True
    return False


@pytest.mark.parametrize("page", PAGES)
def test_every_acronym_and_known_jargon_is_a_glossary_term_or_a_name(pages, page):
    """The sweep: an acronym neither in the glossary nor in NAMES fails (on the old code it
    listed DTensor, VPP, VP, MBS, GBS, WPS and TPS on the validation page, MAMF on the cheat
    sheet, and SM, MoE, MLP, QKV, NVLink, FP8 everywhere); so does ring attention or buckets
    where no term's pattern covers it."""
    missing = {}
    for prose in pages[page]:
        text = prose.text
        for found in (*ACRONYM.finditer(text), *JARGON.finditer(text)):
            word = found.group(0)
            if word in NAMES or _covered(text, found.start(), found.end()):
                continue
            missing.setdefault(
                word, " ".join(text[max(0, found.start() - 50) : found.end() + 30].split())
            )
    assert not missing, missing
