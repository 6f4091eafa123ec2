"""What a request that failed says: `NetError`, one phrase naming the cause, and whether asking
again can help.  `describe` turns urllib3's and the socket's exceptions into that phrase, in one
place, so every caller says "connection refused" the same way."""

from __future__ import annotations

import socket
import ssl

from urllib3 import exceptions as u3


class NetError(Exception):
    """A request failed; `str(err)` is a phrase to end a sentence with ("HTTP 503 Service
    Unavailable", "connection refused").  `transient`: asking again may help.  `status`: the HTTP
    status, when there was an answer.  `attempts`: set by `retry.attempt` when it gives up."""

    def __init__(
        self,
        phrase: str,
        *,
        transient: bool,
        status: int | None = None,
        retry_after: str | None = None,
        headers: dict[str, str] | None = None,
        body: bytes = b"",
    ):
        super().__init__(phrase)
        self.transient, self.status, self.retry_after = transient, status, retry_after
        self.headers, self.body = headers or {}, body
        self.attempts = 1


class Refused(NetError):
    """Not asked at all, or not read on: a link policy, a redirect or a size bound said no."""

    def __init__(self, phrase: str):
        super().__init__(phrase, transient=False)


class PeerRefused(OSError):
    """A connection reached an address more internal than its request may reach (pools.py)."""


RETRY_STATUS = frozenset({429, 500, 502, 503, 504})


def http_error(status: int, reason: str, headers: dict[str, str], body: bytes = b"") -> NetError:
    """The NetError for an answer with a failure status: 429 and 5xx are worth another try."""
    return NetError(
        f"HTTP {status} {reason}".rstrip(),
        transient=status in RETRY_STATUS,
        status=status,
        retry_after=headers.get("retry-after"),
        headers=headers,
        body=body,
    )


def describe(err: BaseException, host: str) -> NetError:
    """The NetError for an exception raised while asking `host`."""
    chain = _chain(err)
    refused = next((e for e in chain if isinstance(e, PeerRefused)), None)
    if refused is not None:
        return Refused(str(refused))
    if any(
        isinstance(e, u3.NameResolutionError)
        or isinstance(e, socket.gaierror)
        and e.errno in _NO_NAME
        for e in chain
    ):
        return NetError(f"the name {host} does not resolve", transient=False)
    if _has(chain, ConnectionRefusedError):
        return NetError(f"{host} refused the connection", transient=False)
    if _has(chain, u3.SSLError, ssl.SSLError):
        return NetError(f"TLS with {host} failed ({_short(chain[-1])})", transient=False)
    if _has(chain, u3.ReadTimeoutError):
        return NetError(f"{host} went silent (no byte within the idle deadline)", transient=True)
    if _has(chain, u3.NewConnectionError):
        return NetError(f"cannot connect to {host} ({_short(chain[-1])})", transient=False)
    if _has(chain, u3.ConnectTimeoutError, TimeoutError):
        return NetError(f"no connection to {host} within the connect deadline", transient=True)
    if _has(chain, u3.ProtocolError, u3.IncompleteRead, ConnectionError, u3.DecodeError):
        return NetError(f"the connection to {host} broke ({_short(chain[-1])})", transient=True)
    if _has(chain, u3.LocationValueError):
        return NetError(f"not a URL one can ask ({err})", transient=False)
    return NetError(_short(chain[-1]), transient=_has(chain, OSError, u3.HTTPError))


# getaddrinfo's "no such name" and "no answer" (which is what a host without DNS gets): neither
# heals within a run, so neither is retried.
_NO_NAME = {socket.EAI_NONAME, socket.EAI_AGAIN, getattr(socket, "EAI_NODATA", socket.EAI_NONAME)}


def _chain(err: BaseException) -> list[BaseException]:
    """`err` and what caused it, outermost first."""
    seen: list[BaseException] = []
    link: BaseException | None = err
    while link is not None and all(link is not s for s in seen):
        seen.append(link)
        link = (
            getattr(link, "reason", None)
            if isinstance(link, u3.MaxRetryError)
            else link.__cause__ or link.__context__
        )
    return seen


def _has(chain: list[BaseException], *types: type) -> bool:
    return any(isinstance(e, types) for e in chain)


def _short(err: BaseException) -> str:
    text = str(err.strerror if isinstance(err, OSError) and err.strerror else err)
    if text.startswith("<") and ">: " in text:  # urllib3's "<HTTPConnection …>: reason"
        text = text.split(">: ", 1)[1]
    return text or type(err).__name__
