"""The connection pools every request uses, and what their connections do beyond urllib3's:

* the socket's reads keep the request's idle and total deadlines (`deadline.Bounded`);
* the address a connection reached is ranked (`links.address_rank`) before a byte is sent, and
  refused when it is more internal than the request may reach (`reaching`).  The hop check ranks
  a name by what it resolved to then; the connection resolves it again, and a name whose answer
  changed in between (DNS rebinding: public for the check, 169.254.169.254 for the connection)
  is caught here; a pooled connection is checked again for each request it carries.  Through a
  proxy the proxy connects, so nothing is checked here.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from . import links
from .deadline import Bounded
from .failures import PeerRefused

_current = threading.local()


@contextmanager
def reaching(limit: int | None) -> Iterator[None]:
    """Connections this thread opens meanwhile may reach addresses ranked up to `limit`
    (links.PUBLIC … links.LOOPBACK); None: anywhere."""
    _current.limit = limit
    try:
        yield
    finally:
        _current.limit = None


def _check(sock: socket.socket, host: str) -> None:
    limit = getattr(_current, "limit", None)
    if limit is None:
        return
    peer = str(sock.getpeername()[0]).split("%", 1)[0]
    rank = links.address_rank(ipaddress.ip_address(peer))
    if rank > limit:
        sock.close()
        raise PeerRefused(
            f"{host} led the connection to {peer}, {links.RANK_NAMES[rank]}, "
            "which it did not resolve to when it was checked; not connected"
        )


if TYPE_CHECKING:  # what _Checked is mixed into, for the checker to read its methods against
    _Mixin = HTTPConnection
else:
    _Mixin = object


class _Checked(_Mixin):
    """What both connection classes add to urllib3's: the peer's address checked on connecting
    and before each request on a pooled connection, and a socket whose reads are bounded."""

    def _new_conn(self) -> socket.socket:
        sock = super()._new_conn()
        _check(sock, self.host)
        return sock

    def request(self, *args: Any, **kwargs: Any) -> None:
        if self.sock is not None:  # a pooled connection, checked for this request's reach
            _check(self.sock, self.host)
        super().request(*args, **kwargs)

    def connect(self) -> None:
        super().connect()
        self.sock = Bounded(self.sock)


class _Connection(_Checked, HTTPConnection):
    pass


class _TLSConnection(_Checked, HTTPSConnection):
    pass


class Pool(HTTPConnectionPool):
    ConnectionCls = _Connection


class TLSPool(HTTPSConnectionPool):
    ConnectionCls = _TLSConnection


POOLS = {"http": Pool, "https": TLSPool}
