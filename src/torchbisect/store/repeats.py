"""A plain script measured more than once on one build, whose answers differ: flaky, with its rate.

An exit-status script (or a `bisect --script`) has one case and no trials of its own: the only
way it shows a race is by answering differently when the same build is asked again (`matrix
--force`, a rerun after a fix of the harness, a bisection that judged the same wheel).  The
store keeps every run; the pages draw the newest of each cell, which alone would show whichever
answer came last, and a build affected on six runs of seven would read "not affected".

`latest_with_repeats` (`Store.latest_counted`) gives the pages the newest run of each cell as
before, except where the store holds other runs of the same build, probe file, settings, GPU
model and driver whose answers (affected, not affected) differ from each other: that run is
drawn affected and flaky, its case counting the runs (`stale_trials` of `trials`, the page saying
"runs"), its detail saying how many were affected.  Nothing stored changes; a merge or an export
still carries the runs as measured.  A document probe (its own cases, trials and rates) is left
as it is: what its runs mean is its own to say.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from ..model import CaseResult, CellRun, RunStatus, Verdict
from .reuse import env_key

UNIT = "runs"  # what a folded case counts, as the page says it (page/rows.py)
_ANSWERS = (Verdict.AFFECTED, Verdict.NOT_AFFECTED)

Key = tuple[str, ...]


def latest_with_repeats(latest: list[CellRun], history: Iterable[CellRun]) -> list[CellRun]:
    """`latest` (the newest run of each cell), each one whose build answered both ways over
    `history` (every stored run) folded into a flaky run with its count."""
    counts: dict[Key, Counter[Verdict]] = {}
    for run in history:
        answer = plain_answer(run)
        if answer is not None:
            counts.setdefault(_key(run), Counter())[answer] += 1
    return [_folded(run, counts.get(_key(run))) for run in latest]


def _key(run: CellRun) -> Key:
    """The same question asked of the same build: its settings too (the reuse rule's), so runs
    under an `env:` since changed are not taken for the same script answering two ways."""
    cell = run.cell
    asked = repr((env_key(cell), cell.overlay, cell.cases, cell.trials))
    return (cell.id, cell.probe, run.gpu, run.driver, run.wheel_sha256, run.probe_version, asked)


def plain_answer(run: CellRun) -> Verdict | None:
    """The one case's answer of a plain script's run (the adapter records its `exit_status`);
    None for any other run: a document probe says what its own runs mean."""
    if run.status is not RunStatus.OK or run.result is None or len(run.result.cases) != 1:
        return None
    case = run.result.cases[0]
    cases = run.result.raw.get("cases")
    raw = cases.get(case.name) if isinstance(cases, dict) else None
    if not isinstance(raw, dict) or "exit_status" not in raw or case.trials is not None:
        return None
    return case.verdict if case.verdict in _ANSWERS else None


def _folded(run: CellRun, seen: Counter[Verdict] | None) -> CellRun:
    if seen is None or plain_answer(run) is None or len(seen) < 2 or run.result is None:
        return run
    bad, runs = seen[Verdict.AFFECTED], sum(seen.values())
    case = run.result.cases[0]
    said = f"affected on {bad} of {runs} runs of this build, not affected on {runs - bad}"
    folded = CaseResult(
        name=case.name,
        verdict=Verdict.AFFECTED,
        detail=f"{said}; the newest said: {case.detail}" if case.detail else said,
        seconds=case.seconds,
        stale_trials=bad,
        trials=runs,
    )
    raw: dict[str, Any] = dict(run.result.raw)
    cases = raw.get("cases")
    mine = cases.get(case.name) if isinstance(cases, dict) else None
    raw["cases"] = {case.name: {**(mine if isinstance(mine, dict) else {}), "counted": UNIT}}
    result = replace(run.result, verdict=Verdict.AFFECTED, cases=(folded,), raw=raw)
    return replace(run, result=result)
