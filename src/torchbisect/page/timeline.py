"""The nightly strip: one slot per calendar date from the first to the last nightly, so a date
without a result is a visible gap, with the bisected range drawn over it.

Only geometry is computed here (pure, tested without a browser); the template draws the SVG.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from ..model import CellRun, Verdict
from ..outcome import BisectResult, Direction, NightlyPoint, Outcome
from .headline import nightly_date
from .marks import Mark, mark_for_run, mark_for_verdict

# Which mark a date shows when several builds (CUDA variants) share it: the most alarming one.
_PRIORITY = ("aff", "flaky", "err", "doubt", "infra", "na", "refused", "ok")
_HEIGHT = {"aff": 1.0, "flaky": 1.0, "ok": 0.4, "refused": 0.4}  # shape, not only colour, tells
_POINT = {
    Outcome.GOOD: Verdict.NOT_AFFECTED,
    Outcome.BAD: Verdict.AFFECTED,
    Outcome.UNKNOWN: Verdict.INCONCLUSIVE,
}
BAR = 30.0  # px height of a full mark
TOP = 6.0  # the bisected band shows above the tallest mark
SAFE_URL = "https://"


@dataclass(frozen=True, kw_only=True)
class Slot:
    x: float
    y: float
    h: float
    kind: str  # a Mark kind, or "gap" for a date without any result
    date: str  # the first date the bar stands for
    what: str  # "2.16.0.dev20260301+cu132: affected", or "no result"
    last: str = ""  # the last date, when the bar stands for consecutive dates of one kind
    days: int = 1

    @property
    def title(self) -> str:  # the tooltip
        if self.days == 1:
            return f"{self.date} {self.what}" if self.kind != "gap" else f"{self.date}: no result"
        noun = "days" if self.kind == "gap" else "nightlies"
        return f"{self.date} … {self.last}: {self.what} ({self.days} {noun})"


@dataclass(frozen=True, kw_only=True)
class Band:
    x: float
    w: float
    label: str
    compare_url: str  # only https URLs; "" otherwise


@dataclass(frozen=True, kw_only=True)
class Tick:
    x: float
    label: str


@dataclass(frozen=True, kw_only=True)
class Timeline:
    width: float
    height: float
    slot: float
    first: str
    last: str
    slots: tuple[Slot, ...]
    bands: tuple[Band, ...]
    ticks: tuple[Tick, ...]  # month labels
    days: tuple[Tick, ...]  # day-of-month labels, when the slots are wide enough to hold them
    tested: int
    gaps: int


def safe_url(url: str) -> str:
    """Links are made only from https URLs; anything else (javascript:, data:, relative) is text."""
    return url if url.startswith(SAFE_URL) else ""


def _worst(marks: list[tuple[Mark, str]]) -> tuple[Mark, str]:
    return min(marks, key=lambda m: _PRIORITY.index(m[0].kind) if m[0].kind in _PRIORITY else 99)


def _marks_by_date(
    runs: list[CellRun], bisections: list[BisectResult]
) -> dict[str, tuple[Mark, str]]:
    found: dict[str, list[tuple[Mark, str]]] = {}
    for run in runs:
        date = nightly_date(run)
        if date:
            found.setdefault(date, []).append((mark_for_run(run), run.cell.version))
    for bisection in bisections:  # a date the bisection probed but the matrix did not
        for point in (bisection.before, bisection.after, *bisection.points):
            if point and point.date not in found:
                found[point.date] = [
                    (
                        mark_for_verdict(_POINT.get(point.verdict, Verdict.INCONCLUSIVE)),
                        f"{point.version} (bisection)",
                    )
                ]
    return {date: _worst(marks) for date, marks in found.items()}


def build_timeline(runs: list[CellRun], bisections: list[BisectResult]) -> Timeline | None:
    marks = _marks_by_date(runs, bisections)
    if not marks:
        return None
    first, last = dt.date.fromisoformat(min(marks)), dt.date.fromisoformat(max(marks))
    days = [first + dt.timedelta(days=i) for i in range((last - first).days + 1)]
    slot = max(3.0, min(28.0, 1100.0 / len(days)))
    slots, ticks, numbers = [], [], []
    for i, day in enumerate(days):
        iso = day.isoformat()
        if day.day == 1 or i == 0:
            ticks.append(Tick(x=round(i * slot, 2), label=day.strftime("%b %Y")))
        if slot >= 14:
            numbers.append(Tick(x=round(i * slot + slot * 0.36, 2), label=str(day.day)))
        if iso not in marks:
            slots.append(
                Slot(
                    x=round(i * slot, 2),
                    y=TOP + BAR - 2,
                    h=2,
                    kind="gap",
                    date=iso,
                    what="no result",
                )
            )
            continue
        mark, version = marks[iso]
        h = BAR * _HEIGHT.get(mark.kind, 0.7)
        word = f"{mark.word}: {mark.note}" if mark.note else mark.word
        slots.append(
            Slot(
                x=round(i * slot, 2),
                y=round(TOP + BAR - h, 2),
                h=round(h, 2),
                kind=mark.kind,
                date=iso,
                what=f"{version}: {word}",
            )
        )
    bands = tuple(
        _band(b, b.before, b.after, first, slot) for b in bisections if b.before and b.after
    )
    return Timeline(
        width=round(len(days) * slot, 2),
        height=TOP + BAR + 30,
        slot=slot,
        first=first.isoformat(),
        last=last.isoformat(),
        slots=_merged(slots),
        bands=bands,
        ticks=_thin(ticks),
        days=tuple(numbers),
        tested=len(marks),
        gaps=len(days) - len(marks),
    )


def _merged(slots: list[Slot]) -> tuple[Slot, ...]:
    """Consecutive dates of the same kind and height as one bar: three years of nightlies draw
    a few dozen bars, not a thousand (each date is still named in the bar's tooltip range)."""
    out: list[list[Slot]] = []
    for slot in slots:
        if out and (out[-1][-1].kind, out[-1][-1].h) == (slot.kind, slot.h):
            out[-1].append(slot)
        else:
            out.append([slot])
    return tuple(run[0] if len(run) == 1 else _one_bar(run) for run in out)


def _one_bar(run: list[Slot]) -> Slot:
    """One bar for consecutive dates: named by the verdict (versions differ from day to day),
    with its note only when every date has the same one."""
    words = {s.what.split(": ", 1)[-1] for s in run}
    what = words.pop() if len(words) == 1 else run[0].what.split(": ", 1)[-1].split(": ")[0]
    return Slot(
        x=run[0].x,
        y=run[0].y,
        h=run[0].h,
        kind=run[0].kind,
        date=run[0].date,
        last=run[-1].date,
        days=len(run),
        what=what,
    )


def _thin(ticks: list[Tick]) -> tuple[Tick, ...]:
    """Drop month labels that would overlap their left neighbour (about 60 px per label)."""
    kept: list[Tick] = []
    for tick in ticks:
        if not kept or tick.x - kept[-1].x >= 60:
            kept.append(tick)
    return tuple(kept)


def _band(
    bisection: BisectResult, before: NightlyPoint, after: NightlyPoint, first: dt.date, slot: float
) -> Band:
    x0 = (dt.date.fromisoformat(before.date) - first).days * slot
    x1 = (dt.date.fromisoformat(after.date) - first).days * slot + slot
    what = "regression" if bisection.direction is Direction.REGRESSION else "fix"
    label = f"{what} ({bisection.case}): between {before.date} and {after.date}"
    return Band(
        x=round(x0, 2),
        w=round(x1 - x0, 2),
        label=label,
        compare_url=safe_url(bisection.compare_url),
    )
