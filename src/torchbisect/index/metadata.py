"""The core metadata of a wheel on an index, read as pip reads it, and said where it came from.

First the file the index serves beside the wheel (PEP 658/714, `<wheel URL>.metadata`): believed
only when the page declares no hash for it (`data-core-metadata` / `data-dist-info-metadata`,
PEP 691 `core-metadata`) or its sha256 is the one declared, as pip checks it.  When that file is
not served, not read, or not believed, the wheel's own `*.dist-info/METADATA` is read from the
wheel itself, as pip's lazy wheel does: the zip's end and central directory, then the one member,
asked for with HTTP range requests through the one client (a seekable file over ranges, read by
the stdlib's `zipfile`; nothing else is downloaded).  A server that ignores `Range` answers 200
with the whole wheel: it is then spooled to a temporary file, bounded by WHOLE_LIMIT, and read
there.  A local wheel (a folder index) is read in place.

`read(url)` gives a `Found`: the text (or None) and, in words, where it came from and what was
not there or not believed on the way — so that nobody says "its metadata pins no CUDA" of a
metadata that was never read.
"""

from __future__ import annotations

import hashlib
import io
import re
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING

from ..net import PAGE, WHEEL, NetError, Retries, links, request, retry
from ..utils.words import megabytes

if TYPE_CHECKING:
    from ..net.client import Answer

METADATA_LIMIT = 4 * 2**20  # torch's METADATA is ~31 KB, its description included
# Bytes a wheel's ranged reads may ask for in all: the end of the zip, its central directory
# (torch's ~15,000 members make ~2 MB) and the METADATA member.
RANGED_LIMIT = 64 * 2**20
# A whole wheel spooled to disk when the server ignores Range: torch's largest (cu118) is 2.3 GB.
WHOLE_LIMIT = 5 * 2**30
_TAIL = 256 * 2**10  # the first ask: the zip's end, and a small wheel's central directory
_CHUNK = 256 * 2**10  # the least a later ask takes, so that zipfile's small reads cost one each
_ASKS = 32  # ranged requests a wheel may take
_RETRIES = Retries(attempts=3, base=0.5)
_CONTENT_RANGE = re.compile(r"^bytes (\d+)-(\d+)/(\d+)$")

SIDE_FILE = "the .metadata file the index serves beside it"


@dataclass(frozen=True, kw_only=True)
class Found:
    """A wheel's METADATA as far as it could be read.

    `text` is None when none could be believed; `source` then says why, else where the text
    came from ("the .metadata file the index serves beside it", "the wheel's own METADATA, with
    range requests").  `doubts` are the side files not there or not believed on the way,
    each a phrase ("the index serves no .metadata for it (HTTP 404 Not Found)")."""

    text: str | None
    source: str
    doubts: tuple[str, ...] = ()

    @property
    def story(self) -> str:
        """What happened, in one phrase: the doubts, then the source."""
        return "; ".join((*self.doubts, self.source))


class Unreadable(Exception):
    """The wheel's own METADATA could not be read; `str()` is a phrase saying why."""


def read(url: str, *, metadata_sha256: str | None = None, whole: bool = True) -> Found:
    """The METADATA of the wheel at `url` (see the module docstring); `metadata_sha256` is the
    hash its page declares for the served file, None when it declares none.  `whole`: whether
    a server that ignores Range may cost the whole wheel's download (said on stderr)."""
    from .fetch import local_path  # fetch.py lists pages; this reads one file beside a wheel

    path = local_path(url)
    doubts: list[str] = []
    side = _side_file(url, metadata_sha256, path, doubts)
    if side is not None:
        return Found(text=side, source=SIDE_FILE)
    try:
        text, source = _own(url, path, whole)
    except Unreadable as err:
        return Found(
            text=None, source=f"the wheel itself could not be read ({err})", doubts=tuple(doubts)
        )
    return Found(text=text, source=source, doubts=tuple(doubts))


def read_metadata(url: str) -> str | None:
    """The METADATA text of the wheel at `url`, or None when none could be read; never at the
    cost of downloading the whole wheel (what plan/deps.py learns is advice)."""
    return read(url, whole=False).text


def _side_file(url: str, declared: str | None, path: Path | None, doubts: list[str]) -> str | None:
    """The served `.metadata`, when it is there and believed; else None, with why in `doubts`."""
    try:
        if path is not None:
            beside = path.with_name(path.name + ".metadata")
            if not beside.is_file():
                return None  # a folder of wheels: the wheel's own METADATA is the usual source
            if beside.stat().st_size > METADATA_LIMIT:
                doubts.append(f"its .metadata is over the bound of {megabytes(METADATA_LIMIT)}")
                return None
            body = beside.read_bytes()
        else:
            with request("GET", url.split("#", 1)[0] + ".metadata", deadlines=PAGE) as answer:
                body = answer.read(METADATA_LIMIT, "its .metadata")
    except NetError as err:
        doubts.append(
            f"the index serves no .metadata for it ({err})"
            if err.status == 404
            else f"its .metadata was not read ({err})"
        )
        return None
    except OSError as err:
        doubts.append(f"its .metadata was not read ({err.strerror or err})")
        return None
    if declared and hashlib.sha256(body).hexdigest() != declared:
        doubts.append(
            "the .metadata the index serves does not match the sha256 its page "
            "declares for it (data-core-metadata), so it is not believed"
        )
        return None
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        doubts.append("the .metadata the index serves is not UTF-8 text")
        return None


def _own(url: str, path: Path | None, whole: bool) -> tuple[str, str]:
    """The wheel's `*.dist-info/METADATA` and where it was read; Unreadable when it cannot be."""
    if path is not None:
        try:
            with path.open("rb") as fh:
                return _member(fh), "the wheel's own METADATA"
        except OSError as err:
            raise Unreadable(err.strerror or str(err)) from None
    with _opened(url.split("#", 1)[0], whole) as (fh, how):
        return _member(fh), f"the wheel's own METADATA, {how}"


def _member(fh: IO[bytes] | _Ranged) -> str:
    """The one `<name>.dist-info/METADATA` of the zip in `fh`, within METADATA_LIMIT."""
    try:
        with zipfile.ZipFile(fh) as archive:
            names = [
                i
                for i in archive.infolist()
                if i.filename.count("/") == 1 and i.filename.endswith(".dist-info/METADATA")
            ]
            if len(names) != 1:
                raise Unreadable(f"it holds {len(names)} *.dist-info/METADATA files, not one")
            if names[0].file_size > METADATA_LIMIT:
                raise Unreadable(f"its METADATA is over the bound of {megabytes(METADATA_LIMIT)}")
            with archive.open(names[0]) as member:
                body = member.read(METADATA_LIMIT + 1)[:METADATA_LIMIT]
    except (
        zipfile.BadZipFile,
        zipfile.LargeZipFile,
        NotImplementedError,
        EOFError,
        ValueError,
    ) as err:
        raise Unreadable(f"it is not a readable zip archive: {err}") from None
    except _Stop as err:
        raise Unreadable(str(err)) from None
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        raise Unreadable("its METADATA is not UTF-8 text") from None


class _Stop(Exception):
    """A ranged read that may not go on (a bound, a failed request); raised through zipfile
    (not an OSError, which zipfile turns into "File is not a zip file")."""


@contextmanager
def _opened(url: str, whole: bool) -> Iterator[tuple[IO[bytes] | _Ranged, str]]:
    """The remote wheel as a seekable file: over range requests when the server honours them,
    else spooled whole (bounded); with how it was read, in words."""
    with tempfile.TemporaryFile(prefix="torchbisect-wheel-") as spool:
        try:
            ranged, size = retry.attempt(lambda: _first(url, whole, spool), _RETRIES)
        except NetError as err:
            raise Unreadable(f"asking for it failed: {err}") from None
        except OSError as err:  # the disk the spool is on
            raise Unreadable(
                f"the whole wheel could not be kept on disk to be read ({err.strerror or err})"
            ) from None
        if ranged is not None:
            yield ranged, "with range requests"
        else:
            yield (
                spool,
                (
                    f"in the whole wheel ({megabytes(size)}), downloaded because the "
                    "server ignores range requests"
                ),
            )


def _first(url: str, whole: bool, spool: IO[bytes]) -> tuple[_Ranged | None, int]:
    """The first ask, for the end of the wheel: a ranged file over it (206), or, from a server
    that ignores Range (200), the whole wheel in `spool` and its size."""
    spool.seek(0)
    spool.truncate()
    headers = {"Range": f"bytes=-{_TAIL}", "Accept-Encoding": "identity"}
    with request("GET", url, headers=headers, deadlines=WHEEL, decode=False) as answer:
        if answer.status == 206:
            tail_at, total = _content_range(answer.headers.get("content-range", ""))
            tail = answer.read(_TAIL, "the end of the wheel")
            if tail_at + len(tail) != total:
                raise Unreadable("it answered a range request for its end with other bytes")
            return _Ranged(url, total, tail_at, tail), 0
        if not whole:
            raise Unreadable("the server ignores range requests")
        return None, _spool(answer, spool, url)


def _content_range(value: str) -> tuple[int, int]:
    """(first byte, total size) of a 206's Content-Range; Unreadable when it says neither."""
    match = _CONTENT_RANGE.match(value.strip())
    if not match or int(match[1]) > int(match[2]) or int(match[2]) >= int(match[3]):
        raise Unreadable(f"it answered a range request with Content-Range {value[:80]!r}")
    return int(match[1]), int(match[3])


def _spool(answer: Answer, spool: IO[bytes], url: str) -> int:
    """The whole body of `answer` into `spool`, within WHOLE_LIMIT; its size."""
    declared = answer.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > WHOLE_LIMIT:
        raise Unreadable(
            f"the server ignores range requests and the whole wheel is "
            f"{megabytes(int(declared))}, over the bound of {megabytes(WHOLE_LIMIT)}"
        )
    told = f" ({megabytes(int(declared))})" if declared.isdigit() else ""
    print(
        f"note: {links.host_of(url) or url} ignores range requests: downloading the whole "
        f"wheel{told} to read its METADATA ({url})",
        file=sys.stderr,
        flush=True,
    )
    size = 0
    for chunk in answer.chunks():
        size += len(chunk)
        if size > WHOLE_LIMIT:
            raise Unreadable(
                f"the server ignores range requests and the whole wheel is over the "
                f"bound of {megabytes(WHOLE_LIMIT)}"
            )
        spool.write(chunk)
    spool.seek(0)
    return size


class _Ranged(io.RawIOBase):
    """A remote file of `size` bytes, read by asking for the ranges `zipfile` reads (at least
    _CHUNK each), each kept; at most RANGED_LIMIT bytes in _ASKS requests in all."""

    def __init__(self, url: str, size: int, tail_at: int, tail: bytes):
        super().__init__()
        self.url, self.size, self.pos = url, size, 0
        self.kept: list[tuple[int, bytes]] = [(tail_at, tail)]
        self.asked, self.asks = len(tail), 1

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.pos, io.SEEK_END: self.size}[whence]
        if base + offset < 0:
            raise ValueError("negative seek position")
        self.pos = base + offset
        return self.pos

    def readinto(self, buffer: memoryview | bytearray) -> int:  # type: ignore[override]
        want = min(len(buffer), self.size - self.pos)
        if want <= 0:
            return 0
        start, data = self._holding(self.pos, want)
        got = data[self.pos - start : self.pos - start + want]
        buffer[: len(got)] = got
        self.pos += len(got)
        return len(got)

    def _holding(self, first: int, want: int) -> tuple[int, bytes]:
        for start, data in self.kept:
            if start <= first and first + want <= start + len(data):
                return start, data
        end = min(self.size, first + max(want, _CHUNK))
        data = self._ask(first, end)
        self.kept.append((first, data))
        return first, data

    def _ask(self, first: int, end: int) -> bytes:
        self.asks += 1
        self.asked += end - first
        if self.asked > RANGED_LIMIT or self.asks > _ASKS:
            raise _Stop(
                f"reading its METADATA would take more than {_ASKS} range requests or "
                f"{megabytes(RANGED_LIMIT)}"
            )
        try:
            return retry.attempt(lambda: self._range(first, end), _RETRIES)
        except NetError as err:
            raise _Stop(f"a range request failed: {err}") from None

    def _range(self, first: int, end: int) -> bytes:
        headers = {"Range": f"bytes={first}-{end - 1}", "Accept-Encoding": "identity"}
        with request("GET", self.url, headers=headers, deadlines=PAGE, decode=False) as answer:
            if answer.status != 206:
                raise NetError(
                    f"it answered a range request with HTTP {answer.status}", transient=False
                )
            start, total = _content_range(answer.headers.get("content-range", ""))
            if start != first or total != self.size:
                raise NetError(
                    "it answered a range request with other bytes than asked "
                    f"(Content-Range {answer.headers.get('content-range', '')[:80]!r})",
                    transient=False,
                )
            data = answer.read(end - first, "a range of the wheel")
        if len(data) != end - first:
            raise NetError(
                f"a range request gave {len(data)} bytes, not {end - first}", transient=True
            )
        return data
