"""Browser-test helpers: wait for lab.js to draw, and read a state's JSON twin."""

import json
import urllib.request

DRAWN = """() => {
    const scripts = [...document.querySelectorAll('script.figure[data-target]')];
    return scripts.length > 0 && scripts.every(s => {
        const chart = document.getElementById(s.dataset.target);
        return chart && chart.data && chart.dataset.drawn === s.dataset.state;
    });
}"""


def wait_drawn(page) -> None:
    page.wait_for_function(DRAWN)


def api_json(live_server: str, name: str, query: str = "") -> dict:
    """The lab's JSON twin of a state, from the live server."""
    with urllib.request.urlopen(f"{live_server}/api/{name}?{query}") as response:
        return json.load(response)
