"""Wheel indexes: PEP 503 HTML / PEP 691 JSON pages or a folder of wheels, read into `Wheel`s.

This module owns the network side of resolution: one request per page with retries and backoff,
one clear error naming the URL when the index does not answer, and the rule that a partial or
garbled answer is an error — never "this version does not exist".  Choosing which wheel a cell
gets is `resolve`'s job; this module only lists.  What a page says (`Wheel`, the HTML, JSON and
folder readers) is pages.py's; which wheels install here is tags.py's.
"""

from __future__ import annotations

import hashlib
import http.client
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Collection, Iterable
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import url2pathname

from packaging.utils import canonicalize_name

from .. import links, retry
from ..errors import IndexUnreachable, ResolveError
from .pages import Garbled, PageMissing, Wheel, parse_page, read_folder

PYTORCH_INDEX = "https://download.pytorch.org/whl/"
_ACCEPT = ("application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, "
           "text/html;q=0.1")
_MISSING_STATUS = (403, 404, 410)  # download.pytorch.org answers 403 for a folder that is not there
_sleep = time.sleep  # tests replace it to keep retries instant


def default_index(channel: str, cuda: str) -> str:
    """PyTorch's index for a channel and CUDA tag; the package page is `<index>torch/`."""
    channel = getattr(channel, "value", channel)
    prefix = {"stable": "", "test": "test/", "nightly": "nightly/"}.get(channel)
    if prefix is None:
        raise ValueError(f"channel {channel!r} has no PyTorch index")
    return f"{PYTORCH_INDEX}{prefix}{cuda}/"


def fetch_wheels(index_url: str, package: str = "torch", *, retries: int = 4,
                 backoff: float = 0.5, timeout: float = 60.0) -> list[Wheel]:
    """Every wheel of `package` that the index lists, in page order.

    `index_url` is a simple-index root (`…/whl/cu130/`), a `file://` URL or a local folder — either
    a static simple index (`<folder>/<package>/index.html`) or a flat folder of wheels.
    Raises PageMissing when the index has no page for the package, IndexUnreachable when it does
    not answer (or answers garbage) `retries` more times.
    """
    folder = local_path(index_url)
    if folder is not None:
        return read_folder(folder, package)
    page = index_url.rstrip("/") + "/" + canonicalize_name(package) + "/"
    last, told = "", None
    for attempt in range(retries + 1):
        if attempt:  # a 429/503's Retry-After when given (capped), else backoff; jittered
            delay = retry.wait_before(attempt, retry_after=told, base=backoff, max_wait=60.0)
            # No silent waits: a run that stalls on an unreachable index says so, and until when.
            print(f"note: {page} did not answer ({last}); try {attempt + 1} of {retries + 1} "
                  f"in {delay:.1f} s", file=sys.stderr, flush=True)
            _sleep(delay)
        try:
            body, content_type, final_url = _get(page, timeout)
            return parse_page(body, content_type, final_url, package)
        except (OSError, http.client.HTTPException, Garbled) as err:
            last = _describe(err)
            told = err.headers.get("Retry-After") if isinstance(
                err, urllib.error.HTTPError) and err.headers else None
    raise IndexUnreachable(f"the wheel index {page} did not give a usable answer after "
                           f"{retries + 1} attempts ({last}); check the network")


def reachable(wheels: Iterable[Wheel], index_url: str, *, allow: Collection[str] = (),
              note: Callable[[str], None] | None = None) -> tuple[Wheel, ...]:
    """The wheels whose link an index at `index_url` may send a cell to (see `links.allowed`)."""
    kept, refused = [], []
    for wheel in wheels:
        (kept if links.allowed(wheel.url, index_url, allow) else refused).append(wheel)
    if refused and note:
        note(f"ignored {len(refused)} link(s): {links.refusal(refused[0].url, index_url)}")
    return tuple(kept)


def sha256_of(url_or_path: str, *, retries: int = 4, backoff: float = 0.5) -> str:
    """The sha256 of a wheel, streamed from its URL (with retries) or read from disk."""
    path = local_path(url_or_path)
    if path is not None:
        try:
            with path.open("rb") as fh:
                return _digest(fh)
        except OSError as err:
            raise ResolveError(f"cannot read the wheel {path}: {err.strerror}") from None
    digest, last, told = _Resumable(), "", None
    for attempt in range(retries + 1):
        if attempt:  # a dropped connection goes on from the byte it stopped at (Range)
            _sleep(retry.wait_before(attempt, retry_after=told, base=backoff, max_wait=60.0))
        try:
            return digest.fetch(url_or_path)
        except urllib.error.HTTPError as err:
            if err.code in _MISSING_STATUS:
                raise PageMissing(f"{url_or_path} does not exist (HTTP {err.code})") from None
            last, told = _describe(err), err.headers.get("Retry-After") if err.headers else None
        except (OSError, http.client.HTTPException) as err:
            last, told = _describe(err), None
    raise IndexUnreachable(f"could not download {url_or_path} after {retries + 1} attempts "
                           f"({last})")


class _Resumable:
    """A sha256 fed by one download over several connections, each asking for the rest."""

    def __init__(self) -> None:
        self.digest, self.have = hashlib.sha256(), 0

    def fetch(self, url: str) -> str:
        headers = {"User-Agent": _agent(), "Accept-Encoding": "identity"}
        if self.have:
            headers["Range"] = f"bytes={self.have}-"
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers),
                                    timeout=60) as resp:
            if self.have and resp.status != 206:  # the range was ignored: start again
                self.digest, self.have = hashlib.sha256(), 0
            length = resp.headers.get("Content-Length")
            expected = self.have + int(length) if (length or "").isdigit() else None
            for chunk in iter(lambda: resp.read(1 << 20), b""):
                self.digest.update(chunk)
                self.have += len(chunk)
        if expected is not None and self.have < expected:
            raise http.client.IncompleteRead(b"", expected - self.have)
        return self.digest.hexdigest()


def local_path(url: str) -> Path | None:
    """The folder or file a `file://` URL or plain path names; None for http(s)."""
    if url.startswith("file://"):
        return Path(url2pathname(urlparse(url).path))
    if "://" in url:
        return None
    return Path(url).expanduser()


def _get(url: str, timeout: float) -> tuple[bytes, str, str]:
    request = urllib.request.Request(url, headers={"Accept": _ACCEPT, "User-Agent": _agent()})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            return resp.read(), resp.headers.get_content_type(), resp.geturl()
    except urllib.error.HTTPError as err:
        if err.code in _MISSING_STATUS:
            raise PageMissing(f"the wheel index has no page {url} (HTTP {err.code}): check the "
                              "CUDA tag and `indexes` in matrix.yaml") from None
        if err.code < 500 and err.code != 429:
            raise IndexUnreachable(f"the wheel index {url} refused the request (HTTP {err.code} "
                                   f"{err.reason}); check `indexes` in matrix.yaml") from None
        raise


def _digest(stream) -> str:
    digest = hashlib.sha256()
    for chunk in iter(lambda: stream.read(1 << 20), b""):
        digest.update(chunk)
    return digest.hexdigest()


def _describe(err: BaseException) -> str:
    if isinstance(err, urllib.error.HTTPError):
        return f"HTTP {err.code} {err.reason}"
    if isinstance(err, urllib.error.URLError):
        return str(err.reason)
    return str(err) or err.__class__.__name__


def _agent() -> str:
    from .. import __version__

    return f"torchbisect/{__version__}"
