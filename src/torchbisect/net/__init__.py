"""Everything torchbisect asks over the network, in one place.

client.py   the one HTTP client (urllib3): redirects followed hop by hop through the link policy,
            credentials only to their origin, connect/idle/total deadlines, size bounds
deadline.py the idle and total deadlines on every socket read
credentials.py a URL's `user:password@`: taken out, sent as Basic auth to its origin only
pools.py    the connection pools: bounded sockets, and the address reached checked (rebinding)
failures.py NetError and the one describer of a failed request
retry.py    the one retry policy (Retry-After, exponential backoff, jitter, a cap)
resumable.py downloads that resume with Range and hash as they go
github.py   the one GitHub REST client (commit lookups, the status issue)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .client import API, HEAD, PAGE, WHEEL, Deadlines, Route, request
    from .failures import NetError, Refused
    from .retry import Retries

# The client's names are imported when first asked for (PEP 562), not with the package: a
# process that only reads a config file (which takes `net.credentials` alone) does not pay for
# urllib3 and the client, about a third of `torchbisect report`'s 0.2 s start.
_FROM = {
    "API": "client",
    "HEAD": "client",
    "PAGE": "client",
    "WHEEL": "client",
    "Deadlines": "client",
    "Route": "client",
    "request": "client",
    "NetError": "failures",
    "Refused": "failures",
    "Retries": "retry",
}

__all__ = [
    "API",
    "HEAD",
    "PAGE",
    "WHEEL",
    "Deadlines",
    "NetError",
    "Refused",
    "Retries",
    "Route",
    "request",
]


def __getattr__(name: str) -> Any:
    if name not in _FROM:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_FROM[name]}", __name__), name)
    globals()[name] = value  # asked once
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
