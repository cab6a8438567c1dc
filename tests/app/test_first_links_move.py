"""A step's first try link changes the state: issue 36, "a try link visibly changes the diagram
its step names".

A student reads the steps in order and follows each step's first link. A first link that sets
the very state the step before's first link set changes nothing on the page (EP08 step 14 did,
commit d949c91). The states are compared as the server parses them (app/labkit/parsing.py
``validate`` and ``canonical``): every control's value, defaults included, so two links that
spell one state differently (a default written out, controls in another order) are one state.

The stricter rule, that a first link sets no state any link of the step before sets, is not
checked here yet: these first links still repeat another link of the step before (EP02 step 9,
EP04 steps 4 and 6, EP07 step 9, EP10 step 9), and EP08 step 11's two links are both step 10's,
so it needs a new state. The browser walks (tests/browser/test_changed_in_view.py) follow every
link in order, and a step's first link from the state the step before's first link set.
"""

from itertools import pairwise
from urllib.parse import parse_qsl, urlsplit

import pytest

import app.main  # noqa: F401  (registers every lab view)
from app.labkit import VIEWS
from app.labkit.parsing import canonical, validate
from tests.app.test_prose import steps_of

PAGES = {view.episode.path: view for view in VIEWS.values()}


def first_states(client, page: str) -> list[tuple[str, tuple]]:
    """(step id, canonical state of its first try link), for each step of a lesson in order."""
    view = PAGES[page]
    states = []
    for step in steps_of(client, page):
        href = step["links"][0]["href"]  # the parser unescapes attributes
        assert urlsplit(href).path == page, href
        query, errors, _ = validate(view, parse_qsl(urlsplit(href).query))
        assert query is not None, f"{page} {step['attrs']['id']}: {href}: {errors}"
        states.append((step["attrs"]["id"], canonical(query)))
    return states


@pytest.mark.parametrize("page", sorted(PAGES))
def test_each_steps_first_link_sets_a_state_the_step_befores_first_link_does_not(client, page):
    states = first_states(client, page)
    repeats = [
        f"{PAGES[page].episode.code} {step}"
        for (_, before), (step, state) in pairwise(states)
        if state == before
    ]
    assert not repeats, (
        "a step's first link sets the state the step before's first link set, "
        f"so following it changes nothing: {repeats}"
    )
