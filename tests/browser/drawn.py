"""Waiting for lab.js: every figure in the page drawn for the state its diagram shows."""

DRAWN = """() => {
    const scripts = [...document.querySelectorAll('script.figure[data-target]')];
    return scripts.length > 0 && scripts.every(s => {
        const chart = document.getElementById(s.dataset.target);
        return chart && chart.data && chart.dataset.drawn === s.dataset.state;
    });
}"""


def wait_drawn(page) -> None:
    page.wait_for_function(DRAWN)
