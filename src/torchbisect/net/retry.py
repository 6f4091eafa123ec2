"""The one retry policy: which failures are asked again, and how long to wait before each try.

Only what can heal is retried: timeouts, dropped connections, 429 and 5xx (the error says so in
`transient`).  A name that does not resolve, a refused connection, a 4xx, a refused redirect or
an answer over its size bound fails at the first attempt.  The wait is the server's `Retry-After`
when it gave one, else an exponential backoff; capped, and jittered so that shards started
together do not retry in step.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from urllib3.exceptions import InvalidHeader
from urllib3.util import Retry

from .failures import NetError

T = TypeVar("T")
OnRetry = Callable[[NetError, int, float], None]  # (the failure, the attempt that failed, wait)
_sleep = time.sleep  # tests replace it to see the waits without taking them
_URLLIB3_RETRY = Retry(0)  # only for its reading of Retry-After (seconds or an HTTP date)


@dataclass(frozen=True, kw_only=True)
class Retries:
    attempts: int = 5  # in all, the first one included
    base: float = 0.5  # seconds before the second attempt; doubled for each after it
    max_wait: float = 60.0  # no wait is longer, whatever Retry-After asks


def attempt(action: Callable[[], T], retries: Retries, on_retry: OnRetry | None = None) -> T:
    """`action()`, asked again while it fails with a transient NetError and attempts are left.

    The NetError that ends it carries `attempts`, how many were made.
    """
    for number in range(1, retries.attempts + 1):
        try:
            return action()
        except NetError as err:
            err.attempts = number
            if not err.transient or number == retries.attempts:
                raise
            wait = wait_before(
                number, retry_after=err.retry_after, base=retries.base, max_wait=retries.max_wait
            )
            if on_retry is not None:
                on_retry(err, number, wait)
            _sleep(wait)
    raise AssertionError("unreachable: the last attempt returns or raises")


def wait_before(
    attempt: int, *, retry_after: str | None = None, base: float = 1.0, max_wait: float = 120.0
) -> float:
    """Seconds to wait before attempt `attempt + 1` (attempt counts from 1)."""
    told = parse_retry_after(retry_after)
    wait = told if told is not None else base * 2 ** (attempt - 1)
    return min(wait, max_wait) * random.uniform(0.8, 1.2)


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (a number, or an HTTP date); None without a valid one."""
    if not value:
        return None
    try:
        return float(_URLLIB3_RETRY.parse_retry_after(value.strip()))
    except InvalidHeader:
        return None
