"""Folding: a long run of consecutive nightlies with the same run verdict becomes one row.

Three years of daily nightlies that all read "affected" say one thing, so the page shows it once,
with its date range and, per probe case, how many of the nightlies had which verdict (a side-stream
race lost on 7 of 20 trials one day does not split the run in two).  The folded nightlies are
listed in full on a page of their own, linked from the summary row: a reader fetches them only
when they open it, so the page stays small however many nightlies there are.  An infrastructure
failure says nothing about the build, so it is never folded: it stays a row, and ends a run.
"""

from __future__ import annotations

import re
from collections import Counter

from .marks import Mark
from .parts import Fold, Row

# Two identical neighbours read fine unfolded; from three on, the repetition hides the changes.
FOLD_MIN = 3
FOLD_DIR = "nightlies"  # beside index.html: one page per folded run


def same_verdicts(row: Row) -> Mark | None:
    """What must match for rows to fold: the run's verdict; None (never folds) for a row that
    has no verdict, an infrastructure failure."""
    return row.mark if row.cases else None


def fold_rows(rows: list[Row], *, fold: bool, anchor: str = "") -> tuple[Fold, ...]:
    if not fold:
        return tuple(Fold(rows=(r,)) for r in rows)
    out: list[Fold] = []
    streak: list[Row] = []
    for row in rows:
        key = same_verdicts(row)
        if streak and key is not None and key == same_verdicts(streak[-1]):
            streak.append(row)
            continue
        out += _close(streak, anchor)
        streak = [row]
    return tuple(out + _close(streak, anchor))


def _close(streak: list[Row], anchor: str) -> list[Fold]:
    if len(streak) < FOLD_MIN:
        return [Fold(rows=(r,)) for r in streak]
    columns = tuple(
        column_summary([r.cases[i].mark for r in streak]) for i in range(len(streak[0].cases))
    )
    name = _file_name(f"{anchor}-{streak[0].label}-{streak[-1].label}")
    return [Fold(rows=tuple(streak), cases=columns, href=f"{FOLD_DIR}/{name}.html")]


def column_summary(marks: list[Mark]) -> tuple[tuple[Mark, int], ...]:
    """The verdicts of one column over the folded rows, commonest first; a verdict's note (the
    trial count) is kept when every row with that verdict has the same one."""
    counts = Counter((m.kind, m.word) for m in marks)
    notes: dict[tuple[str, str], set[str]] = {}
    first: dict[tuple[str, str], Mark] = {}
    for m in marks:
        notes.setdefault((m.kind, m.word), set()).add(m.note)
        first.setdefault((m.kind, m.word), m)
    return tuple(
        (first[key] if len(notes[key]) == 1 else _without_note(first[key]), n)
        for key, n in counts.most_common()
    )


def _without_note(mark: Mark) -> Mark:
    return Mark(kind=mark.kind, icon=mark.icon, word=mark.word, note="")


def _file_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "fold"
