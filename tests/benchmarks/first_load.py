"""First load of every lesson on the wire: the page and every file it loads, as Chromium asks.

Run: ``python tests/benchmarks/first_load.py [--encoding "gzip, deflate, br, zstd"]`` (the
app in-process, no server). For each episode page it fetches the HTML, then every script and
stylesheet the page names (``src=``/``href=`` under /static/), each with the browser's
Accept-Encoding, and counts the bytes a browser receives: the body as sent (compressed) plus
the status line and headers. Prints one line per lesson, the largest file of each, and
whether every lesson is within the budget (``--budget``, bytes; the issue's 350 kB).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

CHROME = "gzip, deflate, br, zstd"
BUDGET = 350_000


def first_load(client, path: str, encoding: str) -> tuple[int, list[tuple[str, int, str]]]:
    """Total bytes, and (url, bytes, content-encoding) per file, for one page's first load."""
    headers = {"Accept-Encoding": encoding}
    html = client.get(path, headers={"Accept-Encoding": "identity"}).text
    refs = [path, *dict.fromkeys(re.findall(r'(?:src|href)="(/static/[^"]+)"', html))]
    files = [(ref, *sent(client, ref, headers)) for ref in refs]
    return sum(size for _, size, _ in files), files


def sent(client, url: str, headers: dict) -> tuple[int, str]:
    """Bytes on the wire (status line, headers, body as sent) and the body's coding. Read
    undecoded: httpx would decode the body (and cannot decode brotli without a package)."""
    with client.stream("GET", url, headers=headers) as response:
        assert response.status_code == 200, (url, response.status_code)
        body = b"".join(response.iter_raw())
        head = len(f"HTTP/1.1 {response.status_code} {response.reason_phrase}\r\n")
        head += sum(len(k) + len(v) + 4 for k, v in response.headers.raw) + 2
        return head + len(body), response.headers.get("content-encoding", "")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--encoding", default=CHROME, help="Accept-Encoding sent")
    parser.add_argument("--budget", type=int, default=BUDGET, help="bytes per lesson")
    args = parser.parse_args()

    from fastapi.testclient import TestClient

    from app.episodes import EPISODES
    from app.main import app

    app.state.render_processes = 0
    worst = 0
    with TestClient(app) as client:
        for episode in EPISODES:
            total, files = first_load(client, episode.path, args.encoding)
            worst = max(worst, total)
            big = max(files, key=lambda f: f[1])
            page = files[0]
            print(f"{episode.code} {episode.path:32s} {total / 1000:7.1f} kB"
                  f"  (page {page[1] / 1000:.1f} kB {page[2] or 'identity'};"
                  f" largest {big[0].split('?')[0]} {big[1] / 1000:.1f} kB {big[2] or 'identity'})")
    verdict = "PASS" if worst <= args.budget else "FAIL"
    print(f"{verdict}: the heaviest first load is {worst / 1000:.1f} kB"
          f" (budget {args.budget / 1000:.0f} kB)")
    return 0 if worst <= args.budget else 1


if __name__ == "__main__":
    sys.exit(main())
