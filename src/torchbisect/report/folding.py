"""Folding: a long run of consecutive nightlies with identical verdicts becomes one row.

A year of daily nightlies that all read "affected" says one thing, so the page shows it once, with
its date range; the folded rows stay in the page and open from the summary row's <details> (the
page has no scripts: CSS shows the members while that <details> is open).
"""

from __future__ import annotations

from .page import Fold, Row

# Two identical neighbours read fine unfolded; from three on, the repetition hides the changes.
FOLD_MIN = 3


def same_verdicts(row: Row) -> tuple:
    """What must match for rows to fold: the run's mark and every case's (notes included)."""
    return (row.mark, tuple(c.mark for c in row.cases))


def fold_rows(rows: list[Row], *, fold: bool) -> tuple[Fold, ...]:
    if not fold:
        return tuple(Fold(rows=(r,)) for r in rows)
    out: list[Fold] = []
    streak: list[Row] = []
    for row in rows:
        if streak and same_verdicts(row) == same_verdicts(streak[-1]):
            streak.append(row)
            continue
        out += _close(streak)
        streak = [row]
    return tuple(out + _close(streak))


def _close(streak: list[Row]) -> list[Fold]:
    if len(streak) >= FOLD_MIN:
        return [Fold(rows=tuple(streak))]
    return [Fold(rows=(r,)) for r in streak]
