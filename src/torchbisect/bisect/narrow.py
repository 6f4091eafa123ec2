"""Down to the commit: after a nightly bisection, bisect the main-branch commits of its pair.

`gitrange` lists the first-parent commits between the two nightlies' main shas and says which
binary can run each; `overlay` runs a commit's Python files on that binary.  The search is the
nightlies' own (`Bisector` over a `CandidateList`), on a list that holds the older nightly itself,
every testable commit, and the newer nightly itself (the newest commit *is* it): so the ends come
from the store, every verdict is a stored run with a cell id of its own (`cells.commit`), and a
rerun reuses them.  Untestable commits (a compiled part no nightly was built from) are never
probed: when the change lies among them the answer is those commits (report/bisection_text says
how to build each from source).  Inert commits (`test/`, `docs/` only) are never probed either,
and never an answer: each has the package of the commit before it, so it takes that verdict;
the answer lists those between the pair as `inert` in its commit lines.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

from .. import cells
from ..backends.base import Backend
from ..outcome import BisectResult, NightlyPoint
from ..utils.clock import now
from .candidates import Candidate, CandidateList
from .commits import compare_url
from .driver import Bisector, with_rule
from .gitrange import Commit, Testable, first_parent_commits, full_sha, plan, python_changes
from .overlay import COMMIT_VAR, OverlayBackend, OverlayPlan
from .search import EndsError, SearchResult
from .verdicts import Rule


@dataclass(frozen=True, kw_only=True)
class Narrowed:
    result: BisectResult | None  # None: it could not start (the notes say why)
    new_runs: int = 0
    notes: tuple[str, ...] = ()


def narrow(
    nightly: BisectResult,
    cands: CandidateList,
    *,
    backend: Backend,
    bisector: Callable[[Backend], Bisector],
    repo: Path,
    workdir: Path,
    repeat: int = 1,
) -> Narrowed:
    """The commit-level bisection between `nightly`'s pair, on overlays of `backend`'s venvs,
    judged by a `bisector(backend)` (the nightly search's rule, store and direction).

    `repeat` > 1 (--script --repeat): the commits that decide the range are asked that many
    times, as the nightly pair was (FlakyScript when the answers differ); the two nightlies
    themselves were asked already, so not again."""
    older, newer = _ends(nightly, cands)
    if older is None or newer is None:
        return Narrowed(
            result=None,
            notes=(
                "no commit bisection: the nightly bisection found "
                "no pair of nightlies to go between",
            ),
        )
    points = {p.key: p for p in (nightly.before, nightly.after) if p}
    shas = [points[c.key].main_sha for c in (older, newer)]
    if not all(shas):
        return Narrowed(
            result=None,
            notes=(
                "no commit bisection: the main-branch sha of a "
                "nightly of the pair is unknown (see above)",
            ),
        )
    old, new = full_sha(repo, shas[0]), full_sha(repo, shas[1])
    commits = first_parent_commits(repo, old, new)
    if not commits:
        return Narrowed(
            result=None,
            notes=(
                f"no commit bisection: {repo} has no first-parent "
                f"commit between {old[:12]} and {new[:12]}",
            ),
        )
    testable = plan(commits)
    untestable = sum(1 for t in testable if not t.on)
    rule = bisector(backend).rule
    items, plans = _search_list(old, older, newer, testable, rule, repo)
    judge = bisector(OverlayBackend(backend, workdir, plans))
    try:
        search = judge.search(CandidateList(candidates=tuple(items)))
    except EndsError as err:
        cand = items[err.index]
        return Narrowed(
            result=None,
            new_runs=judge.new_runs,
            notes=(
                f"no commit bisection: {cand.label} read {err.got.value} here, where the nightly "
                f"bisection's order needs {err.expected.value}",
            ),
        )
    if repeat > 1:
        judge.check_repeats(search, repeat, asked=frozenset({0, len(items) - 1}))
    result = _result(nightly, search, judge.points, commits, testable, old, reasked=judge.reasked)
    inert = sum(1 for t in testable if t.on == "inert")
    told = (
        f"{len(commits)} commits between the pair: {len(commits) - inert - untestable} "
        f"testable on a nightly's binary, {inert} inert (test/ or docs/ only: not probed, "
        f"each takes the verdict of the commit before it), {untestable} not testable (a "
        "compiled part no nightly was built from)"
    )
    return Narrowed(result=result, new_runs=judge.new_runs, notes=(told,))


def _ends(nightly: BisectResult, cands: CandidateList) -> tuple[Candidate | None, ...]:
    """The candidates of the pair, older first (with --find-fix `before` is still older)."""
    by_key = {c.key: c for c in cands.candidates}
    pair = [by_key.get(p.key) if p else None for p in (nightly.before, nightly.after)]
    return tuple(sorted(pair, key=lambda c: c.date if c else "")) if all(pair) else (None, None)


def _search_list(
    old: str,
    older: Candidate,
    newer: Candidate,
    testable: tuple[Testable, ...],
    rule: Rule,
    repo: Path,
) -> tuple[list[Candidate], dict[str, OverlayPlan]]:
    """The older nightly, the testable commits, the newer nightly (= the newest commit)."""
    items = [replace(older, commit=old)]
    plans: dict[str, OverlayPlan] = {}
    for i, t in enumerate(testable):
        if i == len(testable) - 1:
            items.append(replace(newer, commit=t.commit.sha))
        elif t.probed:
            base = older if t.on == "older" else newer
            base_sha = old if t.on == "older" else testable[-1].commit.sha
            cell = replace(
                base.cell,
                id=cells.commit(t.commit.sha, base.cell.id),
                env=tuple(sorted({**dict(base.cell.env), COMMIT_VAR: t.commit.sha}.items())),
            )
            ruled = with_rule(replace(base, cell=cell, commit=t.commit.sha), rule)
            plans[ruled.cell.id] = OverlayPlan(
                base=with_rule(base, rule).cell,
                commit=t.commit.sha,
                tree=partial(python_changes, repo, base_sha, t.commit.sha),
            )
            items.append(ruled)
    return items, plans


def _result(
    nightly: BisectResult,
    search: SearchResult,
    points: dict[int, NightlyPoint],
    commits: tuple[Commit, ...],
    testable: tuple[Testable, ...],
    old: str,
    *,
    reasked: int = 0,
) -> BisectResult:
    """The commit-level result: keys are short shas; `missing` holds the untestable commits
    between the pair (no binary), `unknown` the tried ones without a verdict; the probes count
    --repeat's `reasked` runs too.  Inert commits between the pair are in `commits` (kind
    "inert"), never among the candidates: they took the verdict of the commit before them."""
    order = [old, *(c.sha for c in commits)]
    where = {sha: i for i, sha in enumerate(order)}
    done = {i: replace(p, main_sha=p.commit) for i, p in points.items()}
    before, after = done[search.last_good], done[search.first_bad]
    between = order[where[before.commit] + 1 : where[after.commit]]
    untestable = {t.commit.sha for t in testable if not t.on}
    inert = {t.commit.sha for t in testable if t.on == "inert"}
    by_sha = {c.sha: c for c in commits}
    chosen = [*between, after.commit]
    return BisectResult(
        direction=nightly.direction,
        case=nightly.case,
        cuda=nightly.cuda,
        python=nightly.python,
        before=before,
        after=after,
        probes=search.probes + reasked,
        points=tuple(done[i] for i in sorted(done)),
        candidates=tuple(sha[:12] for sha in chosen if sha not in inert),
        unknown=tuple(done[i].key for i in search.unknown),
        missing=tuple(sha[:12] for sha in between if sha in untestable),
        compare_url=compare_url(before.commit, after.commit),
        commits=tuple(f"{sha} {by_sha[sha].kind} {by_sha[sha].subject}" for sha in chosen),
        rule=nightly.rule,
        reproduce=nightly.reproduce,
        finished=now(timespec="seconds"),
    )
