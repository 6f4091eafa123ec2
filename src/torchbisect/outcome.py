"""What a bisection concludes: an `Outcome` per build, the pair around the change, the evidence.

These frozen types travel from the search to the store, the page, `--json` and `--markdown`, so
they sit on the ground floor beside `model` (the rest of the shared vocabulary), not in bisect/.
"""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass
from typing import Any


class Outcome(str, enum.Enum):
    """A bisection's answer for one build, in the user's terms: GOOD is the old behaviour, BAD the
    changed one (affected, for a regression), UNKNOWN says nothing either way."""

    GOOD = "good"
    BAD = "bad"
    UNKNOWN = "unknown"


class Direction(str, enum.Enum):
    REGRESSION = "regression"  # first bad nightly after a good one
    FIX = "fix"  # first good nightly after a bad one (--find-fix)


@dataclass(frozen=True, kw_only=True)
class NightlyPoint:
    """One nightly the bisection looked at, and what it concluded there."""

    date: str  # YYYY-MM-DD
    version: str
    verdict: Outcome
    git_version: str = ""
    main_sha: str = ""  # parsed from "YYYY-MM-DD nightly release (<sha>)"
    stale_fraction: float | None = None
    reason: str = ""  # why unknown, or the case detail

    def __post_init__(self) -> None:
        # Read back from JSON (a store, a --json file) the verdict is text: it becomes the enum
        # here, once, so nothing downstream compares strings.
        object.__setattr__(self, "verdict", Outcome(self.verdict))

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "verdict": self.verdict.value}


@dataclass(frozen=True, kw_only=True)
class BisectResult:
    """The outcome of a bisection: the boundary pair, the evidence and how to reproduce it.

    For a regression the pair is (last good, first bad); with --find-fix, (last bad, first good).
    `before`/`after` are the two neighbouring nightlies around the change, in date order.
    """

    direction: Direction
    case: str
    cuda: str
    python: str
    before: NightlyPoint | None
    after: NightlyPoint | None
    probes: int
    points: tuple[NightlyPoint, ...] = ()
    skipped: tuple[str, ...] = ()  # dates that gave "unknown", with nothing concluded from them
    compare_url: str = ""
    commits: tuple[str, ...] = ()
    rule: str = ""  # how a flaky case becomes "bad", stated in the output
    reproduce: str = ""
    finished: str = ""  # ISO 8601 UTC

    def to_json(self) -> dict[str, Any]:
        pair = ("last_good", "first_bad") if self.direction is Direction.REGRESSION else (
            "last_bad", "first_good")
        return {
            "direction": self.direction.value,
            "case": self.case,
            "cuda": self.cuda,
            "python": self.python,
            pair[0]: self.before.to_json() if self.before else None,
            pair[1]: self.after.to_json() if self.after else None,
            "probes": self.probes,
            "points": [p.to_json() for p in self.points],
            "skipped": list(self.skipped),
            "compare_url": self.compare_url,
            "commits": list(self.commits),
            "rule": self.rule,
            "reproduce": self.reproduce,
            "finished": self.finished,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BisectResult:
        direction = Direction(data["direction"])
        keys = ("last_good", "first_bad") if direction is Direction.REGRESSION else (
            "last_bad", "first_good")
        point = lambda d: NightlyPoint(**d) if d else None  # noqa: E731
        return cls(
            direction=direction,
            case=data["case"],
            cuda=data["cuda"],
            python=data["python"],
            before=point(data.get(keys[0])),
            after=point(data.get(keys[1])),
            probes=int(data["probes"]),
            points=tuple(NightlyPoint(**p) for p in data.get("points", [])),
            skipped=tuple(data.get("skipped", [])),
            compare_url=data.get("compare_url", ""),
            commits=tuple(data.get("commits", [])),
            rule=data.get("rule", ""),
            reproduce=data.get("reproduce", ""),
            finished=data.get("finished", ""),
        )
