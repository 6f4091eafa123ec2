"""The one clock: the UTC timestamps a run, an attendance or a bisection is stored with.

ISO 8601 with the offset (`2026-10-01T12:00:00.123456+00:00`), so stored times sort as text and
read back with `datetime.fromisoformat`.
"""

from __future__ import annotations

from datetime import datetime, timezone


def now(timespec: str = "microseconds") -> str:
    """This moment in UTC; a run's start has microseconds (runs started in one second keep their
    order), a bisection's end only seconds."""
    return datetime.now(timezone.utc).isoformat(timespec=timespec)
