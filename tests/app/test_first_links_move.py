"""A step's first try link changes the state: issue 36, "a try link visibly changes the diagram
its step names".

A student reads the steps in order and follows each step's first link. A first link that sets
the very state the step before's first link set changes nothing on the page (EP08 step 14 did,
commit d949c91). The states are compared as the server parses them (app/labkit/parsing.py
``validate`` and ``canonical``): every control's value, defaults included, so two links that
spell one state differently (a default written out, controls in another order) are one state.

The stricter rule, that a first link sets no state any link of the step before sets (a student
may have followed any of them), holds for every step but those in ``REPEATS_ANOTHER_LINK``. The
list may only shrink; it is empty since round 9, when EP07 step 9 (its first link was step 8's
second, DeepSeek-V3 at 1,024 tokens, EP 64) moved to EP 8 and EP08 step 11 (both its links were
step 10's) to the seed plan as ZB-H1.
"""

from itertools import pairwise
from urllib.parse import parse_qsl, urlsplit

import pytest

import app.main  # noqa: F401  (registers every lab view)
from app.labkit import VIEWS
from app.labkit.parsing import canonical, validate
from app.labkit.render import page_items
from tests.app.test_prose import steps_of

PAGES = {view.episode.path: view for view in VIEWS.values()}
REPEATS_ANOTHER_LINK: set[str] = set()
# Lessons whose step 1 has one link, to the opening state, each with why; the set may only
# shrink. Empty since EP12 left it: its step 1's link drew EP08's memory audit at the opening
# state, the same pixels (tests/browser/test_changed_in_view), and now sets the worked plan at
# twice the tokens, EP01's ledger moving past the H100's 80 GB (round-15 cold reading of EP12,
# finding 2's link).
OPENS_ON_THE_OPENING_STATE: set[str] = set()


def link_states(client, page: str) -> list[tuple[str, list[tuple]]]:
    """(step id, canonical state of each try link), for each step of a lesson in order."""
    view = PAGES[page]
    states = []
    for step in steps_of(client, page):
        found = []
        for link in step["links"]:
            href = link["href"]  # the parser unescapes attributes
            assert urlsplit(href).path == page, href
            query, errors, _ = validate(view, parse_qsl(urlsplit(href).query))
            assert query is not None, f"{page} {step['attrs']['id']}: {href}: {errors}"
            found.append(canonical(query))
        states.append((f"{view.episode.code} {step['attrs']['id']}", found))
    return states


@pytest.mark.parametrize("page", sorted(PAGES))
def test_each_steps_first_link_sets_a_state_the_step_befores_first_link_does_not(client, page):
    steps = link_states(client, page)
    repeats = [step for (_, before), (step, now) in pairwise(steps) if now[0] == before[0]]
    assert not repeats, (
        "a step's first link sets the state the step before's first link set, "
        f"so following it changes nothing: {repeats}"
    )


@pytest.mark.parametrize("page", sorted(PAGES))
def test_each_steps_first_link_sets_a_state_no_link_of_the_step_before_sets(client, page):
    steps = link_states(client, page)
    repeats = {step for (_, before), (step, now) in pairwise(steps) if now[0] in before}
    assert repeats - REPEATS_ANOTHER_LINK == set(), (
        "a step's first link sets a state a link of the step before sets, so a student who "
        f"followed that link sees nothing change: {sorted(repeats - REPEATS_ANOTHER_LINK)}"
    )
    known = {step for step in REPEATS_ANOTHER_LINK if step.split()[0] == PAGES[page].episode.code}
    assert known <= repeats, f"fixed: take {sorted(known - repeats)} off REPEATS_ANOTHER_LINK"


@pytest.mark.parametrize("page", sorted(PAGES))
def test_step_1s_first_link_sets_a_state_the_opening_page_does_not(client, page):
    """Round-10 cold reading of EP11, finding 8: EP11 step 1's first link ("Llama 3: 16,384
    GPUs") set the opening state, so its charts were byte-identical after the click. The
    student comes to step 1 from the opening state: its first link must leave it."""
    # The bare page's state: its opening where it has one (LabView.opening: EP05's GPipe).
    opening, errors, _ = validate(PAGES[page], page_items(PAGES[page], []))
    assert opening is not None, errors
    step, first = link_states(client, page)[0]
    code = PAGES[page].episode.code
    if code in OPENS_ON_THE_OPENING_STATE:
        assert first[0] == canonical(opening), f"fixed: take {code} off the list"
    else:
        assert first[0] != canonical(opening), f"{step}'s first link sets the opening state"
