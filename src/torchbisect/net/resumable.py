"""A download that survives dropped connections: each attempt asks for the rest (`Range`), and
the bytes are hashed (sha256) as they arrive, so a multi-GB wheel is read once.

A server that ignores the range sends the whole file again: the sink starts over.  A 416 to a
range that starts at the end means the bytes already held are the whole file.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

from . import retry
from .client import WHEEL, Deadlines, Route, request
from .failures import NetError

Progress = Callable[[int, int | None], None]  # (bytes so far, total or None)


class Sink:
    """Where the bytes go: here only hashed and counted; a subclass also writes them."""

    def __init__(self) -> None:
        self.digest, self.have = hashlib.sha256(), 0

    def write(self, data: bytes) -> None:
        self.digest.update(data)
        self.have += len(data)

    def restart(self) -> None:
        self.digest, self.have = hashlib.sha256(), 0

    @property
    def sha256(self) -> str:
        return self.digest.hexdigest()


def fetch(
    url: str,
    sink: Sink,
    *,
    retries: retry.Retries,
    route: Route | None = None,
    deadlines: Deadlines = WHEEL,
    on_retry: retry.OnRetry | None = None,
    progress: Progress | None = None,
) -> Sink:
    """Every byte of `url` into `sink`, resuming after each transient failure."""
    retry.attempt(
        lambda: _rest(url, sink, route or Route(base=url), deadlines, progress), retries, on_retry
    )
    return sink


def _rest(
    url: str, sink: Sink, route: Route, deadlines: Deadlines, progress: Progress | None
) -> None:
    headers = {"Accept-Encoding": "identity"}
    if sink.have:
        headers["Range"] = f"bytes={sink.have}-"
    try:
        with request(
            "GET", url, route=route, headers=headers, deadlines=deadlines, decode=False
        ) as answer:
            if sink.have and answer.status != 206:
                sink.restart()  # the server ignored the range: it sends the whole file
            length = answer.headers.get("content-length", "")
            total = sink.have + int(length) if length.isdigit() else None
            for chunk in answer.chunks():
                sink.write(chunk)
                if progress is not None:
                    progress(sink.have, total)
    except NetError as err:
        if err.status == 416 and sink.have:  # asked past the end: what we hold is whole
            return
        raise
