"""A cell's wheel for the venv and docker backends: where it is, its download and its hash.

`cell_wheel` is the one wheel step both backends take: the cell's local file, or a download of
its link, checked against the plan's sha256.  The download is safely named, resumable, polite:

* The local name is the link's validated wheel file name (`links.wheel_name`), in a folder of
  its own per download, so neither a hostile link nor a second process sharing the work directory
  can make one download land on another's path.
* A dropped connection resumes where it stopped with an HTTP `Range` request (a multi-GB wheel is
  not fetched from byte 0 again); a server that ignores the range sends the whole file again.
* 429 and 503 answers wait for `Retry-After` (capped at `max_wait`), other failures back off
  exponentially; both with jitter, so shards started together do not retry in step.
* On a terminal, the bytes received and the rate are shown as the download goes; the log gets
  one line with both at the end.
"""

from __future__ import annotations

import hashlib
import http.client
import shutil
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .. import retry
from ..errors import InfraError
from ..index.fetch import local_path
from ..links import wheel_name
from ..model import Cell, Channel
from .base import Watcher, note

Progress = Callable[[int, int | None, float], None]  # (bytes so far, total or None, bytes/s)
PYTORCH_INDEX = "https://download.pytorch.org/whl"
_CHUNK = 1 << 20
_RETRY_STATUS = (429, 500, 502, 503, 504)
_sleep = time.sleep  # tests replace it to see the waits without taking them


@dataclass(frozen=True, kw_only=True)
class LocalWheel:
    path: Path  # absolute
    sha256: str
    downloaded: bool  # ours: `discard(path)` once uv's cache and the venv hold it


def local_wheel(cell: Cell) -> Path | None:
    """The wheel file a cell names on this host; None for an http(s) URL."""
    return local_path(cell.url) if cell.url else None


def cell_wheel(cell: Cell, folder: Path, *, log: Path, watcher: Watcher) -> LocalWheel:
    """The cell's wheel as a file here (downloaded into `folder` when it is a link), whose
    sha256 is the plan's when the plan knows it; InfraError otherwise."""
    if not cell.url:
        raise InfraError(f"cell {cell.id} has no wheel URL to install")
    path = local_wheel(cell)
    downloaded = path is None
    if path is None:
        watcher.phase(cell, "download")
        path, sha = download(cell.url.split("#", 1)[0], folder, log=log,
                             progress=progress_of(cell, watcher))
        watcher.phase(cell, "install")
    elif path.is_file():
        sha = sha256_file(path)
    else:
        raise InfraError(f"cell {cell.id}: the wheel {path} does not exist")
    if cell.sha256 and sha != cell.sha256.lower():
        if downloaded:
            discard(path)
        raise InfraError(f"cell {cell.id}: sha256 mismatch for {path.name}: "
                         f"expected {cell.sha256}, got {sha}")
    return LocalWheel(path=path.resolve(), sha256=sha, downloaded=downloaded)


def extra_index(cell: Cell) -> str | None:
    """The index that has a nightly's or release candidate's dependencies (pytorch-triton)."""
    if cell.index_url:
        return cell.index_url
    sub = {Channel.NIGHTLY: "nightly/", Channel.TEST: "test/"}.get(cell.channel)
    if sub is None or not cell.cuda:
        return None
    return f"{PYTORCH_INDEX}/{sub}{cell.cuda}"


def download(url: str, folder: Path, *, log: Path, attempts: int = 6, max_wait: float = 120.0,
             progress: Progress | None = None) -> tuple[Path, str]:
    """Fetch the wheel at `url` into a new folder under `folder`; (its path, its sha256).

    The file only gets its final name once complete.  `discard(path)` removes it and its folder.
    """
    name = wheel_name(url)
    if name is None or not url.startswith(("http://", "https://")):
        raise InfraError(f"refusing to download {url}: a wheel link must be http(s) and end in "
                         "a wheel file name")
    own = Path(folder) / uuid.uuid4().hex
    own.mkdir(parents=True)
    try:
        return _attempts(url, own / name, log=log, attempts=attempts, max_wait=max_wait,
                         show=progress or (_terminal(name) if sys.stderr.isatty() else None))
    except BaseException:  # a refusal, the last failed attempt, Ctrl-C: leave no folder
        discard(own / name)
        raise


def _attempts(url: str, dest: Path, *, log: Path, attempts: int, max_wait: float,
              show: Progress | None) -> tuple[Path, str]:
    part, last = dest.with_name(f"{dest.name}.part"), ""
    for attempt in range(1, attempts + 1):
        try:
            size, seconds = _fetch(url, part, show)
            part.replace(dest)
            sha = sha256_file(dest)
            note(log, f"downloaded {url}: {size} bytes in {seconds:.1f} s "
                       f"({_rate(size, seconds)}), sha256 {sha}")
            return dest, sha
        except _Retry as err:
            last, told = str(err), err.retry_after
        except (OSError, http.client.HTTPException) as err:
            last, told = _describe(err), None
        if attempt < attempts:
            wait = retry.wait_before(attempt, retry_after=told, base=2.0, max_wait=max_wait)
            note(log, f"download of {url} stopped at {_size(part)} bytes ({last}); attempt "
                       f"{attempt + 1} of {attempts} in {wait:.1f} s")
            _sleep(wait)
    raise InfraError(f"download of {url} failed after {attempts} attempts ({last})")


def progress_of(cell: Cell, watcher: Watcher) -> Progress | None:
    """`download`'s progress callback for `cell`, told to `watcher`; None when the watcher does
    not listen to downloads, so that a terminal still shows them."""
    if type(watcher).download is Watcher.download:
        return None
    return lambda got, total, rate: watcher.download(cell, got, total, rate)


def discard(path: Path) -> None:
    """Remove a download and the folder `download` made for it."""
    shutil.rmtree(Path(path).parent, ignore_errors=True)


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with Path(path).open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


class _Retry(Exception):
    def __init__(self, message: str, retry_after: str | None):
        super().__init__(message)
        self.retry_after = retry_after


def _fetch(url: str, part: Path, show: Progress | None) -> tuple[int, float]:
    """Continue `part` from its current size; (total bytes, seconds this attempt)."""
    have = _size(part)
    headers = {"User-Agent": _agent(), "Accept-Encoding": "identity"}
    if have:
        headers["Range"] = f"bytes={have}-"
    start = time.monotonic()
    try:
        resp = urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=60)
    except urllib.error.HTTPError as err:
        if err.code == 416 and have:  # asked past the end: the part is already whole
            return have, 0.0
        if err.code in _RETRY_STATUS:
            raise _Retry(f"HTTP {err.code}", err.headers.get("Retry-After")) \
                from None
        raise InfraError(f"download of {url} refused: HTTP {err.code} {err.reason}") from None
    with resp:
        if have and resp.status != 206:
            have = 0  # the server ignored the range: it sends the whole file
        total = _total(resp, have)
        got = _copy(resp, part, have, total, show, start)
    if total is not None and got < total:
        raise http.client.IncompleteRead(b"", total - got)
    return got, time.monotonic() - start


def _copy(resp, part: Path, have: int, total: int | None, show: Progress | None,
          start: float) -> int:
    got, shown = have, 0.0
    with part.open("ab" if have else "wb") as fh:
        while chunk := resp.read(_CHUNK):
            fh.write(chunk)
            got += len(chunk)
            now = time.monotonic()
            if show and (now - shown > 0.5 or got == total):
                show(got, total, (got - have) / max(now - start, 1e-6))
                shown = now
    return got


def _total(resp, have: int) -> int | None:
    length = resp.headers.get("Content-Length")
    return have + int(length) if length and length.isdigit() else None


def _terminal(name: str) -> Progress:
    def show(got: int, total: int | None, rate: float) -> None:
        of = f" of {_mb(total)}" if total else ""
        end = "\n" if got == total else ""
        sys.stderr.write(f"\r{name}: {_mb(got)}{of}, {_mb(rate)}/s   {end}")
        sys.stderr.flush()
    return show


def _mb(n: float) -> str:
    return f"{n / 1e6:.1f} MB"


def _rate(size: int, seconds: float) -> str:
    return f"{_mb(size / seconds)}/s" if seconds > 0 else "cached"


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _describe(err: BaseException) -> str:
    if isinstance(err, urllib.error.URLError):
        return str(err.reason)
    return str(err) or type(err).__name__


def _agent() -> str:
    from .. import __version__

    return f"torchbisect/{__version__}"
