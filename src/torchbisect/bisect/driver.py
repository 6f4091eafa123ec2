"""Runs a bisection: candidates from the index, a verdict per candidate, the search, the result.

The search (`search.first_bad`) only sees indexes.  This module gives it `verdict_of(index)`: reuse
a stored run of that nightly when the store has one (so a killed bisection resumes where it
stopped, and a matrix run of the same wheel answers too: `reuse.covers` is the rule), else
install the nightly with the backend and run the probe, store the run, and judge it with the stated
rule.  A `--script` is a probe like any other (probes/script.py runs it), so `execute` turns
whatever happens into a run here as for the matrix, on every backend.  While one candidate is
probed, the two candidates the search may ask next are prepared in background threads.  A
candidate that cannot be judged (a release whose CUDA is not known) is unknown without a run.

`repeat` (--script --repeat N): every verdict the search (or the walk) gets from a run made now
is asked N times on the same install, stopping at the first different answer (FlakyScript, with
the counts), so an early wrong answer of a flaky script cannot steer the search to a pair that
then answers consistently; the two candidates that decide the range are asked N - 1 times more
(`check_repeats`), which also covers a pair whose verdicts came from the store.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..backends.base import Backend
from ..backends.wheels import local_wheel, sha256_file
from ..model import Cell, CellRun, RunStatus
from ..outcome import Direction, NightlyPoint, Outcome
from ..probe.scripts import probe_version
from ..run import execute
from ..store.db import Store
from ..store.repeats import plain_answer
from ..utils.clock import now
from ..utils.gpus import Gpu
from .candidates import Candidate, CandidateList
from .search import SearchHandler, SearchResult, first_bad, flip
from .verdicts import FlakyScript, Judged, Rule, check_script_run


class Progress:
    """What the bisection tells its user, step by step; the default stays silent."""

    def note(self, text: str) -> None:
        """Something the user should know (a widened end, a failed commit lookup)."""

    def start(self, cands: CandidateList, *, rule: str, stored: int) -> None:
        """The search begins over `cands`; `stored` of them already have a reusable verdict."""

    def probing(self, cand: Candidate, *, left: int) -> None:
        """About to judge `cand`; `left` candidates are still open between the known ends."""

    def judged(self, cand: Candidate, point: NightlyPoint, *, reused: bool) -> None:
        """`cand` got its verdict, from a new run or (`reused`) from the store."""


class Bisector:
    """One bisection over a candidate list, with its backend, store, rule and direction."""

    def __init__(
        self,
        *,
        backend: Backend,
        store: Store,
        rule: Rule,
        direction: Direction,
        logs: Path,
        gpu: Gpu | None = None,
        progress: Progress | None = None,
        repeat: int = 1,
    ):
        self.backend = backend
        self.store = store
        self.rule = rule
        self.direction = direction
        self.logs = logs
        self.gpu = gpu
        self.progress = progress or Progress()
        self.repeat = repeat
        self.probe_version = probe_version(rule.probe_name)
        self.new_runs = 0  # runs made now, --repeat's re-asks included
        self.reasked = 0  # of those, re-asks: runs the search itself did not ask for
        self._answers: dict[str, list[Outcome]] = {}  # --repeat: each candidate's answers so far
        self.points: dict[int, NightlyPoint] = {}
        self._cands: tuple[Candidate, ...] = ()
        self._stored: dict[str, CellRun] = {}
        self._keys: dict[str, dict[str, Any]] = {}  # _reuse_key's, by cell id
        self._futures: dict[int, Future[execute.Staged | CellRun]] = {}
        self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="prefetch")

    def search(self, cands: CandidateList) -> SearchResult:
        self._cands = tuple(with_rule(c, self.rule) for c in cands.candidates)
        self._stored = self._reusable_runs()
        self.progress.start(cands, rule=self.rule.describe(), stored=len(self._stored))
        try:
            stored = {i for i, c in enumerate(self._cands) if c.cell.id in self._stored}
            return first_bad(len(self._cands), self._verdict_of, handler=_Steps(self), cheap=stored)
        finally:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._release_unused()

    def judge(self, cand: Candidate) -> NightlyPoint:
        """One candidate outside a search (the walk to a missing end): its stored verdict, or
        a run now, stored.  Counted in `new_runs` when run now."""
        cell = with_rule(cand, self.rule).cell
        run = self._stored_run(cell)
        reused = run is not None
        if run is not None:
            self._check_stored(with_rule(cand, self.rule))
        else:
            run = execute.run_cell(self.backend, cell, gpu=self.gpu, logs_dir=self.logs)
            check_script_run(run, self.rule)  # a script asking to stop: nothing stored
            self._confirm(
                cand,
                run,
                lambda: execute.run_cell(self.backend, cell, gpu=self.gpu, logs_dir=self.logs),
            )
            self.store.add(run)
            self.new_runs += 1
        point = _point(cand, self.rule.judge(run))
        self.progress.judged(cand, point, reused=reused)
        return point

    def prefetch(self, indexes: Sequence[int]) -> None:
        for index in indexes:
            cand = self._cands[index]
            if cand.cell.id not in self._stored and not cand.unjudged:
                self._future(index)

    def _release_unused(self) -> None:
        """Prefetched installs the search never asked for: release them once they finish."""
        for index, future in self._futures.items():
            if index not in self.points:
                future.add_done_callback(self._release_done)

    def _release_done(self, future: Future[execute.Staged | CellRun]) -> None:
        if future.cancelled() or future.exception() is not None:
            return
        staged = future.result()
        if isinstance(staged, execute.Staged):
            execute.release(self.backend, staged.prepared, log=self._log(staged.cell.id))

    def reask(self, index: int, times: int) -> list[Outcome]:
        """Run the candidate `times` more times; its answers (for --script --repeat).

        Each is stored, as every measured run is: a later bisection (or the page) that finds
        them answering two ways knows the build is flaky, whatever its own --repeat.
        """
        cell = self._cands[index].cell
        answers = []
        for _ in range(times):
            run = execute.run_cell(self.backend, cell, gpu=self.gpu, logs_dir=self.logs)
            self.new_runs += 1
            self.reasked += 1
            check_script_run(run, self.rule)
            self.store.add(run)
            answers.append(self.rule.judge(run).verdict)
        return answers

    def check_repeats(
        self, search: SearchResult, repeat: int, *, asked: frozenset[int] = frozenset()
    ) -> None:
        """--repeat: ask the script `repeat - 1` more times at the two candidates that decide
        the range (but those in `asked`, already re-asked); one different answer and the range is
        not reported, as if it were known: FlakyScript names the candidate and its answers."""
        for index in (search.last_good, search.first_bad):
            point = self.points.get(index)
            if point is None or index in asked:
                continue
            # every answer this candidate gave: those `_confirm` asked already count too
            before = self._answers.get(self._cands[index].key, [point.verdict])
            answers = [*before, *self.reask(index, repeat - 1)]
            if len(set(answers)) > 1:
                raise self._flaky(self._cands[index], answers, f"--repeat {repeat}")

    def _confirm(self, cand: Candidate, run: CellRun, again: Callable[[], CellRun]) -> None:
        """--repeat N: ask a verdict just run N - 1 more times (`again`), stopping at the first
        different answer.  `run` and each re-ask are stored as they come (its caller's store of
        `run` then finds it there): the store keeps what was measured.  A run that gave no
        answer (an install or import failure) is not asked again: there is nothing to confirm."""
        if self.repeat < 2 or run.status is not RunStatus.OK:
            return
        answers = self._answers[cand.key] = [self.rule.judge(run).verdict]
        self.store.add(run)  # first: whatever a re-ask ends in, the answers before it are kept
        for _ in range(self.repeat - 1):
            more = again()
            self.new_runs += 1
            self.reasked += 1
            check_script_run(more, self.rule)
            self.store.add(more)
            answers.append(self.rule.judge(more).verdict)
            if answers[-1] is not answers[0]:
                raise self._flaky(cand, answers, f"--repeat {self.repeat}")

    def _check_stored(self, cand: Candidate) -> None:
        """A build whose stored runs of this script (every one the reuse rule lets answer for
        it) answered two ways is flaky, as it was when they were measured: a later bisection
        with a smaller --repeat must not take one of its answers for the build's."""
        runs = self.store.answering(cand.cell, **self._reuse_key(cand.cell))
        answers = [self.rule.judge(r).verdict for r in runs if plain_answer(r) is not None]
        if len(set(answers)) > 1:
            raise self._flaky(cand, answers, "kept in the store")

    def _flaky(self, cand: Candidate, answers: list[Outcome], how: str) -> FlakyScript:
        counts = ", ".join(f"{a.value} {answers.count(a)}×" for a in dict.fromkeys(answers))
        first = "first bad" if self.direction is Direction.REGRESSION else "first fixed"
        unit = "commit" if cand.commit else "nightly" if cand.date else "release"
        return FlakyScript(
            f"--script is flaky: on {cand.label} it answered {counts} in {len(answers)} runs "
            f"({how}), so no {first} {unit} can be trusted; make the script decide "
            "the same way every time (e.g. count affected trials inside it) and run again",
            build=cand.key,
        )

    def _verdict_of(self, index: int) -> Outcome:
        cand = self._cands[index]
        if cand.unjudged:  # its CUDA is not known: unknown, without a run (candidates.py)
            self.points[index] = _point(cand, Judged(verdict=Outcome.UNKNOWN, reason=cand.unjudged))
            self.progress.note(f"{cand.key} is UNKNOWN, not probed: {cand.unjudged}")
            return Outcome.UNKNOWN
        run = self._stored.get(cand.cell.id)
        reused = run is not None
        if run is not None:
            self._check_stored(cand)
        else:
            run = self._run(index)
            self.store.add(run)
            self.new_runs += 1
        judged = self.rule.judge(run)
        point = _point(cand, judged)
        self.points[index] = point
        self.progress.judged(cand, point, reused=reused)
        return flip(point.verdict) if self.direction is Direction.FIX else point.verdict

    def _future(self, index: int) -> Future[execute.Staged | CellRun]:
        if index not in self._futures:
            cell = self._cands[index].cell
            self._futures[index] = self._pool.submit(
                execute.prepare, self.backend, cell, log=self._log(cell.id), gpu=self.gpu
            )
        return self._futures[index]

    def _run(self, index: int) -> CellRun:
        """Install (or take the prefetched install), then probe; never raises for an
        infrastructure failure: that comes back as an INFRA_FAILURE run."""
        staged = self._future(index).result()
        if isinstance(staged, CellRun):
            return staged
        log = self._log(staged.cell.id)
        try:
            run = execute.probe(self.backend, staged, gpu=self.gpu, log=log)
            check_script_run(run, self.rule)  # a script asking to stop: nothing stored
            # --repeat's answers on the same install: an overlay is made once, not N times;
            # each is a run of its own, stored under the moment it began
            self._confirm(
                self._cands[index],
                run,
                lambda: execute.probe(
                    self.backend, replace(staged, started=now()), gpu=self.gpu, log=log
                ),
            )
        finally:
            execute.release(self.backend, staged.prepared, log=log)
        return run

    def _reusable_runs(self) -> dict[str, CellRun]:
        """The stored run that answers for each candidate (`Store.find_ok`, the matrix's lookup
        too), by candidate id.  A candidate's bytes are known before installing when the index
        published their sha256 (nightlies' do not) or the wheel is a file here (hashed, where the
        store has a run of it): otherwise its URL names them, a nightly's alone."""
        found = {cand.cell.id: self._stored_run(cand.cell) for cand in self._cands}
        return {cell_id: run for cell_id, run in found.items() if run is not None}

    def _stored_run(self, cell: Cell) -> CellRun | None:
        return self.store.find_ok(cell, **self._reuse_key(cell))

    def _reuse_key(self, cell: Cell) -> dict[str, Any]:
        """What a stored run must match to answer for `cell` (`Store.find_ok`'s key), worked
        out once per candidate: a local wheel is hashed once, not again when it is asked."""
        key = self._keys.get(cell.id)
        if key is None:
            key = self._keys[cell.id] = {
                "wheel_sha256": cell.sha256 or self._local_sha256(cell),
                "probe_version": self.probe_version,
                "gpu": execute.gpu_name(self.gpu),
                "driver": self.gpu.driver if self.gpu else "",
            }
        return key

    def _local_sha256(self, cell: Cell) -> str | None:
        """A wheel file on this host (a folder of wheels as the index) names its bytes by its
        sha256, as the matrix's plan takes it: hashed only where the store holds a run of that
        file's path, the one case it can answer (a resumed or repeated bisection)."""
        path = local_wheel(cell)
        if path is None or cell.url is None or not self.store.has_run_of_url(cell.url):
            return None
        try:
            return sha256_file(path)
        except OSError:
            return None  # gone or unreadable: its install says why

    def _log(self, cell_id: str) -> Path:
        return self.logs / f"{cell_id}.log"  # the matrix's name: one log per cell, latest run


class _Steps(SearchHandler):
    """Turns the search's index-level callbacks into prefetches and candidate-level progress."""

    def __init__(self, bisector: Bisector):
        self.b = bisector

    def probing(self, index: int, *, lo: int | None, hi: int | None, then: tuple[int, ...]) -> None:
        # the candidate asked now first: submitted after `then`, its install waited in the
        # pool's queue behind both of theirs (the first of a search, and any not prefetched)
        self.b.prefetch((index, *then))
        if self.b._cands[index].unjudged:
            return  # nothing is judged: _verdict_of says why
        lo = -1 if lo is None else lo
        hi = len(self.b._cands) if hi is None else hi
        self.b.progress.probing(self.b._cands[index], left=max(hi - lo - 1, 0))


def with_rule(cand: Candidate, rule: Rule) -> Candidate:
    """The candidate with what the rule puts in the probe's environment (a --script's command)."""
    env = dict(cand.cell.env) | dict(rule.env)
    if env == dict(cand.cell.env):
        return cand
    cell = replace(cand.cell, env=tuple(sorted(env.items())))
    return replace(cand, cell=cell)


def _point(cand: Candidate, judged: Judged) -> NightlyPoint:
    return NightlyPoint(
        date=cand.date,
        version=cand.version,
        verdict=judged.verdict,
        git_version=judged.git_version,
        stale_fraction=judged.stale_fraction,
        reason=judged.reason,
        commit=cand.commit,
        build=cand.build,
        yanked=cand.yanked,
    )
