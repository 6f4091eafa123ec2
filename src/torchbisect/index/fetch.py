"""Wheel indexes: PEP 503 HTML / PEP 691 JSON pages or a folder of wheels, read into `Wheel`s.

This module owns the network side of resolution: one request per page with retries and backoff,
one clear error naming the URL when the index does not answer, and the rule that a partial or
garbled answer is an error — never "this version does not exist".  Choosing which wheel a cell
gets is `resolve`'s job; this module only lists and filters.  What a page says (`Wheel`, the
HTML, JSON and folder readers) is pages.py's.
"""

from __future__ import annotations

import hashlib
import http.client
import sys
import sysconfig
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Collection, Iterable
from functools import cache
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
_ARCHES = ("x86_64", "aarch64", "arm64", "universal2", "ppc64le", "s390x", "i686", "armv7l")
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


def compatible(wheels: list[Wheel], *, python: str, platform: str | None = None) -> list[Wheel]:
    """The wheels that install on `python` ("3.12", "3.13t", "cp312") and `platform`.

    `platform` is a wheel platform tag or a family ("linux_x86_64", "linux_aarch64", "win_amd64",
    "macosx_arm64"); None means this machine.  manylinux glibc versions are not compared.
    """
    family = platform_family(platform or host_platform())
    accepted = _accepted_pairs(python)
    return [w for w in wheels if any(
        (i, a) in accepted and platform_family(p) in (family, "any") for i, a, p in w.tags)]


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


def python_tag(python: str) -> str:
    """"3.12" → "cp312", "3.13t" → "cp313t"; a tag is returned as is."""
    if python.startswith("cp"):
        return python
    major, _, minor = python.partition(".")
    return f"cp{major}{minor}"


@cache
def platform_family(tag: str) -> str:
    """"manylinux_2_28_x86_64" → "linux_x86_64"; "macosx_11_0_arm64" → "macosx_arm64"."""
    tag = tag.replace("-", "_").replace(".", "_")
    if tag == "any":
        return "any"
    kind = next((k for k in ("musllinux", "linux", "macosx") if k in tag), None)
    arch = next((a for a in _ARCHES if tag.endswith(a)), None)
    return f"{kind}_{arch}" if kind and arch else tag


def host_platform() -> str:
    return platform_family(sysconfig.get_platform())


def local_path(url: str) -> Path | None:
    """The folder or file a `file://` URL or plain path names; None for http(s)."""
    if url.startswith("file://"):
        return Path(url2pathname(urlparse(url).path))
    if "://" in url:
        return None
    return Path(url).expanduser()


def _accepted_pairs(python: str) -> set[tuple[str, str]]:
    tag = python_tag(python)
    free_threaded = tag.endswith("t")
    digits = tag[2:].rstrip("t")
    major, minor = digits[0], int(digits[1:] or 0)
    pairs = {(f"cp{digits}", tag), (f"py{digits}", "none"), (f"py{major}", "none")}
    if not free_threaded:  # neither the stable ABI nor "cpXY-none" builds load there
        pairs |= {(f"cp{digits}", "none")}
        pairs |= {(f"cp{major}{m}", "abi3") for m in range(2, minor + 1)}
    return pairs


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
