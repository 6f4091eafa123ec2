"""What a bisection concludes: an `Outcome` per build, the pair around the change, the evidence.

These frozen types travel from the search to the store, the page, `--json` and `--markdown`, so
they sit on the ground floor beside `model` (the rest of the shared vocabulary), not in bisect/.
"""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass
from typing import Any

from packaging.version import InvalidVersion, Version


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
    # A main-branch commit run as an overlay on this nightly's binary (`bisect --pytorch-repo`);
    # "" for the nightly (or release) itself.
    commit: str = ""
    build: str = ""  # the file's PEP 427 build tag ("3" for a re-spin), "" for none
    yanked: str | None = None  # the index had yanked the file: its reason ("" for none given)

    @property
    def named(self) -> str:
        """The build as the text names it: its version, and a re-spin's build tag."""
        return self.version + (f" (build {self.build})" if self.build else "")

    def __post_init__(self) -> None:
        # Read back from JSON (a store, a --json file) the verdict is text: it becomes the enum
        # here, once, so nothing downstream compares strings.
        object.__setattr__(self, "verdict", Outcome(self.verdict))

    @property
    def key(self) -> str:
        """What the user calls it and passes back as --good/--bad/--forget: a commit's short
        sha, a nightly's date, a release's version."""
        return self.commit[:12] or self.date or self.version

    def to_json(self) -> dict[str, Any]:
        data = {**asdict(self), "verdict": self.verdict.value}
        # a nightly's point reads as it did before commits, re-spins and yanks were told apart
        for key, unset in (("commit", ""), ("build", ""), ("yanked", None)):
            if data[key] == unset:
                del data[key]
        return data


@dataclass(frozen=True, kw_only=True)
class BisectResult:
    """The outcome of a bisection: the boundary pair, how exact it is, the evidence, the rerun.

    For a regression the pair is (last good, first bad); with --find-fix, (last bad, first good).
    `before`/`after` are the nearest builds with a verdict on either side of the change, in
    order.  When only unknown builds lie between them the answer is `exact`; otherwise
    `candidates` lists, oldest first, every build that can be the first bad (first fixed) one:
    the unknowns between the pair and `after`.  Candidates are keys (`NightlyPoint.key`: a
    nightly's date, a release's version), so a search over other units (commits) fills the same
    fields with its own keys.
    """

    direction: Direction
    case: str
    cuda: str
    python: str
    before: NightlyPoint | None
    after: NightlyPoint | None
    probes: int  # every run of the probe or script, from the store or now, re-asks included
    points: tuple[NightlyPoint, ...] = ()
    candidates: tuple[str, ...] = ()  # oldest first; exactly one when exact
    # no verdict: tried (install failure, skip, crash ...) or never run (its CUDA not known)
    unknown: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()  # dates between the pair with no nightly on the index
    compare_url: str = ""
    commits: tuple[str, ...] = ()
    rule: str = ""  # how a flaky case becomes "bad", stated in the output
    reproduce: str = ""
    finished: str = ""  # ISO 8601 UTC
    # The same change down to the commit (`bisect --pytorch-repo`): a bisection over the
    # main-branch commits between this one's pair, whose unit is "commit".
    narrowed: BisectResult | None = None

    def __post_init__(self) -> None:
        if not self.candidates and self.after is not None:
            object.__setattr__(self, "candidates", _candidates_of(self))

    @property
    def exact(self) -> bool:
        """One build is the first bad (first fixed) one: the pair is adjacent."""
        return len(self.candidates) == 1

    @property
    def unit(self) -> str:
        """What was bisected, in the user's words: "commit", "nightly" or "release"."""
        ends = [p for p in (self.before, self.after, *self.points) if p is not None]
        if any(p.commit for p in ends):
            return "commit"
        return "nightly" if any(p.date for p in ends) else "release"

    @property
    def yanked(self) -> dict[str, str]:
        """The builds probed whose file the index had yanked, by key, with the reason given."""
        return {p.key: p.yanked for p in self.points if p.yanked is not None}

    @property
    def pair_names(self) -> tuple[str, str]:
        if self.direction is Direction.REGRESSION:
            return "last good", "first bad"
        return "last bad", "first good"

    def to_json(self) -> dict[str, Any]:
        pair = [n.replace(" ", "_") for n in self.pair_names]
        return {
            "direction": self.direction.value,
            "case": self.case,
            "cuda": self.cuda,
            "python": self.python,
            "exact": self.exact,
            "candidates": list(self.candidates),
            pair[0]: self.before.to_json() if self.before else None,
            pair[1]: self.after.to_json() if self.after else None,
            "probes": self.probes,
            "points": [p.to_json() for p in self.points],
            "unknown": list(self.unknown),
            "missing": list(self.missing),
            "yanked": self.yanked,
            "compare_url": self.compare_url,
            "commits": list(self.commits),
            "rule": self.rule,
            "reproduce": self.reproduce,
            "finished": self.finished,
        } | ({"narrowed": self.narrowed.to_json()} if self.narrowed else {})

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BisectResult:
        direction = Direction(data["direction"])
        keys = (
            ("last_good", "first_bad")
            if direction is Direction.REGRESSION
            else ("last_bad", "first_good")
        )

        def point(d: dict[str, Any] | None) -> NightlyPoint | None:
            return NightlyPoint(**d) if d else None

        points = tuple(NightlyPoint(**p) for p in data.get("points", []))
        # Results written before `unknown`/`missing` existed hold one mixed `skipped` list: the
        # points tell which of its dates were tried.
        tried = tuple(p.key for p in points if p.verdict is Outcome.UNKNOWN)
        skipped = tuple(data.get("skipped", []))
        return cls(
            direction=direction,
            case=data["case"],
            cuda=data["cuda"],
            python=data["python"],
            before=point(data.get(keys[0])),
            after=point(data.get(keys[1])),
            probes=int(data["probes"]),
            points=points,
            candidates=tuple(data.get("candidates", ())),
            unknown=tuple(data.get("unknown", tried)),
            missing=tuple(data.get("missing", (d for d in skipped if d not in tried))),
            compare_url=data.get("compare_url", ""),
            commits=tuple(data.get("commits", [])),
            rule=data.get("rule", ""),
            reproduce=data.get("reproduce", ""),
            finished=data.get("finished", ""),
            narrowed=cls.from_json(data["narrowed"]) if data.get("narrowed") else None,
        )


def _candidates_of(result: BisectResult) -> tuple[str, ...]:
    """The unknown points strictly between the pair, then `after`: for results that predate
    the field (and hand-made ones), read from the points."""
    after = result.after
    assert after is not None
    if result.before is None:
        return (after.key,)
    lo, hi = _order(result.before), _order(after)
    between = sorted(
        (p for p in result.points if lo < _order(p) < hi and p.verdict is Outcome.UNKNOWN),
        key=_order,
    )
    return (*dict.fromkeys(p.key for p in between), after.key)


def _order(point: NightlyPoint) -> tuple[str, Version]:
    try:
        return (point.date, Version(point.version))
    except InvalidVersion:
        return (point.date, Version("0"))
