"""Runs a bisection: candidates from the index, a verdict per candidate, the search, the result.

The search (`search.first_bad`) only sees indexes.  This module gives it `verdict_of(index)`: reuse
a stored run of that nightly when the store has one (so a killed bisection resumes where it
stopped), else install the nightly with the backend and run the probe or the user's `--script`,
store the run, and judge it with the stated rule.  While one candidate is probed, the two
candidates the search may ask next are prepared in background threads.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from .. import execute, proc
from ..backends.base import Backend, Prepared
from ..errors import CommandFailed, ConfigError
from ..gpus import Gpu
from ..model import (
    PROBE_SCHEMA,
    CellRun,
    Direction,
    NightlyPoint,
    ProbeResult,
    RunStatus,
    Verdict,
)
from .candidates import Candidate, CandidateList
from .search import Outcome, SearchHandler, SearchResult, first_bad, flip
from .verdicts import SCRIPT_CASE, Judged, Rule, script_verdict

_GIT_VERSION = "import torch; print(torch.version.git_version)"


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

    def __init__(self, *, backend: Backend, store: Any, rule: Rule, direction: Direction,
                 logs: Path, gpu: Gpu | None = None, progress: Progress | None = None):
        self.backend = backend
        self.store = store
        self.rule = rule
        self.direction = direction
        self.logs = logs
        self.gpu = gpu
        self.progress = progress or Progress()
        self.probe_version = _probe_version(rule)
        self.new_runs = 0
        self.points: dict[int, NightlyPoint] = {}
        self._cands: tuple[Candidate, ...] = ()
        self._stored: dict[str, CellRun] = {}
        self._futures: dict[int, Future[execute.Staged | CellRun]] = {}
        self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="prefetch")

    def search(self, cands: CandidateList) -> SearchResult:
        self._cands = cands.candidates
        self._stored = self._reusable_runs()
        self.progress.start(cands, rule=self.rule.describe(), stored=len(self._stored))
        try:
            stored = {i for i, c in enumerate(self._cands) if c.cell.id in self._stored}
            return first_bad(len(self._cands), self._verdict_of, handler=_Steps(self),
                             cheap=stored)
        finally:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._release_unused()

    def prefetch(self, indexes: Sequence[int]) -> None:
        for index in indexes:
            if self._cands[index].cell.id not in self._stored:
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
        """Run the --script `times` more times on one candidate; its answers (good/bad/unknown).

        Not stored: they only check that the answer the search used is the script's only one.
        """
        cand, answers = self._cands[index], []
        for _ in range(times):
            staged = execute.prepare(self.backend, cand.cell, log=self._log(cand.cell.id),
                                     gpu=self.gpu)
            if isinstance(staged, CellRun):
                answers.append(self.rule.judge(staged).verdict)
                continue
            try:
                run = self._script_run(cand, staged.prepared, staged.started)
            finally:
                execute.release(self.backend, staged.prepared, log=self._log(cand.cell.id))
            answers.append(self.rule.judge(run).verdict)
        return answers

    def _verdict_of(self, index: int) -> Outcome:
        cand = self._cands[index]
        run = self._stored.get(cand.cell.id)
        reused = run is not None
        if run is None:
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
                execute.prepare, self.backend, cell, log=self._log(cell.id), gpu=self.gpu)
        return self._futures[index]

    def _run(self, index: int) -> CellRun:
        """Install (or take the prefetched install), then probe or run the script; never raises
        for an infrastructure failure: that comes back as an INFRA_FAILURE run."""
        cand = self._cands[index]
        staged = self._future(index).result()
        if isinstance(staged, CellRun):
            return staged
        log = self._log(cand.cell.id)
        try:
            if self.rule.script is not None:
                return self._script_run(cand, staged.prepared, staged.started)
            return execute.probe(self.backend, staged, gpu=self.gpu, log=log)
        finally:
            execute.release(self.backend, staged.prepared, log=log)

    def _script_run(self, cand: Candidate, prepared: Prepared, started: str) -> CellRun:
        env = _script_env(cand, prepared)
        log = self._log(cand.cell.id)
        git_version = _git_version(prepared, env, log)
        command = self.rule.script or ""
        try:
            done = proc.run(["/bin/sh", "-c", command], env=env, timeout=cand.cell.timeout,
                            log=log, check=False)
        except CommandFailed as err:  # with check=False only a timeout gets here
            verdict, detail, seconds, excerpt = Verdict.TIMEOUT, str(err), cand.cell.timeout, ""
        else:
            verdict = script_verdict(done.returncode, command)
            detail, seconds, excerpt = f"exit {done.returncode}", done.seconds, done.output
        # The same document shape as the probe's, so the store keeps it whole and reads it back.
        doc = {"schema": PROBE_SCHEMA, "probe": cand.cell.probe, "verdict": verdict.value,
               "probe_version": self.probe_version,
               "cases": {SCRIPT_CASE: {"verdict": verdict.value, "detail": detail,
                                       "seconds": seconds}},
               "env": {"git_version": git_version, "torch_version": cand.version}}
        result = ProbeResult.from_json(doc)
        return self._cell_run(cand, prepared, started, result=result, seconds=seconds,
                              log_excerpt=excerpt[-2000:])

    def _cell_run(self, cand: Candidate, prepared: Prepared, started: str, *,
                  result: ProbeResult, seconds: float, log_excerpt: str) -> CellRun:
        return CellRun(
            cell=cand.cell, status=RunStatus.OK, result=result,
            wheel_sha256=prepared.wheel_sha256, probe_version=self.probe_version,
            gpu=execute.gpu_name(self.gpu), driver=self.gpu.driver if self.gpu else "",
            backend=self.backend.name, started=started,
            seconds_install=prepared.seconds_install, seconds_probe=seconds,
            log_excerpt=log_excerpt)

    def _reusable_runs(self) -> dict[str, CellRun]:
        """The newest stored OK run of each candidate made by this probe (or script) on this GPU."""
        wanted = {c.cell.id: c.cell for c in self._cands}
        found: dict[str, CellRun] = {}
        for run in sorted(self.store.runs(), key=lambda r: (r.started, r.run_id or 0)):
            cell = wanted.get(run.cell.id)
            if cell is not None and self._usable(run, cell):
                found[run.cell.id] = run
        return found

    def _usable(self, run: CellRun, cell) -> bool:
        if run.status is not RunStatus.OK or run.result is None:
            return False
        if run.cell.probe != cell.probe or run.probe_version != self.probe_version:
            return False
        if run.gpu != execute.gpu_name(self.gpu) or run.cell.version != cell.version:
            return False
        case = run.result.case(self.rule.case_name)
        enough = not (self.rule.trials and case and case.trials and
                      case.trials < self.rule.trials)
        return case is not None and enough

    def _log(self, cell_id: str) -> Path:
        return self.logs / f"{cell_id}.log"  # the matrix's name: one log per cell, latest run


class _Steps(SearchHandler):
    """Turns the search's index-level callbacks into prefetches and candidate-level progress."""

    def __init__(self, bisector: Bisector):
        self.b = bisector

    def probing(self, index, *, lo, hi, then):
        self.b.prefetch(then)
        lo = -1 if lo is None else lo
        hi = len(self.b._cands) if hi is None else hi
        self.b.progress.probing(self.b._cands[index], left=max(hi - lo - 1, 0))


def _probe_version(rule: Rule) -> str:
    """A script's runs are keyed by the command itself; the probe's by its script fingerprint."""
    if rule.script is not None:
        return rule.probe_name
    from ..probes import probe_version

    return probe_version(rule.probe_name)


def _script_env(cand: Candidate, prepared: Prepared) -> dict[str, str]:
    bindir = str(Path(prepared.python).parent)
    env = {**prepared.env,
           "PATH": os.pathsep.join([bindir, prepared.env.get("PATH", os.environ["PATH"])]),
           "TORCHBISECT_TORCH_VERSION": cand.version,
           "TORCHBISECT_DATE": cand.date,
           "TORCHBISECT_PYTHON": prepared.python}
    venv = Path(bindir).parent
    if (venv / "pyvenv.cfg").is_file():
        env["VIRTUAL_ENV"] = str(venv)
    return env


def _git_version(prepared: Prepared, env: dict[str, str], log: Path) -> str:
    try:
        out = proc.run([prepared.python, "-c", _GIT_VERSION], env=env, timeout=300, log=log)
    except CommandFailed:
        return ""
    lines = out.output.strip().splitlines()
    return lines[-1].strip() if lines else ""


def _point(cand: Candidate, judged: Judged) -> NightlyPoint:
    return NightlyPoint(date=cand.date, version=cand.version, verdict=judged.verdict,
                        git_version=judged.git_version, stale_fraction=judged.stale_fraction,
                        reason=judged.reason)


def check_script_backend(backend: Backend, script: str | None) -> None:
    if script is not None and backend.name == "docker":
        raise ConfigError("--script runs on this host, so it needs --backend venv or current, "
                          "not docker")
