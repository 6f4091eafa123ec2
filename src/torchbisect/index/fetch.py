"""Wheel indexes: PEP 503 HTML / PEP 691 JSON pages or a folder of wheels, read into `Wheel`s.

This module owns the network side of resolution, through torchbisect.net: one request per page
with the one retry policy, one clear error naming the URL when the index does not answer, a size
bound on a page, and the rule that a partial or garbled answer is an error — never "this version
does not exist".  Choosing which wheel a cell gets is `resolve`'s job; this module only lists.
What a page says (`Wheel`, the HTML, JSON and folder readers) is pages.py's; which wheels install
here is tags.py's.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Callable, Collection, Iterable
from pathlib import Path
from typing import BinaryIO
from urllib.parse import urlparse
from urllib.request import url2pathname

from packaging.utils import canonicalize_name

from ..errors import IndexUnreachable, ResolveError
from ..net import PAGE, WHEEL, Deadlines, NetError, Refused, Retries, Route, links, request, retry
from ..net import credentials as userinfo
from ..net.resumable import Sink
from ..net.resumable import fetch as fetch_resumable
from .pages import Garbled, PageMissing, PageTooLarge, Wheel, parse_page, read_folder

PYTORCH_INDEX = "https://download.pytorch.org/whl/"
_ACCEPT = (
    "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, "
    "text/html;q=0.1"
)
_MISSING_STATUS = (403, 404, 410)  # download.pytorch.org answers 403 for a folder that is not there
# A page is read into memory: one link per wheel is a few hundred bytes, so PyTorch's pages stay
# far below this, and a hostile one cannot fill the memory.
PAGE_LIMIT = 64 * 10**6


def default_index(channel: str, cuda: str) -> str:
    """PyTorch's index for a channel and CUDA tag; the package page is `<index>torch/`."""
    channel = getattr(channel, "value", channel)
    prefix = {"stable": "", "test": "test/", "nightly": "nightly/"}.get(channel)
    if prefix is None:
        raise ValueError(f"channel {channel!r} has no PyTorch index")
    return f"{PYTORCH_INDEX}{prefix}{cuda}/"


def fetch_wheels(
    index_url: str,
    package: str = "torch",
    *,
    retries: int = 4,
    backoff: float = 0.5,
    deadlines: Deadlines = PAGE,
    allow: Collection[str] = (),
) -> list[Wheel]:
    """Every wheel of `package` that the index lists, in page order.

    `index_url` is a simple-index root (`…/whl/cu130/`), a `file://` URL or a local folder — either
    a static simple index (`<folder>/<package>/index.html`) or a flat folder of wheels.
    Raises PageMissing when the index has no page for the package, IndexUnreachable when it does
    not answer (or answers garbage) `retries` more times, or at once when the failure will not
    heal (a name that does not resolve, a refused connection, a refused redirect, a page over
    PAGE_LIMIT).  Redirects may go where `allow_links_to` (`allow`) lets the index's links go.
    """
    folder = local_path(index_url)
    if folder is not None:
        return read_folder(folder, package)
    index_url = userinfo.remember(index_url)  # `user:password@` becomes Basic auth
    page = index_url.rstrip("/") + "/" + canonicalize_name(package) + "/"
    route = Route(base=page, allow=tuple(allow))

    def told(err: NetError, attempt: int, wait: float) -> None:
        # No silent waits: a run that stalls on an unreachable index says so, and until when.
        print(
            f"note: {page} did not answer ({err}); try {attempt + 1} of {retries + 1} "
            f"in {wait:.1f} s",
            file=sys.stderr,
            flush=True,
        )

    try:
        return retry.attempt(
            lambda: _page(page, package, route, deadlines),
            Retries(attempts=retries + 1, base=backoff),
            told,
        )
    except Refused as err:
        raise IndexUnreachable(f"the wheel index {page} was not read: {err}") from None
    except NetError as err:
        if err.status in _MISSING_STATUS:
            raise PageMissing(
                f"the wheel index has no page {page} (HTTP {err.status}): check "
                "the CUDA tag and `indexes` in matrix.yaml"
            ) from None
        if err.status is not None and not err.transient:
            raise IndexUnreachable(
                f"the wheel index {page} refused the request ({err}); check "
                "`indexes` in matrix.yaml"
            ) from None
        tries = f"after {err.attempts} attempts " if err.attempts > 1 else ""
        raise IndexUnreachable(
            f"the wheel index {page} did not give a usable answer {tries}({err}); check the network"
        ) from None


def _page(page: str, package: str, route: Route, deadlines: Deadlines) -> list[Wheel]:
    with request(
        "GET", page, route=route, headers={"Accept": _ACCEPT}, deadlines=deadlines
    ) as answer:
        body = answer.read(PAGE_LIMIT, f"the page {page}")
        kind = answer.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        final = answer.url
    try:
        return parse_page(body, kind, final, package)
    except Garbled as err:  # a page cut short by a proxy may be whole on the next try
        raise NetError(str(err), transient=True) from None
    except PageTooLarge as err:
        raise NetError(str(err), transient=False) from None


def reachable(
    wheels: Iterable[Wheel],
    index_url: str,
    *,
    allow: Collection[str] = (),
    note: Callable[[str], None] | None = None,
) -> tuple[Wheel, ...]:
    """The wheels whose link an index at `index_url` may send a cell to (see `links.allowed`)."""
    kept: list[Wheel] = []
    refused: list[Wheel] = []
    for wheel in wheels:
        (kept if links.allowed(wheel.url, index_url, allow) else refused).append(wheel)
    if refused and note:
        note(f"ignored {len(refused)} link(s): {links.refusal(refused[0].url, index_url)}")
    return tuple(kept)


def sha256_of(url_or_path: str, *, retries: int = 4, backoff: float = 0.5) -> str:
    """The sha256 of a wheel, streamed from its URL (resuming with Range) or read from disk."""
    path = local_path(url_or_path)
    if path is not None:
        try:
            with path.open("rb") as fh:
                return _digest(fh)
        except OSError as err:
            raise ResolveError(f"cannot read the wheel {path}: {err.strerror}") from None
    url_or_path = userinfo.remember(url_or_path)
    try:
        return fetch_resumable(
            url_or_path,
            Sink(),
            deadlines=WHEEL,
            retries=Retries(attempts=retries + 1, base=backoff),
        ).sha256
    except Refused as err:
        raise IndexUnreachable(f"could not download {url_or_path}: {err}") from None
    except NetError as err:
        if err.status in _MISSING_STATUS:
            raise PageMissing(f"{url_or_path} does not exist (HTTP {err.status})") from None
        tries = f"after {err.attempts} attempts " if err.attempts > 1 else ""
        raise IndexUnreachable(f"could not download {url_or_path} {tries}({err})") from None


def local_path(url: str) -> Path | None:
    """The folder or file a `file://` URL or plain path names; None for http(s)."""
    if url.startswith("file://"):
        return Path(url2pathname(urlparse(url).path))
    if "://" in url:
        return None
    return Path(url).expanduser()


def _digest(stream: BinaryIO) -> str:
    digest = hashlib.sha256()
    for chunk in iter(lambda: stream.read(1 << 20), b""):
        digest.update(chunk)
    return digest.hexdigest()
