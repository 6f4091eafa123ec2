"""Test helpers: serve a folder over HTTP on 127.0.0.1, and write PyTorch-format wheel indexes.

`serve(directory)` is a context manager yielding the base URL (a str that also records the paths
requested, in `.hits`).  A folder holding `index.json` next to `index.html` answers PEP 691 JSON
to clients that ask for it.  `fail_first` / `fail_always` answer 503 to test retries;
`truncate_first` cuts bodies short (the Content-Length promises more): a partial page is an error.
`ranges=True` answers a file's single-range `Range` (`bytes=A-B`, `bytes=A-`, `bytes=-N`) with
206 as a CDN does; without it a `Range` is ignored (200, the whole file), as `http.server` does.
`.sent` counts the bytes of files sent, `.ranges` lists the `Range` headers asked.

`make_release_index` and `make_nightly_index` write pages shaped like download.pytorch.org's
through the package's one page writer (torchbisect.bench.nightly_index: `%2B` in hrefs,
data-dist-info-metadata / data-core-metadata, `#sha256=` on releases but not on nightlies), with
several Pythons and platforms per version, and PEP 691 JSON beside them when asked.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import date
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from torchbisect.bench.nightly_index import anchor, write_page

PYTHONS = ("cp310", "cp311", "cp312", "cp313", "cp313t")
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_28_aarch64", "win_amd64")
PEP691 = "application/vnd.pypi.simple.v1+json"


class Served(str):
    """The base URL; `.hits` lists the request paths in order."""

    hits: list[str]
    ranges: list[str]
    sent: list[int]


@contextmanager
def serve(
    directory: str | Path,
    *,
    fail_first: int = 0,
    fail_always: bool = False,
    truncate_first: int = 0,
    ranges: bool = False,
) -> Iterator[Served]:
    state = {"failures": fail_first, "truncations": truncate_first}
    hits: list[str] = []
    asked: list[str] = []
    sent = [0]

    class Handler(SimpleHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            hits.append(self.path)
            if fail_always or state["failures"] > 0:
                state["failures"] -= 1
                self.send_error(503, "Service Unavailable")
                return
            page = Path(self.translate_path(self.path))
            if (
                page.is_dir()
                and self.path.endswith("/")
                and (page / "index.json").is_file()
                and PEP691 in self.headers.get("Accept", "")
            ):
                self._send((page / "index.json").read_bytes(), PEP691)
                return
            if page.is_dir() and self.path.endswith("/") and (page / "index.html").is_file():
                self._send((page / "index.html").read_bytes(), "text/html")
                return
            if "Range" in self.headers:
                asked.append(self.headers["Range"])
            if ranges and page.is_file() and "Range" in self.headers:
                self._range(page.read_bytes(), self.headers["Range"])
                return
            if page.is_file():
                sent[0] += page.stat().st_size
            super().do_GET()

        def _range(self, body: bytes, wanted: str) -> None:
            first, _, last = wanted.removeprefix("bytes=").partition("-")
            start = max(len(body) - int(last), 0) if not first else int(first)
            end = len(body) - 1 if not first or not last else min(int(last), len(body) - 1)
            if start >= len(body):
                self.send_error(416, "Range Not Satisfiable")
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{end}/{len(body)}")
            self.send_header("Content-Length", str(end + 1 - start))
            self.end_headers()
            self.wfile.write(body[start : end + 1])
            sent[0] += end + 1 - start

        def _send(self, body: bytes, content_type: str) -> None:
            cut = state["truncations"] > 0
            state["truncations"] -= 1
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body[: len(body) // 2] if cut else body)
            if cut:
                self.close_connection = True

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(Handler, directory=str(directory)))
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
    )
    thread.start()
    try:
        url = Served(f"http://127.0.0.1:{server.server_address[1]}")
        url.hits, url.ranges, url.sent = hits, asked, sent
        yield url
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def fake_wheel(filename: str) -> bytes:
    """The bytes of a stand-in wheel: small, and different for every file name."""
    return f"not really a wheel: {filename}\n".encode()


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def make_release_index(
    root: Path,
    versions: dict[str, Iterable[str]],
    *,
    channel: str = "",
    pythons: Iterable[str] = PYTHONS,
    platforms: Iterable[str] = PLATFORMS,
    with_sha: bool = True,
    write_wheels: bool = False,
    json_too: bool = False,
) -> Path:
    """`root/whl/[channel/]<tag>/torch/index.html` for each tag → versions; returns `root/whl`."""
    for tag, tag_versions in versions.items():
        folder = f"{channel}/{tag}" if channel else tag
        names = [
            _name(f"{v}+{tag}", py, plat)
            for v in tag_versions
            for py in pythons
            for plat in platforms
            if _exists(v, py)
        ]
        _write_page(
            root, folder, names, with_sha=with_sha, write_wheels=write_wheels, json_too=json_too
        )
    return root / "whl"


def make_nightly_index(
    root: Path,
    dates: Iterable[date],
    *,
    cuda: str = "cu130",
    version: str = "2.17.0",
    bump: tuple[date, str] | None = None,
    pythons: Iterable[str] = PYTHONS,
    platforms: Iterable[str] = PLATFORMS,
    write_wheels: bool = False,
    json_too: bool = False,
) -> Path:
    """`root/whl/nightly/<cuda>/torch/index.html` with one nightly per date (two on `bump`'s date).

    `bump = (day, new_version)`: from `day` on, nightlies carry `new_version`; `day` itself has
    both, as happens around a version bump.  Returns `root/whl/nightly`.
    """
    names = []
    for day in dates:
        stamps = (
            [version]
            if bump is None or day < bump[0]
            else ([version, bump[1]] if day == bump[0] else [bump[1]])
        )
        for v in stamps:
            names += [
                _name(f"{v}.dev{day:%Y%m%d}+{cuda}", py, plat)
                for py in pythons
                for plat in platforms
            ]
    _write_page(
        root, f"nightly/{cuda}", names, with_sha=False, write_wheels=write_wheels, json_too=json_too
    )
    return root / "whl" / "nightly"


def _exists(version: str, python: str) -> bool:
    return python != "cp313t" or tuple(int(p) for p in version.split(".")[:2]) >= (2, 6)


def _name(version: str, python: str, platform: str) -> str:
    abi = python
    python = python.rstrip("t")
    return f"torch-{version}-{python}-{abi}-{platform}.whl"


def _write_page(
    root: Path, folder: str, names: list[str], *, with_sha: bool, write_wheels: bool, json_too: bool
) -> None:
    page = root / "whl" / folder / "torch"
    links, files = [], []
    for name in names:
        href = f"/whl/{folder}/{name}"
        data = fake_wheel(name)
        meta = sha256(b"METADATA " + data)
        links.append(anchor(href, name, sha256=sha256(data) if with_sha else None, metadata=meta))
        files.append(
            {
                "filename": name,
                "url": href.replace("+", "%2B"),
                "hashes": {"sha256": sha256(data)} if with_sha else {},
                "core-metadata": {"sha256": meta},
                "dist-info-metadata": {"sha256": meta},
            }
        )
        if write_wheels:
            (root / "whl" / folder).mkdir(parents=True, exist_ok=True)
            (root / "whl" / folder / name).write_bytes(data)
    write_page(page, links)
    if json_too:
        doc = {"meta": {"api-version": "1.1"}, "name": "torch", "files": files}
        (page / "index.json").write_text(json.dumps(doc, indent=1), encoding="utf-8")
