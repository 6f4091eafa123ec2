"""A cell's wheel for the venv and docker backends: where it is, its download and its hash.

`cell_wheel` is the one wheel step both backends take: the cell's local file, or a download of
its link, checked against the plan's sha256.  The download is safely named, resumable, polite:

* The local name is the link's validated wheel file name (`links.wheel_name`), in a folder of
  its own per download, so neither a hostile link nor a second process sharing the work directory
  can make one download land on another's path.
* The bytes come through torchbisect.net: every redirect hop passes the link policy against the
  link itself (a public link cannot lead to 169.254.169.254 or 127.0.0.1), and the reads have
  idle and total deadlines.
* A dropped connection resumes where it stopped with an HTTP `Range` request (a multi-GB wheel is
  not fetched from byte 0 again), hashing as it goes; a server that ignores the range sends the
  whole file again.
* 429 and 5xx answers wait for `Retry-After` (capped at `max_wait`), timeouts and resets back off
  exponentially; both with jitter, so shards started together do not retry in step.  What will
  not heal (a 404, a name that does not resolve, a refused connection) fails at once.
* On a terminal, the bytes received and the rate are shown as the download goes; the log gets
  one line with both at the end.
"""

from __future__ import annotations

import hashlib
import shutil
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from ..errors import InfraError
from ..index.fetch import PYTORCH_INDEX, local_path
from ..model import Cell, Channel
from ..net import WHEEL, Deadlines, NetError, Refused, Retries, resumable
from ..net import credentials as userinfo
from ..net.links import wheel_name
from ..utils import files
from ..utils.words import megabytes
from .base import Watcher, note

Progress = Callable[[int, int | None, float], None]  # (bytes so far, total or None, bytes/s)
_CHUNK = 1 << 20


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
        path, sha = download(
            cell.url.split("#", 1)[0], folder, log=log, progress=progress_of(cell, watcher)
        )
        watcher.phase(cell, "install")
    elif path.is_file():
        sha = sha256_file(path)
    else:
        raise InfraError(f"cell {cell.id}: the wheel {path} does not exist")
    if cell.sha256 and sha != cell.sha256.lower():
        if downloaded:
            discard(path)
        raise InfraError(
            f"cell {cell.id}: sha256 mismatch for {path.name}: expected {cell.sha256}, got {sha}"
        )
    return LocalWheel(path=path.resolve(), sha256=sha, downloaded=downloaded)


def extra_index(cell: Cell, *, credentials: bool = True) -> str | None:
    """The index that has a nightly's or release candidate's dependencies (pytorch-triton), with
    the credentials matrix.yaml gave for its origin unless `credentials` is False: uv reads
    them only from the URL (its command line is masked wherever it is logged or said)."""
    if cell.index_url:
        return userinfo.restore(cell.index_url) if credentials else cell.index_url
    sub = {Channel.NIGHTLY: "nightly/", Channel.TEST: "test/"}.get(cell.channel)
    if sub is None or not cell.cuda:
        return None
    return f"{PYTORCH_INDEX}{sub}{cell.cuda}"


def download(
    url: str,
    folder: Path,
    *,
    log: Path,
    attempts: int = 6,
    max_wait: float = 120.0,
    progress: Progress | None = None,
    deadlines: Deadlines = WHEEL,
) -> tuple[Path, str]:
    """Fetch the wheel at `url` into a new folder under `folder`; (its path, its sha256).

    The file only gets its final name once complete.  `discard(path)` removes it and its folder.
    """
    url = userinfo.remember(url)  # `user:password@` becomes Basic auth, never a sentence
    name = wheel_name(url)
    if name is None or not url.startswith(("http://", "https://")):
        raise InfraError(
            f"refusing to download {url}: a wheel link must be http(s) and end in a wheel file name"
        )
    own = Path(folder) / uuid.uuid4().hex
    own.mkdir(parents=True)
    try:
        return _attempts(
            url,
            own / name,
            log=log,
            attempts=attempts,
            max_wait=max_wait,
            show=progress or (_terminal(name) if sys.stderr.isatty() else None),
            deadlines=deadlines,
        )
    except BaseException:  # a refusal, the last failed attempt, Ctrl-C: leave no folder
        discard(own / name)
        raise


def _attempts(
    url: str,
    dest: Path,
    *,
    log: Path,
    attempts: int,
    max_wait: float,
    show: Progress | None,
    deadlines: Deadlines,
) -> tuple[Path, str]:
    part = _Part(dest.with_name(f"{dest.name}.part"))
    start, shown = time.monotonic(), [0.0]

    def progress(got: int, total: int | None) -> None:
        now = time.monotonic()
        if show and (now - shown[0] > 0.5 or got == total):
            show(got, total, got / max(now - start, 1e-6))
            shown[0] = now

    def told(err: NetError, attempt: int, wait: float) -> None:
        note(
            log,
            f"download of {url} stopped at {part.have} bytes ({err}); attempt "
            f"{attempt + 1} of {attempts} in {wait:.1f} s",
        )

    try:
        with part:
            resumable.fetch(
                url,
                part,
                progress=progress,
                on_retry=told,
                deadlines=deadlines,
                retries=Retries(attempts=attempts, base=2.0, max_wait=max_wait),
            )
    except NetError as err:
        if isinstance(err, Refused):
            raise InfraError(f"download of {url} not done: {err}") from None
        if err.status is not None and not err.transient:
            raise InfraError(f"download of {url} refused: {err}") from None
        tries = f"after {err.attempts} attempts " if err.attempts > 1 else ""
        raise InfraError(f"download of {url} failed {tries}({err})") from None
    part.path.replace(dest)
    seconds = time.monotonic() - start
    note(
        log,
        f"downloaded {url}: {part.have} bytes in {seconds:.1f} s "
        f"({_rate(part.have, seconds)}), sha256 {part.sha256}",
    )
    return dest, part.sha256


class _Part(resumable.Sink):
    """The `.part` file a download grows, hashed as it is written."""

    _file: IO[bytes]  # open between __enter__ and __exit__

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path

    def __enter__(self) -> _Part:
        self._file = files.open_new(self.path)  # never through a link planted in downloads/
        return self

    def __exit__(self, *exc: object) -> None:
        self._file.close()

    def write(self, data: bytes) -> None:
        self._file.write(data)
        super().write(data)

    def restart(self) -> None:
        self._file.seek(0)
        self._file.truncate()
        super().restart()


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


def _terminal(name: str) -> Progress:
    def show(got: int, total: int | None, rate: float) -> None:
        of = f" of {megabytes(total)}" if total else ""
        end = "\n" if got == total else ""
        sys.stderr.write(f"\r{name}: {megabytes(got)}{of}, {megabytes(rate)}/s   {end}")
        sys.stderr.flush()

    return show


def _rate(size: int, seconds: float) -> str:
    return f"{megabytes(size / seconds)}/s" if seconds > 0 else "cached"
