"""How long to wait before asking a server again: its `Retry-After` when it gave one, else an
exponential backoff; capped, and jittered so that shards started together do not retry in step.
Used by wheel downloads, index pages and the GitHub API.
"""

from __future__ import annotations

import email.utils
import random
import time


def wait_before(attempt: int, *, retry_after: str | None = None, base: float = 1.0,
                max_wait: float = 120.0) -> float:
    """Seconds to wait before attempt `attempt + 1` (attempt counts from 1)."""
    told = parse_retry_after(retry_after)
    wait = told if told is not None else base * 2 ** (attempt - 1)
    return min(wait, max_wait) * random.uniform(0.8, 1.2)


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (a number, or an HTTP date); None without one."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
