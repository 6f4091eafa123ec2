"""From a finished search to a `BisectResult`: the pair, its commits, the evidence, the rerun line.

The main-branch shas are looked up only for the two nightlies of the pair; a failed lookup leaves
them empty and the caller is told why (through `notes`), never a guessed sha.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, replace

from packaging.version import InvalidVersion, Version

from ..outcome import BisectResult, Direction, NightlyPoint, Outcome
from ..utils.clock import now
from .candidates import CandidateList, release_of
from .commits import CommitLookup, compare_url, is_sha
from .search import SearchResult


@dataclass(frozen=True, kw_only=True)
class Context:
    """What the result states besides the search: the settings, to report and to rerun."""

    direction: Direction
    case: str
    cuda: str
    python: str
    rule: str
    rerun_flags: tuple[str, ...] = ()  # the flags after --good/--bad that reproduce the verdicts


def build_result(
    search: SearchResult,
    points: dict[int, NightlyPoint],
    cands: CandidateList,
    ctx: Context,
    lookup: CommitLookup,
    *,
    extra_probes: int = 0,
    extra_points: tuple[NightlyPoint, ...] = (),
) -> tuple[BisectResult, list[str]]:
    """`extra_probes`: verdicts besides the search's own (--repeat's re-asks, the walk to an
    end); `extra_points`: the walk's verdicts, kept with the search's."""
    notes: list[str] = []
    before = _with_main_sha(points[search.last_good], lookup, notes)
    after = _with_main_sha(points[search.first_bad], lookup, notes)
    # a release is passed back as its public version: `--good 2.11.0` finds its file again
    first, last = (p.date or release_of(p.version) or p.version for p in (before, after))
    url = compare_url(before.main_sha, after.main_sha) if before.main_sha and after.main_sha else ""
    if not url:
        notes.append("no compare URL: the main-branch sha of an end is unknown")
    known = dict(points)
    known[search.last_good], known[search.first_bad] = before, after
    result = BisectResult(
        direction=ctx.direction,
        case=ctx.case,
        cuda=ctx.cuda,
        python=ctx.python,
        before=before,
        after=after,
        probes=search.probes + extra_probes,
        points=_merged([known[i] for i in sorted(known)], extra_points),
        candidates=tuple(points[i].key for i in search.candidates),
        unknown=tuple(
            p.key
            for p in _merged([points[i] for i in search.unknown], extra_points)
            if p.verdict is Outcome.UNKNOWN
        ),
        missing=tuple(d for d in cands.missing if _between(first, d, last)),
        compare_url=url,
        commits=lookup.commits_between(before.main_sha, after.main_sha),
        rule=ctx.rule,
        reproduce=reproduce_line(first, last, ctx),
        finished=now(timespec="seconds"),
    )
    return result, notes


def _between(first: str, key: str, last: str) -> bool:
    """Dates compare as text; releases as versions (2.9.1 comes before 2.10.0)."""
    try:
        return Version(first) < Version(key) < Version(last)
    except InvalidVersion:
        return first < key < last


def reproduce_line(before: str, after: str, ctx: Context) -> str:
    """The command that re-judges exactly the two nightlies of the pair."""
    good, bad = (before, after) if ctx.direction is Direction.REGRESSION else (after, before)
    fix = ("--find-fix",) if ctx.direction is Direction.FIX else ()
    argv = ["torchbisect", "bisect", "--good", good, "--bad", bad, *fix, *ctx.rerun_flags]
    return shlex.join(argv)


def _with_main_sha(point: NightlyPoint, lookup: CommitLookup, notes: list[str]) -> NightlyPoint:
    if not point.date:  # a release: its git_version is a commit of pytorch/pytorch already
        if is_sha(point.git_version):
            return replace(point, main_sha=point.git_version)
        # a build from a tree without git says "Unknown"; a hand-made wheel may say anything
        if point.git_version:
            notes.append(
                f"{point.named}: torch.version.git_version is not a commit sha "
                f"({point.git_version[:60]!r})"
            )
        return replace(point, main_sha="")
    found = lookup.main_sha(point.git_version)
    if not found.sha:
        notes.append(f"main-branch sha of the {point.date} nightly unknown: {found.note}")
    return replace(point, main_sha=found.sha)


def _merged(
    points: list[NightlyPoint], extra: tuple[NightlyPoint, ...]
) -> tuple[NightlyPoint, ...]:
    """The search's points and the walk's (nightlies: by date), one per build (the search's
    when both have it)."""
    if not extra:
        return tuple(points)
    by_key = {p.key: p for p in extra} | {p.key: p for p in points}
    return tuple(by_key[k] for k in sorted(by_key))
