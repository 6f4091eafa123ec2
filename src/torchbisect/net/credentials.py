"""Credentials written into a URL (`https://user:password@mirror.example/simple/`), as pip
accepts them in an index URL or a wheel link.

urllib3 sends nothing for a URL's userinfo, and a URL that carries a password must not reach an
error sentence, a log, the lock, the store or a page.  So a URL's userinfo is taken out where the
URL enters torchbisect (matrix.yaml's `indexes:` and `dev` wheels, `--index-url`, the first URL
of a request): `remember` keeps it for the URL's origin (scheme, host, port) and hands back the
URL without it, and the client (client.py) sends it as an `Authorization: Basic` header to that
origin only — on every hop that reaches it, never on a hop to another origin.  Like pip, the
credentials of an index also go to the wheel links on its own origin.  Everything downstream
holds the bare URL; `hide` masks a password for the few places that must name a URL as given.
"""

from __future__ import annotations

import base64
import threading
from urllib.parse import unquote, urlsplit, urlunsplit

from ..masking import MASK

_known: dict[tuple[str, str, int | None], str] = {}  # origin → the Authorization header value
_userinfo: dict[tuple[str, str, int | None], str] = {}  # origin → "user:password" (quoted)
_lock = threading.Lock()


def split(url: str) -> tuple[str, str | None]:
    """(`url` without its userinfo, the userinfo as written or None); only for http(s)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url, None
    if parts.scheme.lower() not in ("http", "https") or "@" not in parts.netloc:
        return url, None
    userinfo, _, host = parts.netloc.rpartition("@")
    return urlunsplit(parts._replace(netloc=host)), userinfo


def remember(url: str) -> str:
    """`url` without its userinfo; the userinfo, if any, is kept for the URL's origin (a later
    one for the same origin replaces it)."""
    bare, userinfo = split(url)
    if userinfo:
        user, _, password = userinfo.partition(":")
        token = base64.b64encode(f"{unquote(user)}:{unquote(password)}".encode()).decode()
        with _lock:
            _known[_origin(bare)] = f"Basic {token}"
            _userinfo[_origin(bare)] = userinfo
    return bare


def authorization(url: str) -> str | None:
    """The `Authorization` value for `url`'s origin, when credentials were given for it."""
    with _lock:
        return _known.get(_origin(url))


def restore(url: str) -> str:
    """`url` with the userinfo remembered for its origin: for a tool that reads credentials
    only from the URL (uv's `--extra-index-url`); the caller masks it wherever it is shown."""
    with _lock:
        userinfo = _userinfo.get(_origin(url))
    if not userinfo or split(url)[1] is not None:
        return url
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=f"{userinfo}@{parts.netloc}"))


def hide(url: str) -> str:
    """`url` with a password masked (`user:***@host`); a userinfo without one is a token in
    the user's place (`https://TOKEN@host`, as pip allows), masked whole."""
    bare, userinfo = split(url)
    if userinfo is None:
        return url
    user, colon, _ = userinfo.partition(":")
    shown = f"{user}:{MASK}" if colon else MASK
    parts = urlsplit(bare)
    return urlunsplit(parts._replace(netloc=f"{shown}@{parts.netloc}"))


def forget() -> None:
    """Drop every remembered credential (tests)."""
    with _lock:
        _known.clear()
        _userinfo.clear()


def _origin(url: str) -> tuple[str, str, int | None]:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return "", "", None
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").rstrip(".")
    return scheme, host, port or {"http": 80, "https": 443}.get(scheme)
