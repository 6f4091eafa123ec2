"""Finding the missing end: `bisect --bad DATE` without `--good` walks away from the known bad
nightly, 1, 2, 4, 8 … days (at most `limit`), until a nightly is good; then the search bisects
between that one and the nearest bad one seen.  Back in time for a regression, forward with
--find-fix (the fix comes after the bad nightly).

cargo-bisect-rustc does the same when only its end is known.  The known end is judged first (a
walk from a nightly that is not bad would find nothing).  An unknown nightly on the way is stepped
over and never taken as good.  Judging is injected (`judge(candidate) -> NightlyPoint`, the
driver's); so is what is said (`say`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import date

from ..errors import ConfigError
from ..outcome import Direction, NightlyPoint, Outcome
from .candidates import Candidate, CandidateList
from .telling import EndUnjudged

DEFAULT_LIMIT = 64  # days: about what pytorch's nightly index lists


@dataclass(frozen=True, kw_only=True)
class Walked:
    """The walk's end: the good nightly it found, the bad one nearest it, every verdict."""

    good: Candidate
    bad: Candidate
    points: tuple[NightlyPoint, ...]

    def range(self, cands: CandidateList) -> CandidateList:
        """The nightlies the search bisects: from one end of the pair to the other."""
        first, last = sorted((self.good.date, self.bad.date))
        return cands.between(first, last)


def distances(limit: int) -> Iterator[int]:
    """1, 2, 4, 8 … days, then `limit` itself."""
    step = 1
    while step < limit:
        yield step
        step *= 2
    yield limit


def walk(
    cands: CandidateList,
    *,
    direction: Direction,
    judge: Callable[[Candidate], NightlyPoint],
    say: Callable[[str], None],
    limit: int = DEFAULT_LIMIT,
) -> Walked:
    """Walk from the known bad end of `cands` (the newest for a regression, the oldest with
    --find-fix) until a nightly is good.  Raises ConfigError when none is, naming the bound."""
    back = direction is Direction.REGRESSION
    seq = list(reversed(cands.candidates)) if back else list(cands.candidates)
    start = seq[0]
    way, side = ("back", "before") if back else ("forward", "after")
    say(
        f"no --good: walking {way} from --bad {start.date}, 1, 2, 4, 8 … days (at most "
        f"{limit}, --walk-limit), until a nightly is good"
    )
    first = judge(start)
    points = [first]
    if first.verdict is not Outcome.BAD:
        unjudged = first.verdict is Outcome.UNKNOWN
        why = f"could not be judged ({first.reason})" if unjudged else "is not bad but good"
        raise (EndUnjudged if unjudged else ConfigError)(
            f"the --bad end, {start.label}, {why}: a walk needs a bad nightly to start from; "
            "pick another --bad"
        )

    def away(c: Candidate) -> int:
        return abs((date.fromisoformat(c.date) - date.fromisoformat(start.date)).days)

    asked = {0}

    def ask(i: int) -> Outcome:
        asked.add(i)
        cand = seq[i]
        say(f"walking {way}: {cand.label}, {away(cand)} days {side} --bad {start.date}")
        points.append(judge(cand))
        if points[-1].verdict is Outcome.UNKNOWN:
            say(
                f"{cand.date} could not be judged: stepped over (an unknown nightly is never "
                "taken as good)"
            )
        return points[-1].verdict

    bad = pos = 0
    for step in distances(limit):
        if step <= away(seq[pos]):
            continue  # a gap in the index already carried the walk this far
        ahead = [i for i in range(pos + 1, len(seq)) if away(seq[i]) <= limit]
        if not ahead:
            break
        pos = next((i for i in ahead if away(seq[i]) >= step), ahead[-1])
        outcome = ask(pos)
        if outcome is Outcome.GOOD:
            return Walked(good=seq[pos], bad=seq[bad], points=tuple(points))
        if outcome is Outcome.BAD:
            bad = pos
    # The furthest nightly in reach could not be judged: a good one may lie between it and the
    # nearest bad one, skipped by a doubling step.  Walk back in from it, one nightly at a time,
    # until one is good, or bad (then none in reach is good).
    inward = [i for i in range(pos - 1, bad, -1) if i not in asked]
    for i in inward if points[-1].verdict is Outcome.UNKNOWN else ():
        outcome = ask(i)
        if outcome is Outcome.GOOD:
            return Walked(good=seq[i], bad=seq[bad], points=tuple(points))
        if outcome is Outcome.BAD:
            break
    raise ConfigError(_not_found(points[1:], seq, away, limit=limit, side=side, start=start))


def _not_found(
    points: list[NightlyPoint],
    seq: list[Candidate],
    away: Callable[[Candidate], int],
    *,
    limit: int,
    side: str,
    start: Candidate,
) -> str:
    tried = ", ".join(f"{p.date} {p.verdict.value}" for p in points) or "none"
    if any(away(c) > limit for c in seq):
        return (
            f"the walk found no good nightly within {limit} days {side} --bad {start.date} "
            f"(tried: {tried}); give --good, or a larger --walk-limit"
        )
    found = (
        f"the walk found no good nightly {side} --bad {start.date} on the index (tried: {tried})"
    )
    if side == "before":
        return f"{found}; give --good, or --index-url with an index that lists older nightlies"
    return f"{found}; give --good to bisect a known range"
