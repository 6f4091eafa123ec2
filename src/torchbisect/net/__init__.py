"""Everything torchbisect asks over the network, in one place.

client.py   the one HTTP client (urllib3): redirects followed hop by hop through the link policy,
            credentials only to their origin, connect/idle/total deadlines, size bounds
deadline.py the idle and total deadlines on every socket read
credentials.py a URL's `user:password@`: taken out, sent as Basic auth to its origin only
pools.py    the connection pools: bounded sockets, and the address reached checked (rebinding)
errors.py   NetError and the one describer of a failed request
retry.py    the one retry policy (Retry-After, exponential backoff, jitter, a cap)
resumable.py downloads that resume with Range and hash as they go
github.py   the one GitHub REST client (commit lookups, the status issue)
"""

from .client import API, HEAD, PAGE, WHEEL, Deadlines, Route, request
from .errors import NetError, Refused
from .retry import Retries

__all__ = ["API", "HEAD", "PAGE", "WHEEL", "Deadlines", "NetError", "Refused", "Retries", "Route",
           "request"]
