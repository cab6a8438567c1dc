"""The glossary (issue 36, item 4): /glossary defines every term of art, every page's nav links
to it, and in every lesson each glossary term the prose uses is defined at its first use: an
inline definition (hover, focus or tap) with the glossary's words and a link to its entry."""

import re
from html.parser import HTMLParser

import pytest

import app.main  # noqa: F401  (registers every lab view)
from app.episodes import EPISODES
from app.glossary import GLOSSARY

ASKED = ("busbw", "nvls", "ll-protocol", "wave-quantisation", "hfu", "mfu", "tn-layout", "e8m0",
         "micro-batch", "gradient-accumulation", "bubble", "zero")  # the issue's list
SKIP = {"a", "code", "pre", "h1", "h2", "h3", "h4", "script", "style", "button", "summary",
        "label", "select", "option", "textarea", "sub", "sup", "abbr", "svg"}
# Elements with no end tag: never on the stack (a step's in-step guess has an <input>).
VOID = {"input", "br", "img", "hr", "wbr", "meta", "link", "source"}
BLOCK = {"p", "li", "td", "th", "tr", "div", "section", "dd", "dt", "caption", "table", "ul",
         "ol", "details"}


class Prose(HTMLParser):
    """A lesson's lede and steps as a reader meets them: the prose's text in order (not in
    links, code, headings or controls, nor a definition's tip), and where each inline
    definition starts in it. ``roots``: the elements (by class, id, data-testid or tag) whose
    text is the page's prose; a lesson's lede and steps unless another page says otherwise."""

    def __init__(self, roots: frozenset[str] = frozenset({"lede", "steps"})) -> None:
        super().__init__()
        self.roots = roots
        self.text, self.defined, self.tips = "", {}, {}
        self.stack: list[str] = []
        self.inside = 0  # depth inside the lede or the steps
        self.tip: str | None = None
        self.tip_depth = 0
        self.term: str | None = None

    def handle_starttag(self, tag, attrs):
        if tag in VOID:
            if tag == "br" and self.inside and self.tip is None:
                self.text += " "  # a line break parts words ("MLPs<br>whole": two words)
            return
        if tag in BLOCK and self.inside and self.tip is None:
            self.text += "\n"  # so do a table's cells, a list's items, paragraphs
        attrs = dict(attrs)
        classes = (attrs.get("class") or "").split()
        if self.inside:
            self.inside += 1
        elif self.roots & {tag, attrs.get("id"), attrs.get("data-testid"), *classes}:
            self.inside = 1
        if not self.inside:
            return
        if self.tip is not None:
            self.tip_depth += 1
        elif "term-tip" in classes:
            self.tip, self.tip_depth = self.term, 1
            self.tips[self.term] = ""
        if attrs.get("data-term"):
            self.term = attrs["data-term"]
            assert self.term not in self.defined, f"{self.term} defined twice"
            self.defined[self.term] = len(self.text)
        self.stack.append(tag)

    def handle_endtag(self, tag):
        if not self.inside:
            return
        self.inside -= 1
        if self.tip is not None:
            self.tip_depth -= 1
            if self.tip_depth == 0:
                self.tip = None
        if self.stack:
            self.stack.pop()

    def handle_data(self, data):
        if not self.inside:
            return
        if self.tip is not None:
            self.tips[self.tip] += data
        elif not SKIP & set(self.stack):
            self.text += data


def test_the_glossary_defines_every_term_once_with_an_anchor(client):
    assert len({t.slug for t in GLOSSARY}) == len(GLOSSARY)
    assert set(ASKED) <= {t.slug for t in GLOSSARY}
    page = client.get("/glossary")
    assert page.status_code == 200
    for term in GLOSSARY:
        assert f'id="{term.slug}"' in page.text
        assert term.definition.replace("'", "&#39;") in page.text


@pytest.mark.parametrize("path", ["/", "/glossary", *[e.path for e in EPISODES]])
def test_every_page_links_the_glossary_from_its_nav(client, path):
    nav = client.get(path).text.split('<header class="site">')[1].split("</header>")[0]
    assert 'href="/glossary"' in nav


@pytest.mark.parametrize("episode", EPISODES, ids=lambda e: e.slug)
def test_every_term_a_lesson_uses_is_defined_at_its_first_use(client, episode):
    prose = Prose()  # the lede and the steps, up to the drills
    prose.feed(client.get(episode.path).text.split('id="step-drill"')[0])
    assert prose.text, episode.slug
    for term in GLOSSARY:
        used = term.regex.search(prose.text)
        if not used:
            assert term.slug not in prose.defined, term.slug
            continue
        assert prose.defined.get(term.slug) == used.start(), (episode.slug, term.slug)
        tip = " ".join(prose.tips[term.slug].split())
        assert " ".join(term.definition.split()) in tip and "Glossary" in tip, term.slug


def test_a_definitions_link_goes_to_its_entry(client):
    html = client.get("/episodes/data-parallel").text
    links = re.findall(r'<span class="term-tip"[^>]*>.*?href="/glossary#([a-z0-9-]+)"', html)
    assert links and set(links) <= {t.slug for t in GLOSSARY}


def _defined(client, path: str) -> set[str]:
    prose = Prose()
    prose.feed(client.get(path).text.split('id="step-drill"')[0])
    return set(prose.defined)


def test_round_5_terms_have_entries_and_their_first_uses_are_marked(client):
    """Round-5 cold readings: NCCL, DDP and SwiGLU had no entry; 'Strong scaling' (EP02 step
    7), 'Interleaving' (EP05 step 4) and 'Llama's SwiGLU', SDPA and Transformer Engine (EP01
    step 3) went unmarked, the first two because a capitalised first word did not match."""
    slugs = {t.slug for t in GLOSSARY}
    assert {"nccl", "ddp", "swiglu", "logits", "sdpa", "transformer-engine", "algbw", "amax",
            "paged-optimizer", "rowwise", "asynctp", "dualpipe", "mtp", "grouped-gemm",
            "oversubscription", "rail-optimised", "tectonic"} <= slugs
    assert {"swiglu", "sdpa", "transformer-engine", "logits"} <= _defined(client,
                                                                         "/episodes/memory")
    assert {"strong-scaling", "nccl"} <= _defined(client, "/episodes/data-parallel")
    assert "interleaved" in _defined(client, "/episodes/pipeline")
    term = {t.slug: t for t in GLOSSARY}
    assert term["strong-scaling"].regex.search("Strong scaling runs out of tokens")
    assert term["interleaved"].regex.search("Interleaving shrinks the bubble")
    assert term["mtbi"].regex.search("the mean time between interruptions")


def test_round_5_definitions_say_what_the_lessons_teach():
    """busBW: NVLS's busBW tops the link's (EP02), so 'only a share' holds for ring and tree;
    the gradient noise scale measured is B_simple; Adam's moments are bf16 in DeepSeek-V3's
    recipe (EP10); FSDP's ZeRO-3 is its default; ZB-H1 is named."""
    term = {t.slug: t.definition for t in GLOSSARY}
    assert "For ring and tree" in term["busbw"] and "NVLS" in term["busbw"]
    assert "2(N − 1)/N" in term["busbw"] and "algBW" in term["busbw"]
    assert "B_simple = tr(Σ) ÷ |G|²" in term["gradient-noise-scale"]
    assert "tr(HΣ)" in term["gradient-noise-scale"]
    assert "bf16 (DeepSeek-V3: 4 bytes)" in term["adam-moments"]
    assert "ZeRO-3 by default" in term["fsdp"]
    assert "ZB-H1, from Qi et al. 2024 (ICLR 2024; arXiv:2401.10241," in term["zero-bubble"]


def test_the_glossary_has_a_letter_index_whose_links_land(client):
    """Round-5 reading: 57 entries (now more) with no jump list were ~25 screens at 390 px.
    Each letter link lands on an anchor before that letter's first entry, in A-Z order."""
    html = client.get("/glossary").text
    links = re.findall(r'<a href="#letter-([A-Za-z]+)">', html)
    assert len(links) >= 15 and links == sorted(links, key=lambda x: (x != "digits", x))
    for letter in links:
        assert f'id="letter-{letter}"' in html
    firsts = {t.term[0].upper() for t in GLOSSARY if t.term[0].isalpha()}
    assert set(links) - {"digits"} == firsts
    entries = re.findall(r'<div class="entry" id="([a-z0-9-]+)">', html)
    names = {t.slug: t.term.casefold() for t in GLOSSARY}
    assert [names[s] for s in entries] == sorted(names[s] for s in entries)


@pytest.mark.parametrize(("path", "shown"), [("/episodes/pipeline", True),
                                             ("/episodes/playground", True),
                                             ("/episodes/experts", False),
                                             ("/episodes/memory", False), ("/glossary", False)])
def test_the_footer_names_the_pipelines_unit_only_on_pipeline_pages(client, path, shown):
    """Round-5 reading, item 6: every footer said 'one stage's forward = f' while EP07 writes
    f for an expert's width."""
    footer = client.get(path).text.split('<footer class="site">')[1]
    assert ("pipeline times are relative" in footer) is shown


def test_round_6_ep09_terms_have_entries_and_are_defined_where_ep09_uses_them(client):
    """Round-6 cold reading of EP09, item 9: attention data parallelism, multi-head latent
    attention, prefill and decode, disaggregation, one step off-policy, importance ratios and
    CPU Adam were used with no hover and no entry. Each has one, and EP09 marks its first
    use (attention data parallelism before the 'data parallelism' inside it)."""
    new = {"attention-dp", "mla", "prefill-decode", "disaggregation", "off-policy",
           "importance-ratio", "cpu-adam"}
    assert new <= {t.slug for t in GLOSSARY}
    assert new <= _defined(client, "/episodes/rl-placement")
    term = {t.slug: t for t in GLOSSARY}
    assert term["attention-dp"].regex.search("Attention data parallelism hands each GPU")
    assert term["prefill-decode"].regex.search("Prefill reads a prompt")
    assert not term["prefill-decode"].regex.search("the decodes batched beside it")


def test_each_terms_pattern_is_built_once():
    """define_terms runs over every lesson page's prose, probing every term: each term's
    regular expression is built once and kept (issue 31: a page rebuilt them ~18,000 times)."""
    from app.glossary import define_terms
    define_terms("<p>the bus bandwidth</p>")
    assert all("regex" in vars(t) for t in GLOSSARY)
    kept = [t.regex for t in GLOSSARY]
    define_terms("<p>again</p>")
    assert all(t.regex is k for t, k in zip(GLOSSARY, kept, strict=True))


def test_round_11_ep09_hbm_ndr_and_cuda_ipc_are_defined_at_first_use(client):
    """Round-11 cold reading of EP09, finding 11b: HBM (step 5), NDR (step 6) and CUDA IPC
    (the phases table) were used with no definition. Each has a glossary entry, EP09 marks its
    first use and says what it is there, and the bench's phases table links CUDA IPC to its
    entry."""
    new = {"hbm", "ndr", "cuda-ipc"}
    assert new <= {t.slug for t in GLOSSARY}
    assert new <= _defined(client, "/episodes/rl-placement")
    page = client.get("/episodes/rl-placement").text
    text = re.sub(r"\s+", " ", re.sub(r'<span class="term-tip".*?</span>', "", page))
    text = re.sub(r"<[^>]+>", "", text)
    assert "HBM (high-bandwidth memory, the GPU's own memory)" in text
    assert "NDR port (InfiniBand's 400 Gb/s generation, one port a GPU)" in text
    assert "through CUDA IPC (the engine opens the trainer's GPU buffer by a handle" in text
    assert 'NVLink (<a href="/glossary#cuda-ipc">CUDA IPC</a>)' in page


def test_round_14_ep01_and_ep03_gloss_their_formats_and_the_crossover_at_first_use(client):
    """Round-14 cold reading of EP01-EP03, finding 9: EP01 used bf16, fp32, int8, int4 (its
    first question) and "a 4h GeLU MLP" (step 3) with no definition; EP03 used T* in step 9's
    intro before the crossover was defined, and left InfiniBand NDR (only in a try link) and
    HSDP (FSDP's HYBRID_SHARD) unmarked. Each now has an entry marked at its first use, and
    EP03's first T* comes with the crossover's definition."""
    assert {"bf16", "fp32", "gelu", "int8-int4"} <= _defined(client, "/episodes/memory")
    assert {"crossover", "ndr", "hsdp"} <= _defined(client, "/episodes/zero")
    prose = Prose()
    prose.feed(client.get("/episodes/zero").text.split('id="step-drill"')[0])
    assert prose.text.index("T*") >= prose.defined["crossover"]
    term = {t.slug: t for t in GLOSSARY}
    assert term["bf16"].regex.search("BF16 GEMMs") and term["fp32"].regex.search("FP32 scale")
    assert term["int8-int4"].regex.search("1 in int8, 0.5 in int4")


@pytest.mark.parametrize(("path", "symbol", "clause"), [
    ("/episodes/data-parallel", "T*", "The crossover, T*, is the tokens per GPU at which the two "
                                      "take equal time"),
    ("/episodes/context-parallel", "L*", "The crossover, L*, is the tokens per rank at which the "
                                         "two take equal time"),
    ("/episodes/experts", "f*", "The crossover, f*, is the expert width at which the GEMMs and "
                                "the all-to-alls take equal time"),
    ("/episodes/recipe-3d", "T*", "the crossover, T* (EP03), the tokens at which the gathers and "
                                  "the compute take equal time"),
])
def test_issue_36_each_lesson_defines_the_crossover_before_its_first_t_star(client, path, symbol,
                                                                            clause):
    """Issue 36 (r16): EP02, EP06, EP07 and EP08 used T* before the crossover was defined
    (EP02 put it in a heading and a formula, EP06 and EP07 named DP's T* with no definition
    at all, EP08 glossed "EP03's crossover" after its T*). Each now says what its threshold is
    in a clause, as EP03 does ("The crossover, T*, is the tokens per GPU at which the two take
    equal time"), with the glossary's tip on "crossover" at or before its first T* and its
    own symbol (L*, f*)."""
    prose = Prose()
    prose.feed(client.get(path).text.split('id="step-drill"')[0])
    text = " ".join(prose.text.split())
    assert "crossover" in prose.defined, path
    first = min(i for i in (prose.text.find("T*"), prose.text.find(symbol)) if i >= 0)
    assert first >= prose.defined["crossover"], (path, prose.text[first - 80:first + 40])
    assert clause in text, path


def test_round_17_the_1f1b_tips_in_flight_bounds_are_the_catalogues(client):
    """Round-17 cold reading of EP05, finding 4: the 1F1B tip said "at most p micro-batches"
    with no reason, and showed it beside EP11's "interleaved 1F1B", whose rank 0 holds more.
    The tip now says why (the first stage's warm-up runs p forwards before its first
    backward) and gives no rank r's p − r, EP05 step 3's answer; interleaved 1F1B's entry
    gives its own rank 0's (p + (p − 1)/v), each as the schedule catalogue's in-flight rule
    computes it, and no lesson shows the plain tip on an interleaved 1F1B."""
    from labs.schedules.catalogue import CATALOGUE

    terms = {t.slug: t for t in GLOSSARY}
    tip = terms["1f1b"].definition
    assert "p forwards before its first backward, so no stage holds more than p" in tip
    assert "p − r" not in tip  # EP05 step 3 asks rank 5's peak, p − 5, after this tip
    assert "p + (p − 1)/v micro-batches' worth" in terms["interleaved"].definition
    plain, inter = CATALOGUE["1f1b"].in_flight, CATALOGUE["interleaved-1f1b"].in_flight
    for p in (2, 4, 8, 16):
        for m in (1, p - 1, p, 4 * p):
            assert max(plain(p, m, r, 1) for r in range(p)) == plain(p, m, 0, 1) == min(m, p)
        for v in (2, 3, 4):
            assert inter(p, 8 * p, 0, v) == p + (p - 1) / v > p
    for episode in EPISODES:
        html = client.get(episode.path).text
        for tip in re.finditer(r'data-term="1f1b"', html):
            before = re.sub(r'<span class="term-tip".*?</span></span>', "",
                            html[max(0, tip.start() - 2000):tip.start()], flags=re.S)
            before = re.sub(r"<[^>]+>", "", before)
            assert not re.search(r"interleaved\s*$", before, re.I), (episode.slug, before[-80:])


def test_round_20_off_policy_reads_as_one_comparison():
    """Round-20 cold reading R, finding 18: "samples that older weights generated than the
    ones being trained" split the comparative from its noun."""
    from app.glossary_terms import GLOSSARY

    text = next(t for t in GLOSSARY if t.slug == "off-policy").definition
    assert "generated by older weights than the ones being trained" in text


def test_round_21_interleaved_1f1bs_bubble_says_when_each_form_holds():
    """Round-21 cold reading R, finding 14: the entry gave (p − 1)/(v·m + p − 1) with no
    condition, where EP11 step 7 quotes 75.7% at p = 16, m = 4, v = 7 (that form gives
    34.9%). It gives that form for m ≥ p and 1 − v·m/(v·p + m − 1) for fewer micro-batches
    than stages, each what the pipeline simulator measures in its range."""
    from labs.schedules.inputs import PipelineInput
    from labs.schedules.simulate import simulate

    text = next(t for t in GLOSSARY if t.slug == "interleaved").definition
    assert "(p − 1)/(v·m + p − 1) of the pipeline's time while m ≥ p" in text
    assert "With fewer micro-batches than stages" in text
    assert "1 − v·m/(v·p + m − 1) (EP11 step 7)" in text
    for p, m, v in ((4, 2, 2), (16, 4, 7), (8, 4, 2), (4, 4, 2), (4, 8, 2), (8, 16, 3)):
        run = simulate(PipelineInput(schedule="interleaved-1f1b", stages=p, microbatches=m,
                                     virtual=v, f=1, b=2, w=0))
        said = (p - 1) / (v * m + p - 1) if m >= p else 1 - v * m / (v * p + m - 1)
        assert run.bubble_fraction == pytest.approx(said), (p, m, v)


def test_round_21_mla_caches_the_decoupled_rotary_key_in_v2_too():
    """Round-21 cold reading R, finding 16: "plus 64 for the rotary part in DeepSeek-V3 and
    R1" read as if V2's latent had none; V2 already caches the 64-wide decoupled rotary key
    (kv_lora_rank 512, qk_rope_head_dim 64)."""
    term = next(t for t in GLOSSARY if t.slug == "mla")
    assert "64-wide decoupled rotary key: V2, V3 and R1 alike" in term.definition
    assert "in DeepSeek-V3 and R1)" not in term.definition
    assert "DeepSeek-V2" in term.source


def test_round29_a_bf16s_digits_and_hsdps_torchtitan_degrees(client):
    """Round-29 reading A, findings 5 and 6. bf16's 7 stored mantissa bits and the implicit
    one give 8 bits of precision, log10(2^8) = 2.4 decimal digits: "about three" was fp16's
    (11 bits, 3.3). HSDP in torchtitan is data_parallel_replicate_degree (the groups) with
    data_parallel_shard_degree (each group's FSDP), both above 1: the shard degree alone is
    plain FSDP. The glossary page prints both as the entries say."""
    import math

    term = {t.slug: t for t in GLOSSARY}
    digits = math.log10(2 ** (7 + 1))
    assert 2 < digits < 3
    assert "8 bits of precision" in term["bf16"].definition
    assert "between two and three significant decimal digits" in term["bf16"].definition
    assert "about three" not in term["bf16"].definition
    hsdp = term["hsdp"].definition
    assert re.search(r"data_parallel_replicate_degree .*data_parallel_shard_degree .*both above 1",
                     hsdp), hsdp
    page = client.get("/glossary").text
    assert "between two and three significant decimal digits" in page
    assert "data_parallel_replicate_degree" in page


def test_round31_crossover_gives_zero_3s_ratio_for_each_gradient_width():
    """Round-31 reading A, finding 2: the crossover entry said "ZeRO-3: 1.5 times either",
    wrong for fp32 gradients. ZeRO-3 sends two bf16 weight gathers (2 B each) and a b-byte
    reduce-scatter against DP's 2b: (4 + b)/(2b), 1.5 at b = 2 and 1 (DP's own) at b = 4."""
    from labs.data_parallel.lab import GRAD_BYTES_PER_PARAM

    entry = next(t for t in GLOSSARY if t.slug == "crossover").definition
    assert "1.5 times either" not in entry
    assert "(4 + b)/(2b)" in entry
    bf16 = (2 * 2 + GRAD_BYTES_PER_PARAM) / (2 * GRAD_BYTES_PER_PARAM)
    assert f"{bf16:g} times DP's T* for bf16 gradients" in entry
    assert f"(4 + 4)/8 = {(2 * 2 + 4) / (2 * 4):g}, the same as DP's" in entry


def test_round31_the_hbm_entry_joins_the_cards_80_gib_to_the_drivers_total():
    """Round-31 reading A, finding 9: EP01 step 1 gives the driver's 81,559 MiB (85.5 GB) and
    the HBM tip the card's 80 GiB (85.9 GB), with no sentence joining them. The entry says
    the driver reports that much of the card's, each GB worked from its MiB or GiB."""
    from labs.hardware.gpus import GIB, H100_DRIVER_MIB, get_gpu

    entry = next(t for t in GLOSSARY if t.slug == "hbm").definition
    card = get_gpu("h100-sxm").card_memory_gib
    assert (f"An H100 carries {card:g} GiB ({card * GIB / 1e9:.1f} GB), of which nvidia-smi "
            f"reports {H100_DRIVER_MIB:,} MiB ({H100_DRIVER_MIB * 2**20 / 1e9:.1f} GB: EP01 "
            "step 1)") in entry, entry


def test_round31_ep10_step_12s_side_stream_and_copy_engine_are_tipped(client):
    """Round-31 reading A, finding 11: EP10 step 12's question says "a side stream copies each
    layer's out" and its why "A copy engine moves it over PCIe beside both the kernels and
    the NVLink collectives", the reason the window is the whole forward, with neither term
    defined. Each is a glossary entry with its source, tipped at its first use, in step 12."""
    page = client.get("/episodes/low-precision").text
    glossary = client.get("/glossary").text
    terms = {t.slug: t for t in GLOSSARY}
    twelve = page.index('<section class="step" id="step-12"')
    for slug, word in (("side-stream", "side stream"), ("copy-engine", "copy engine")):
        at = page.index(f'id="term-{slug}"')
        assert page.rfind('<section class="step" id="step-', 0, at) == twelve, slug
        assert page.lower().index(word) >= at, slug  # the first use is the tipped one
        assert terms[slug].source and f'id="{slug}"' in glossary, slug
