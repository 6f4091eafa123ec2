"""A local nightly index in download.pytorch.org's format, served on 127.0.0.1, for timing the
planner without the network: PEP 503 HTML, `%2B` in hrefs, metadata attributes, no `#sha256=`
on nightlies, several Pythons and platforms per version, two versions on a version-bump date.

The one writer of such pages (`anchor`, `write_page`): the test suite's stand-in indexes use it
too (a benchmark of the product must not depend on the product's tests, so it lives here).
"""

from __future__ import annotations

import hashlib
import html
import threading
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from datetime import date, timedelta
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

_PYTHONS = ("cp310", "cp311", "cp312", "cp313", "cp313t")
_PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_28_aarch64", "win_amd64")


def daily(first: date, count: int, *, skip: Collection[date] = ()) -> list[date]:
    """`count` consecutive dates from `first`, leaving out `skip` (the index's gaps)."""
    return [d for d in (first + timedelta(days=i) for i in range(count)) if d not in skip]


def write_nightly_index(
    root: Path, days: list[date], *, cuda: str, version: str, bump: tuple[date, str]
) -> None:
    """`root/whl/nightly/<cuda>/torch/index.html`: one nightly per day, `version` before `bump`'s
    day and its new version after; that day has both, as around a real version bump."""
    names = [
        f"torch-{v}.dev{day:%Y%m%d}+{cuda}-{py.rstrip('t')}-{py}-{plat}.whl"
        for day in days
        for v in _versions(day, version, bump)
        for py in _PYTHONS
        for plat in _PLATFORMS
    ]
    folder = f"/whl/nightly/{cuda}/"
    write_page(
        root / "whl" / "nightly" / cuda / "torch",
        [
            anchor(
                folder + name,
                name,
                metadata=hashlib.sha256(f"METADATA {name}".encode()).hexdigest(),
            )
            for name in names
        ],
    )


def anchor(href: str, name: str, *, sha256: str | None = None, metadata: str | None = None) -> str:
    """One link as download.pytorch.org writes it: `+` as `%2B` in the href, a `#sha256=` fragment
    when the file's hash is published (releases, not nightlies), the metadata attributes."""
    fragment = f"#sha256={sha256}" if sha256 else ""
    attrs = (
        f' data-dist-info-metadata="sha256={metadata}" data-core-metadata="sha256={metadata}"'
        if metadata
        else ""
    )
    return f'    <a href="{href.replace("+", "%2B")}{fragment}"{attrs}>{html.escape(name)}</a><br/>'


def write_page(page: Path, anchors: list[str]) -> Path:
    """`page/index.html`, a PEP 503 project page holding `anchors`; returns the file."""
    page.mkdir(parents=True, exist_ok=True)
    body = [
        "<!DOCTYPE html>",
        "<html>",
        "  <body>",
        "    <h1>Links for torch</h1>",
        *anchors,
        "  </body>",
        "</html>",
        "",
    ]
    (page / "index.html").write_text("\n".join(body), encoding="utf-8")
    return page / "index.html"


def _versions(day: date, version: str, bump: tuple[date, str]) -> list[str]:
    if day < bump[0]:
        return [version]
    return [version, bump[1]] if day == bump[0] else [bump[1]]


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass  # the benchmark's output is its numbers, not a request log


@contextmanager
def serve(directory: Path) -> Iterator[str]:
    """Serve `directory` on 127.0.0.1; yields the base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_Quiet, directory=str(directory)))
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
    )
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
