"""The one HTTP client: every request torchbisect makes goes through `request`.

Built on urllib3 (pooled connections, connect and read timeouts, its reading of Retry-After), with
what urllib3 leaves to its caller done here, once:

* Redirects are followed by this code, one hop at a time, never by the library: each hop passes
  the link policy (`links.allowed`) against the route's base, as the first URL did, so an index
  cannot reach 169.254.169.254 or 127.0.0.1 through a 302.  At most `MAX_HOPS` hops.
* A route's credentials (`Route.secret`, e.g. GitHub's `Authorization`) go only to the origin
  they belong to; a hop to another origin goes without them.  Credentials written into a URL
  (`https://user:password@mirror/`) are taken out of it (credentials.py) and sent as
  `Authorization: Basic` to that origin only, by the same rule; no URL this module names in a
  sentence carries them.
* A redirect never turns a POST into a GET: a POST (or PATCH) follows only a 307/308 to its own
  origin, and is otherwise refused with a sentence.
* Every request has a connect deadline, an idle deadline (the longest silence between two reads)
  and a total deadline for the whole answer, headers included (see deadline.py).
* Bodies read into memory have a size bound, said in the error when an answer is over it.
* Failures are NetErrors (failures.py) that say in one phrase what happened and whether it heals.
* `http_proxy` / `https_proxy` / `no_proxy` are honoured, as urllib did before.
"""

from __future__ import annotations

import sys
import threading
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin, urlsplit

import urllib3
from urllib3.util import Timeout

from .. import __version__
from ..utils.words import megabytes
from . import credentials, deadline, links, pools
from .failures import NetError, Refused, describe, http_error

USER_AGENT = f"torchbisect/{__version__}"
MAX_HOPS = 10
_REDIRECTS = (301, 302, 303, 307, 308)
_ERROR_BODY = 64 * 1024  # enough of a failure's body for its message
_CHUNK = 1 << 20


@dataclass(frozen=True, kw_only=True)
class Deadlines:
    """Seconds: to connect, of silence between two reads, and for the whole answer."""

    connect: float
    idle: float
    total: float
    # after this long without the whole answer, stderr says what is awaited and for how long at
    # most (None: the caller shows progress of its own, as a download does)
    notice: float | None = 1.0


PAGE = Deadlines(connect=10, idle=30, total=180)  # an index page (~10 MB at most for PyTorch's)
API = Deadlines(connect=10, idle=30, total=60)  # one GitHub REST answer
HEAD = Deadlines(connect=5, idle=10, total=20)  # a wheel's size
WHEEL = Deadlines(connect=10, idle=60, total=4 * 3600, notice=None)  # 3 GB on a slow line


@dataclass(frozen=True, kw_only=True)
class Route:
    """Where one request may go: every hop must be a link that an index at `base` may give
    (`links.allowed` with `allow`); `secret` headers go only to `base`'s origin."""

    base: str
    allow: tuple[str, ...] = ()
    secret: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Answer:
    """A final (non-redirect, non-failure) answer whose body is still to be read."""

    status: int
    url: str  # after the redirects
    headers: Mapping[str, str]  # names in lower case
    _raw: urllib3.BaseHTTPResponse
    _ends: float
    _deadlines: Deadlines

    def chunks(self, size: int = _CHUNK) -> Iterator[bytes]:
        """The body as it arrives, under the request's deadlines."""
        try:
            while data := self._raw.read1(size):
                yield data
        except Exception as err:  # noqa: BLE001 - urllib3, ssl and socket errors alike
            raise _failure(err, self.url, self._ends, self._deadlines) from None

    def read(self, limit: int, what: str) -> bytes:
        """The whole body; Refused (naming `what` and the bound) when it is over `limit` bytes."""
        declared = self.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise Refused(
                f"{what} is {megabytes(int(declared))}, over the bound of {megabytes(limit)}"
            )
        parts, size = [], 0
        for chunk in self.chunks():
            size += len(chunk)
            if size > limit:
                raise Refused(f"{what} is over the bound of {megabytes(limit)}")
            parts.append(chunk)
        return b"".join(parts)


@contextmanager
def request(
    method: str,
    url: str,
    *,
    route: Route | None = None,
    headers: Mapping[str, str] | None = None,
    body: bytes | None = None,
    deadlines: Deadlines = PAGE,
    decode: bool = True,
) -> Iterator[Answer]:
    """Ask `url`, following redirects as the module docstring says; the final answer, whose body
    the caller reads inside the `with`.  A status of 400 or more raises NetError (429 and 5xx
    transient) carrying the status, headers and the first 64 KB of the body."""
    url = credentials.remember(url)
    route = (
        Route(base=credentials.remember(route.base), allow=route.allow, secret=route.secret)
        if route
        else Route(base=url)
    )
    with (
        deadline.running(idle=deadlines.idle, total=deadlines.total) as ends,
        _waiting(url, deadlines),
    ):
        raw, final = _follow(
            method,
            url,
            route=route,
            headers=dict(headers or {}),
            body=body,
            deadlines=deadlines,
            ends=ends,
            decode=decode,
        )
        try:
            answer = Answer(
                raw.status,
                final,
                {k.lower(): v for k, v in raw.headers.items()},
                raw,
                ends,
                deadlines,
            )
            if raw.status >= 400:
                text = _bounded(answer)
                raise http_error(raw.status, raw.reason or "", dict(answer.headers), text)
            yield answer
        finally:
            # a pool answers with an HTTPResponse, which has isclosed (its base does not)
            raw.release_conn() if raw.isclosed() else raw.close()  # type: ignore[attr-defined]


@contextmanager
def _waiting(url: str, deadlines: Deadlines) -> Iterator[None]:
    """Say on stderr, once `deadlines.notice` seconds have passed without the whole answer,
    what is awaited: a peer trickling its answer is never a silent hang."""
    if deadlines.notice is None:
        yield
        return
    timer = threading.Timer(
        deadlines.notice,
        lambda: print(
            f"note: waiting for {url} to answer (at most {deadlines.total:g} s in all)",
            file=sys.stderr,
            flush=True,
        ),
    )
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def origin(url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port); ValueError for what is not a URL ("http://[::1", a port 99999)."""
    parts = urlsplit(url)
    port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    return parts.scheme, links.host_of(url), port


def _follow(
    method: str,
    url: str,
    *,
    route: Route,
    headers: dict[str, str],
    body: bytes | None,
    deadlines: Deadlines,
    ends: float,
    decode: bool,
) -> tuple[urllib3.BaseHTTPResponse, str]:
    target = url
    for _hop in range(MAX_HOPS + 1):
        _check(target, url, route)
        sent = {"User-Agent": USER_AGENT, **headers}
        if origin(target) == origin(route.base):
            sent.update(route.secret)
        basic = credentials.authorization(target)
        if basic and not any(k.lower() == "authorization" for k in sent):
            sent["Authorization"] = basic  # given for this origin (credentials.py)
        manager, proxied = _manager(target)
        try:
            with pools.reaching(None if proxied else _reach(target, route)):
                raw = manager.urlopen(
                    method,
                    target,
                    body=body,
                    headers=sent,
                    redirect=False,
                    retries=False,
                    preload_content=False,
                    decode_content=decode,
                    assert_same_host=False,
                    timeout=Timeout(connect=deadlines.connect, read=deadlines.idle),
                )
        except Exception as err:  # noqa: BLE001 - urllib3, ssl and socket errors alike
            raise _failure(err, target, ends, deadlines) from None
        location = raw.headers.get("Location") if raw.status in _REDIRECTS else None
        if not location:
            return raw, target
        raw.close()  # a redirect's body is never read: a hostile one may be endless
        try:
            # A Location's own userinfo is never sent (nor shown): credentials come from the
            # user, not from a peer.
            following = credentials.split(urljoin(target, location))[0]
            origin(following)
        except ValueError:
            raise Refused(
                f"it redirected to {credentials.hide(location[:200])!r}, which is not "
                "a URL; not followed"
            ) from None
        if method not in ("GET", "HEAD"):
            _may_resend(method, raw.status, target, following)
        if raw.status == 303:
            method, body = "GET", None
        target = following
    raise Refused(f"it redirected more than {MAX_HOPS} times")


def _check(target: str, first: str, route: Route) -> None:
    if target == first:
        try:
            origin(target)
        except ValueError:
            raise Refused(f"{target[:200]!r} is not a URL") from None
        if urlsplit(target).scheme not in ("http", "https"):
            raise Refused(f"{target} is not an http(s) URL")
        if not links.allowed(target, route.base, route.allow):
            raise Refused(links.refusal(target, route.base))
        return
    if urlsplit(target).scheme not in ("http", "https"):
        raise Refused(f"it redirected to {target}, which is not http(s); not followed")
    if not links.allowed(target, route.base, route.allow):
        raise Refused(
            f"it redirected to {target}, {links.kind(target)}, where a link from "
            f"{links.kind(route.base)} may not lead; not followed (`allow_links_to` "
            "in matrix.yaml can name that host if that is meant)"
        )


def _reach(target: str, route: Route) -> int | None:
    """How internal the address a connection to `target` reaches may be: no more than the
    route's base, unless `allow_links_to` names the host."""
    if links.named_in(target, route.allow):
        return None
    base = links.rank(route.base)
    return links.PUBLIC if base == links.UNRESOLVED else base


def _may_resend(method: str, status: int, target: str, following: str) -> None:
    """A POST or PATCH goes on only through a 307/308 to its own origin."""
    if status not in (307, 308):
        raise Refused(
            f"it answered the {method} with {status} to {following}, which would turn "
            "it into a GET; not followed"
        )
    if origin(following) != origin(target):
        raise Refused(f"it redirected the {method} to another origin ({following}); not followed")


def _bounded(answer: Answer) -> bytes:
    """Up to 64 KB of a failure's body, for its message; the rest is left unread."""
    got = b""
    try:
        for chunk in answer.chunks(_ERROR_BODY):
            got += chunk
            if len(got) >= _ERROR_BODY:
                break
    except NetError:
        pass  # the status says enough
    return got[:_ERROR_BODY]


def _failure(err: BaseException, url: str, ends: float, deadlines: Deadlines) -> NetError:
    if isinstance(err, NetError):
        return err
    host = links.host_of(url) or url
    if deadline.past(ends):  # a slow peer is not worth a second try: said once, with the bound
        return NetError(
            f"{host} did not finish answering {url} within {deadlines.total:g} s "
            "(the total deadline)",
            transient=False,
        )
    return describe(err, host)


_POOL: dict[str, Any] = {"num_pools": 16, "maxsize": 8, "block": False, "retries": False}
_managers: dict[str | None, urllib3.PoolManager] = {}
_managers_lock = threading.Lock()


def _manager(url: str) -> tuple[urllib3.PoolManager, bool]:
    """The pools for `url`: direct, or through the proxy the environment names for it (True)."""
    parts = urlsplit(url)
    proxy = urllib.request.getproxies().get(parts.scheme)
    if proxy and urllib.request.proxy_bypass(parts.hostname or ""):
        proxy = None
    with _managers_lock:
        if proxy not in _managers:
            made = urllib3.ProxyManager(proxy, **_POOL) if proxy else urllib3.PoolManager(**_POOL)
            made.pool_classes_by_scheme = pools.POOLS
            _managers[proxy] = made
        return _managers[proxy], proxy is not None
