"""The bisection search itself: a pure function over indexes 0..n-1 and a three-valued verdict.

Nothing here fetches, installs, probes or prints.  The caller hands in `verdict_of(index)` and,
optionally, a `SearchHandler` that hears about each step (the CLI prints from it; the driver uses
it to prefetch the next candidates).  GOOD means "the old behaviour" and BAD "the changed one";
`--find-fix` is the same search with the caller's mapping flipped (`flip`).

Unknown is never taken as bad: the search steps to the untested index nearest the midpoint and, when
only unknowns separate a good from a bad index, reports them as the range the change lies in.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass

from ..errors import TorchbisectError
from ..exits import Exit
from ..outcome import Outcome

__all__ = ["Outcome", "SearchHandler", "SearchResult", "first_bad", "flip"]


def flip(outcome: Outcome) -> Outcome:
    """GOOD <-> BAD, UNKNOWN stays: turns a fix search into a first-bad search."""
    swap = {Outcome.GOOD: Outcome.BAD, Outcome.BAD: Outcome.GOOD}
    return swap.get(outcome, outcome)


class SearchError(TorchbisectError):
    """The search cannot start: too few candidates, or an end does not have the expected verdict."""

    exit_code = Exit.MISTAKE


class EndsError(SearchError):
    """An end of the range gave the wrong verdict; the driver rewords it with dates and flags."""

    def __init__(self, *, index: int, expected: Outcome, got: Outcome):
        self.index = index
        self.expected = expected
        self.got = got
        super().__init__(f"index {index} should be {expected.value} but is {got.value}")


@dataclass(frozen=True, kw_only=True)
class SearchResult:
    """The boundary pair and every verdict the search asked for, in asking order."""

    n: int
    last_good: int
    first_bad: int
    asked: tuple[tuple[int, Outcome], ...]

    @property
    def unknown_between(self) -> tuple[int, ...]:
        """Indexes between the pair: all UNKNOWN, so the change lies somewhere among them."""
        return tuple(range(self.last_good + 1, self.first_bad))

    @property
    def candidates(self) -> tuple[int, ...]:
        """Every index that can be the first BAD one: the unknowns between the pair, then
        `first_bad`.  One index exactly when the search is exact."""
        return (*self.unknown_between, self.first_bad)

    @property
    def exact(self) -> bool:
        return self.first_bad == self.last_good + 1

    @property
    def probes(self) -> int:
        return len(self.asked)

    @property
    def unknown(self) -> tuple[int, ...]:
        """Every index that answered UNKNOWN, in index order (inside the pair or not)."""
        return tuple(sorted(i for i, o in self.asked if o is Outcome.UNKNOWN))


class SearchHandler:
    """Callbacks for each step; the default does nothing.  Printing lives in subclasses."""

    def probing(self, index: int, *, lo: int | None, hi: int | None, then: tuple[int, ...]) -> None:
        """About to ask `index`; `then` are the indexes the search asks next (good, bad)."""

    def probed(self, index: int, outcome: Outcome, *, lo: int | None, hi: int | None) -> None:
        """`index` answered `outcome`; `lo`/`hi` are the known good/bad indexes before it."""

    def finished(self, result: SearchResult) -> None:
        """The search is over."""


def first_bad(
    n: int,
    verdict_of: Callable[[int], Outcome],
    *,
    handler: SearchHandler | None = None,
    cheap: Collection[int] = (),
) -> SearchResult:
    """Find adjacent known-good and known-bad indexes in 0..n-1 (index 0 GOOD, n-1 BAD).

    Each index is asked at most once.  Without unknowns it asks at most ceil(log2 n) + 2 indexes
    that are not `cheap`.  `cheap` indexes (verdicts already stored by an earlier, interrupted
    run) are asked first whenever they lie between the known ends: they can only narrow the range.
    Raises EndsError when an end has the wrong verdict (UNKNOWN included).
    """
    if n < 2:
        raise SearchError(f"a bisection needs at least two candidates, got {n}")
    handler = handler or SearchHandler()
    asked: dict[int, Outcome] = {}

    def ask(index: int, lo: int | None, hi: int | None, then: tuple[int | None, ...]) -> Outcome:
        handler.probing(index, lo=lo, hi=hi, then=tuple(t for t in then if t is not None))
        outcome = Outcome(verdict_of(index))
        asked[index] = outcome
        handler.probed(index, outcome, lo=lo, hi=hi)
        return outcome

    cheap = frozenset(cheap)
    mid = _next(0, n - 1, {0, n - 1}, cheap)
    _check_end(0, ask(0, None, None, (n - 1, mid)), Outcome.GOOD)
    _check_end(n - 1, ask(n - 1, 0, None, (mid,)), Outcome.BAD)
    lo, hi = 0, n - 1
    while (index := _next(lo, hi, asked, cheap)) is not None:
        tested = {*asked, index}
        then = (_next(index, hi, tested, cheap), _next(lo, index, tested, cheap))
        outcome = ask(index, lo, hi, then)
        if outcome is Outcome.GOOD:
            lo = index
        elif outcome is Outcome.BAD:
            hi = index
    result = SearchResult(n=n, last_good=lo, first_bad=hi, asked=tuple(asked.items()))
    handler.finished(result)
    return result


def _check_end(index: int, got: Outcome, expected: Outcome) -> None:
    if got is not expected:
        raise EndsError(index=index, expected=expected, got=got)


def _next(lo: int, hi: int, tested: Collection[int], cheap: frozenset[int]) -> int | None:
    """The untested index strictly between lo and hi nearest their midpoint (lower on a tie),
    taking a cheap one first when there is any."""
    mid = (lo + hi) // 2
    open_ = [i for i in range(lo + 1, hi) if i not in tested]
    free = [i for i in open_ if i in cheap]
    pool = free or open_
    return min(pool, key=lambda i: (abs(i - mid), i)) if pool else None
