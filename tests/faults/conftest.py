"""What the fault tests share beyond tests/conftest.py: `waits`, the pauses torchbisect's retries
asked for, recorded instead of slept, so a test checks how long it would have waited (and how
often) without waiting."""

from __future__ import annotations

import pytest

from torchbisect.net import retry


@pytest.fixture
def waits(monkeypatch) -> list[float]:
    taken: list[float] = []
    monkeypatch.setattr(retry, "_sleep", taken.append)
    return taken
