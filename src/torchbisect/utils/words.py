"""Small wording helpers shared by the commands' output, so counts, sizes, signals and a
command's last words read the same everywhere."""

from __future__ import annotations

import signal


def count(n: int, noun: str, plural: str | None = None) -> str:
    """`count(1, "cell")` → "1 cell"; `count(2, "cell")` → "2 cells"."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def megabytes(n: float) -> str:
    """Bytes as a person reads them: "1.5 MB" below 10 MB, "1,234 MB" from there on."""
    return f"{n / 1e6:,.0f} MB" if n >= 1e7 else f"{n / 1e6:.1f} MB"


def signal_name(number: int) -> str:
    """"SIGKILL (9)"; the bare number for one this platform does not name."""
    try:
        return f"{signal.Signals(number).name} ({number})"
    except ValueError:
        return str(number)


def last_line(text: str) -> str:
    """The last line of a command's output that says something (cut at 300 characters), or ""."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""
