"""An in-step prediction (templates/partials/_predict.html, static/js/lab.js) in Chromium: the
why stays closed until the student commits a guess or opens it ("show me"); a committed
guess is said back, with right or not where the step names its right choice; the step's try
links are held until then; with JS off the why is a plain <details>, the commit button stays
out of the way and the try links are plain links."""

import re

import pytest
from playwright.sync_api import expect

from tests.browser.helpers import sized_page, wait_drawn


def test_committing_a_guess_opens_the_why_and_marks_the_choice(page):
    page.goto("/episodes/memory")
    # Step 1 asks a choice (round-12 reading, finding 8); step 6 a number since round 17.
    beat = page.locator("#predict-memory-1")
    why = beat.locator("details.why")
    expect(why).not_to_have_attribute("open", "")
    expect(why.locator("p").first).to_be_hidden()
    beat.locator(".predict-commit").click()  # nothing chosen: asks for a guess, stays closed
    expect(beat.locator(".predict-said")).to_contain_text("Pick one first")
    assert why.evaluate("d => d.open") is False
    expect(beat.locator(".moves .guess-first")).to_have_text("Guess first, or open the why. ")
    beat.locator("input[value='50']").check()
    beat.locator(".predict-commit").click()
    expect(beat.locator(".moves .guess-first")).to_have_count(0)
    expect(beat.locator(".predict-said")).to_contain_text("About 50×")
    expect(beat.locator(".predict-said")).to_contain_text("Not this one")
    assert why.evaluate("d => d.open") is True
    expect(beat.locator(".predict-choice.right")).to_contain_text("×")
    expect(beat.locator(".predict-choice.wrong")).to_contain_text("About 50×")


def test_a_number_guess_is_said_back_and_show_me_opens_without_one(page):
    page.goto("/episodes/memory")
    beat = page.locator("#predict-memory-2")
    beat.locator("input[name=guess]").fill("6.5")
    beat.locator("input[name=guess]").press("Enter")
    expect(beat.locator(".predict-said")).to_contain_text("Your guess: 6.5 TB")
    # Said back beside the lab's figure, with the gap (round-5 reading, EP01 item 7).
    expect(beat.locator(".predict-said")).to_contain_text("the lab: 6.49 TB (spot on)")
    # Step 1 asks a choice since round 12 (finding 8); step 4 still asks a number.
    kv = page.locator("#predict-memory-4")
    kv.locator("input[name=guess]").fill("80")
    kv.locator("input[name=guess]").press("Enter")
    expect(kv.locator(".predict-said")).to_contain_text(
        "Your guess: 80 GB; the lab: 85.9 GB (you were 7% low).")
    assert beat.locator("details.why").evaluate("d => d.open") is True
    other = page.locator("#predict-memory-5 details.why")
    other.locator("summary").click()
    assert other.evaluate("d => d.open") is True
    expect(page.locator("#predict-memory-5 .moves")).not_to_have_class("moves before-guess")


def test_without_javascript_the_why_is_a_details_and_nothing_submits(browser, live_server):
    context = browser.new_context(java_script_enabled=False, base_url=live_server)
    page = context.new_page()
    page.goto("/episodes/memory")
    beat = page.locator("#predict-memory-2")
    expect(beat.locator(".predict-commit")).to_be_hidden()
    beat.locator("input[name=guess]").fill("1100")
    beat.locator("input[name=guess]").press("Enter")  # the default button is disabled
    assert page.url.endswith("/episodes/memory")
    why = beat.locator("details.why")
    expect(why.locator("p").first).to_be_hidden()
    why.locator("summary").click()
    expect(why.locator("p").first).to_be_visible()
    # The try links are plain links: held only by lab.js, followed as ever without it.
    link = beat.locator("a.try").first
    href = link.get_attribute("href")
    link.click()
    page.wait_for_url(lambda url: url.endswith(href))
    context.close()


HELD_NOTE = "That link shows this step's answer: commit a guess above, or open the why, first."


@pytest.mark.parametrize("beat_id, label, guess", [
    ("predict-memory-4", "70B in bf16 with 32 sequences of 8k", "85"),  # a number
    ("predict-memory-6", "DeepSeek-V3 training", "total"),              # a choice
])
def test_a_steps_try_link_is_held_until_the_guess(page, live_server, beat_id, label, guess):
    """Round-6 cold readings (issue 36): a step's try links were only dimmed before the guess,
    and one click drew the answer on the bench (EP01 step 4's 85.9 GB KV cache bar). Now a
    click, or Enter, on one follows nothing: the URL, the bench, the progress tick and the
    live class are as they were; the note says why, aloud, and focus goes to the guess. The
    link stays a link, with its href. After the guess the same click follows it, redraws
    the step's diagram, ticks the step and is sent to the class."""
    # A joined student: classroom.js sends each followed try to the class (answered here).
    page.context.add_cookies([{"name": "lab-class-csrf", "value": "t", "url": live_server}])
    tries: list[str] = []

    def classroom(route):
        body = route.request.post_data or ""
        if "kind=try" in body:
            tries.append(body)
        route.fulfill(status=204 if route.request.method == "POST" else 200, body="")

    page.route("**/class/**", classroom)
    page.goto("/episodes/memory")
    wait_drawn(page)
    beat = page.locator(f"#{beat_id}")
    step_id, diagram = beat.evaluate(
        "b => [b.closest('section.step').id, b.closest('section.step').dataset.diagram]")
    link = beat.locator("a.try", has_text=label)
    chart = page.locator(f"#{diagram}")
    note = beat.locator(".moves .guess-first")
    expect(link).to_have_attribute("aria-disabled", "true")
    expect(link).to_have_attribute("href", re.compile(r"^/episodes/memory\?"))
    expect(note).to_have_attribute("aria-live", "polite")
    asked: list[str] = []
    page.on("request", lambda r: asked.append(r.url) if "/episodes/memory?" in r.url else None)
    url, state = page.url, chart.get_attribute("data-drawn")
    bench = page.locator("#bench").inner_text()
    tried = ("() => (JSON.parse(localStorage.getItem('lab-progress') || '{}').episodes || {})"
             ".memory?.steps || []")
    first_guess = beat.locator("input[name=guess]").first

    # force: Playwright will not click an aria-disabled element; a student's mouse does.
    link.click(force=True)
    expect(note).to_have_text(HELD_NOTE)
    expect(first_guess).to_be_focused()
    link.focus()  # still a focusable link; Enter is held too
    page.keyboard.press("Enter")
    expect(first_guess).to_be_focused()
    page.wait_for_load_state("networkidle")
    assert page.url == url and asked == []
    assert chart.get_attribute("data-drawn") == state
    assert page.locator("#bench").inner_text() == bench
    assert step_id not in page.evaluate(tried)
    assert tries == []

    if beat.locator("input[type=radio]").count():
        beat.locator(f"input[value='{guess}']").check()
    else:
        first_guess.fill(guess)
    beat.locator(".predict-commit").click()
    expect(note).to_have_count(0)
    expect(link).not_to_have_attribute("aria-disabled", "true")
    query = link.get_attribute("href").split("?", 1)[1]
    link.click()
    page.wait_for_url(lambda now: now.endswith(query))
    wait_drawn(page)
    assert chart.get_attribute("data-drawn") not in (None, state)
    assert page.locator("#bench").inner_text() != bench
    assert step_id in page.evaluate(tried)
    assert len(tries) == 1 and f"step={step_id}" in tries[0]


def test_a_held_click_on_a_phone_brings_the_guess_into_sight(browser, live_server):
    """At 390x844 the diagram is pinned over the top of the screen: the guess a held click
    focuses is scrolled below it, not left under it (the browser's own focus scroll would)."""
    with sized_page(browser, live_server, 390, 844, touch=True) as page:
        page.goto("/episodes/experts")
        wait_drawn(page)
        beat = page.locator("#predict-moe-4")
        beat.locator("a.try", has_text="Skew 0.5").click(force=True)
        guess = beat.locator("input[name=guess]")
        expect(guess).to_be_focused()
        expect(beat.locator(".guess-first")).to_have_text(HELD_NOTE)
        box = guess.bounding_box()
        pinned = page.locator("#bench-view").bounding_box()
        assert box and pinned and pinned["y"] + pinned["height"] <= box["y"], (box, pinned)
        assert box["y"] + box["height"] <= 844, box
