"""What a wheel link may name: a file name that is a wheel and nothing else, and a target that is
no more internal than the index that listed it.

An index is untrusted input.  Two rules keep it from reaching past the wheel it describes:

* the local name of a download is the link's decoded last path segment, and only when that parses
  as a wheel file name with no separator, no `..` and no control character left after decoding
  (`%2F`, `%5C`, `%00` …) — so bytes never land outside the download folder;
* a link's target ranks public < private < link-local < loopback < file < unresolved, and may not
  rank above its index: a remote index cannot send a cell to `file://`, to 127.0.0.1 or to
  169.254.169.254, unless `allow_links_to` in matrix.yaml names that host (or `file`).

The same rule holds for every hop of every request (torchbisect.net follows redirects itself and
asks `allowed` before each one).  A host is read the way the resolver would read it before it is
ranked: `169.254.169.254.`, `0xa9fea9fe`, `2852039166`, `0251.0376.0251.0376` and
`::ffff:169.254.169.254` are all link-local, `localhost.` is loopback.  A name that does not
resolve is not thereby public: it ranks above everything, so only its own index's host or
`allow_links_to` lets it through.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Collection
from urllib.parse import unquote, urlparse

from packaging.utils import InvalidWheelFilename, parse_wheel_filename

PUBLIC, PRIVATE, LINK_LOCAL, LOOPBACK, LOCAL_FILE, UNRESOLVED = range(6)
RANK_NAMES = {
    PUBLIC: "a public address",
    PRIVATE: "a private address",
    LINK_LOCAL: "a link-local address",
    LOOPBACK: "this host (loopback)",
    LOCAL_FILE: "a local file",
    UNRESOLVED: "a name that does not resolve here",
}
_IPV4_SPELLING = frozenset("0123456789abcdefx.")  # what inet_aton reads: 0x…, 0…, dotted or not


def wheel_name(url: str) -> str | None:
    """The decoded wheel file name a URL (or path) ends in, or None when it is not a safe one."""
    is_url = "://" in url
    raw = (urlparse(url).path if is_url else url).rsplit("/", 1)[-1]
    name = unquote(raw) if is_url else raw
    if not safe_wheel_name(name):
        return None
    return name


def safe_wheel_name(name: str) -> bool:
    """True for a bare wheel file name: parses as one, and cannot leave the folder it lands in."""
    if (
        not name
        or name in (".", "..")
        or ".." in name
        or any(c in name for c in "/\\\0")
        or any(ord(c) < 32 or ord(c) == 127 for c in name)
        or not name.endswith(".whl")
    ):
        return False
    try:
        parse_wheel_filename(name)
    except (InvalidWheelFilename, ValueError):
        return False
    return True


def rank(url: str) -> int:
    """How internal a URL's target is (PUBLIC … LOCAL_FILE); a plain path is a local file."""
    if url.startswith("file:") or "://" not in url:
        return LOCAL_FILE
    return host_rank(host_of(url))


def host_of(url: str) -> str:
    """The host a URL names, as the resolver reads it: lower case, no trailing dot, no zone."""
    try:
        host = urlparse(url).hostname or ""
    except ValueError:  # "http://[::1" and the like
        return ""
    return host.lower().rstrip(".").split("%", 1)[0]


def allowed(url: str, index_url: str, allow: Collection[str] = ()) -> bool:
    """May an index at `index_url` send a cell to `url`?  `allow` lists hosts (or "file")."""
    if (
        "://" in url
        and "://" in index_url
        and not url.startswith("file:")
        and not index_url.startswith("file:")
        and host_of(url) == host_of(index_url)
    ):
        return True  # the index's own host (every link of a PyTorch page): nothing to resolve
    target, base = rank(url), rank(index_url)
    base = PUBLIC if base == UNRESOLVED else base  # an index we cannot place vouches for nothing
    return target == PUBLIC or named_in(url, allow) or target <= base


def kind(url: str) -> str:
    """What a URL's target is, in words: "a link-local address", "this host (loopback)" …"""
    return RANK_NAMES[rank(url)]


def refusal(url: str, index_url: str) -> str:
    """Why `allowed` said no, as the end of a sentence."""
    return (
        f"{index_url} is {RANK_NAMES[rank(index_url)]} but links to {url}, which is "
        f"{RANK_NAMES[rank(url)]}; add its host (or `file`) to `allow_links_to` in matrix.yaml "
        "if that is meant"
    )


def host_rank(host: str) -> int:
    """How internal a host is; every spelling of one address ranks the same."""
    host = host.lower().strip("[]").rstrip(".").split("%", 1)[0]
    if host in ("localhost", "localhost.localdomain") or host.endswith(".localhost"):
        return LOOPBACK
    address = literal_address(host)
    if address is not None:
        return address_rank(address)
    if host in _ranked:
        return _ranked[host]
    addresses = _resolve(host)
    if not addresses:  # not cached: the next ask may find the name again
        return UNRESOLVED
    _ranked[host] = max(address_rank(a) for a in addresses)
    return _ranked[host]


_ranked: dict[str, int] = {}  # names that resolved, once per process


def literal_address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address a host spells without asking DNS: "::1", "127.1", "0x7f000001", "2130706433",
    "0177.0.0.1" (inet_aton's forms, which getaddrinfo and so the connection accept too)."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    if host and set(host) <= _IPV4_SPELLING and host[0].isdigit():
        try:
            return ipaddress.IPv4Address(socket.inet_aton(host))
        except OSError:
            return None
    return None


def address_rank(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> int:
    """How internal one address is (an IPv4-mapped IPv6 address ranks as its IPv4 one)."""
    mapped = getattr(address, "ipv4_mapped", None)
    address = mapped or address
    if address.is_loopback or address.is_unspecified:
        return LOOPBACK
    if address.is_link_local:
        return LINK_LOCAL
    if (
        address.is_private
        or address.is_reserved
        or address.is_multicast
        or getattr(address, "is_site_local", False)
    ):
        return PRIVATE
    return PUBLIC


def _resolve(host: str) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    """The addresses a name resolves to; none when it does not (then it ranks UNRESOLVED)."""
    if not host:
        return []
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError):
        return []
    return [ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos]


def named_in(url: str, allow: Collection[str]) -> bool:
    """Does `allow` (`allow_links_to`) name the URL's host (or `file`)?"""
    if not allow:
        return False
    if rank(url) == LOCAL_FILE:
        return "file" in allow
    return host_of(url) in {a.lower().rstrip(".") for a in allow}
