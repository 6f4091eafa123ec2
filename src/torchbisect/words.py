"""Small wording helpers shared by the commands' output, so counts read as English."""

from __future__ import annotations


def count(n: int, noun: str, plural: str | None = None) -> str:
    """`count(1, "cell")` → "1 cell"; `count(2, "cell")` → "2 cells"."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"
