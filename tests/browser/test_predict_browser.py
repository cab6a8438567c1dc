"""An in-step prediction (templates/partials/_predict.html, static/js/lab.js) in Chromium: the
why stays closed until the student commits a guess or opens it ("show me"); a committed
guess is said back, with right or not where the step names its right choice; with JS off
the why is a plain <details> and the commit button stays out of the way."""

from playwright.sync_api import expect


def test_committing_a_guess_opens_the_why_and_marks_the_choice(page):
    page.goto("/episodes/memory")
    beat = page.locator("#predict-memory-6")  # step 3 now asks a number (round-5 reading)
    why = beat.locator("details.why")
    expect(why).not_to_have_attribute("open", "")
    expect(why.locator("p").first).to_be_hidden()
    beat.locator(".predict-commit").click()  # nothing chosen: asks for a guess, stays closed
    expect(beat.locator(".predict-said")).to_contain_text("Pick one first")
    assert why.evaluate("d => d.open") is False
    expect(beat.locator(".moves .guess-first")).to_have_text("Guess first, or open the why. ")
    beat.locator("input[value='active']").check()
    beat.locator(".predict-commit").click()
    expect(beat.locator(".moves .guess-first")).to_have_count(0)
    expect(beat.locator(".predict-said")).to_contain_text("the active parameters")
    expect(beat.locator(".predict-said")).to_contain_text("Not this one")
    assert why.evaluate("d => d.open") is True
    expect(beat.locator(".predict-choice.right")).to_contain_text("every expert")
    expect(beat.locator(".predict-choice.wrong")).to_contain_text("the active parameters")


def test_a_number_guess_is_said_back_and_show_me_opens_without_one(page):
    page.goto("/episodes/memory")
    beat = page.locator("#predict-memory-2")
    beat.locator("input[name=guess]").fill("6.5")
    beat.locator("input[name=guess]").press("Enter")
    expect(beat.locator(".predict-said")).to_contain_text("Your guess: 6.5 TB")
    # Said back beside the lab's figure, with the gap (round-5 reading, EP01 item 7).
    expect(beat.locator(".predict-said")).to_contain_text("the lab: 6.49 TB (spot on)")
    first = page.locator("#predict-memory-1")
    first.locator("input[name=guess]").fill("8")
    first.locator("input[name=guess]").press("Enter")
    expect(first.locator(".predict-said")).to_contain_text(
        "Your guess: 8 ×; the lab: 9.3× (you were 14% low).")
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
    context.close()
