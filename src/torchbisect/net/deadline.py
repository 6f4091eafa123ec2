"""Deadlines on every socket read: an idle bound (the longest silence between two reads) and a
total bound (the whole answer, headers included).

A socket timeout alone bounds one read: a peer that sends one byte every 5 s never trips a 30 s
timeout and can hold a request for days, in the headers as well as in the body.  So the sockets of
torchbisect's connection pools are wrapped: before each read the timeout is set to the idle bound
or to what is left of the request's total, whichever is shorter, and a read past the total raises
`TimeoutError` at once.  The total belongs to the request, which runs in one thread, so it is
kept per thread (`running`); connections are pooled and shared across requests (pools.py wraps
their sockets in `Bounded`).
"""

from __future__ import annotations

import io
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_now = time.monotonic
_current = threading.local()


@contextmanager
def running(*, idle: float, total: float) -> Iterator[float]:
    """Bound the reads of this thread's request; yields the monotonic time it must end by."""
    ends = _now() + total
    _current.bounds = (idle, ends)
    try:
        yield ends
    finally:
        _current.bounds = None


def past(ends: float) -> bool:
    return _now() >= ends


class Bounded:
    """A socket whose reads keep the running request's deadlines; all else is the socket's."""

    def __init__(self, sock: Any) -> None:
        self._sock = sock

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)

    def arm(self) -> None:
        """Before a read: the timeout is what the deadlines leave; none left is a timeout."""
        bounds = getattr(_current, "bounds", None)
        if bounds is None:
            return
        idle, ends = bounds
        left = ends - _now()
        if left <= 0:
            raise TimeoutError("the request's total deadline has passed")
        self._sock.settimeout(min(idle, left))

    def recv_into(self, buffer: Any, *args: Any) -> int:
        self.arm()
        # The socket is Any (a plain or TLS socket, or urllib3's SSLTransport): said here.
        count: int = self._sock.recv_into(buffer, *args)
        return count

    def recv(self, *args: Any) -> bytes:
        self.arm()
        data: bytes = self._sock.recv(*args)
        return data

    def makefile(self, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        # The socket's own file keeps it open while the answer is read (its io refs); only the
        # reads are wrapped.  http.client reads through this file, headers and body alike.
        real = self._sock.makefile(mode, *args, **kwargs)
        if "r" not in mode or "b" not in mode:
            return real
        return io.BufferedReader(_Reader(self, real))


class _Reader(io.RawIOBase):
    def __init__(self, sock: Bounded, real: Any) -> None:
        self._sock, self._real = sock, real  # the socket's file: closing it lets the socket go
        self._raw = getattr(real, "raw", real)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        self._sock.arm()
        count: int = self._raw.readinto(buffer)
        return count

    def close(self) -> None:
        self._real.close()
        super().close()
