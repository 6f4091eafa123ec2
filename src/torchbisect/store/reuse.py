"""When a stored run may answer for a cell instead of running it again: the one reuse rule.

The matrix and the bisection both store their runs and both look for one before probing, through
the one lookup `Store.find_ok`, which applies `covers` to the rows it reads.  A stored run answers
for an asked cell when its reuse key covers what is asked:

* it got a verdict (an infrastructure failure is tried again);
* the same wheel: the same sha256 when the asked one is known before installing; else, for a
  nightly only, the same wheel URL (nightly indexes publish no sha256, and a nightly's file name,
  dated, is unique to its build — a re-spun release candidate keeps its file name, so any other
  build without a known sha256 is installed and probed again);
* the same probe and probe version, GPU model and driver;
* the same trials and environment;
* a limit on the probe's time (`timeout`) no longer than the one asked: a run that finished within
  its own limit finishes the same under a longer one, so the matrix's `timeout: 120` answers for a
  bisection's 900 s.  A run with a case that timed out, or a run under a longer limit than the one
  asked, answers only for the same limit;
* its cases include the asked ones: a run of the probe's default set covers any case the run
  holds, and a run of named cases covers only those.  So a bisection, which asks for one case,
  reuses a full matrix run of its wheel, while a matrix cell (the default set) reuses a
  bisection's one-case run only when it asked for just that case itself.

A `--script` run has a probe of its own (`script:<sha12>`) and never answers for the probe.
"""

from __future__ import annotations

from ..model import Cell, CellRun, Channel, RunStatus, Verdict


def covers(
    run: CellRun,
    asked: Cell,
    *,
    wheel_sha256: str | None,
    probe_version: str,
    gpu: str,
    driver: str,
) -> bool:
    """True when the stored `run` may stand in for a run of `asked` (see the module's rule).

    `wheel_sha256` is what the asked run would record, when known before installing.
    """
    if run.status is not RunStatus.OK or run.result is None:
        return False
    same_wheel = run.wheel_sha256 == wheel_sha256 if wheel_sha256 else same_nightly_file(run, asked)
    where = (run.probe_version, run.gpu, run.driver) == (probe_version, gpu, driver)
    return same_wheel and where and settings_cover(run, asked)


def same_nightly_file(run: CellRun, asked: Cell) -> bool:
    """A nightly whose sha256 is not known before installing is named by its URL (see above)."""
    return asked.channel is Channel.NIGHTLY and bool(asked.url) and run.cell.url == asked.url


def settings_cover(run: CellRun, asked: Cell) -> bool:
    """The probe settings half of the rule: probe, trials, timeout, environment and cases."""
    stored = run.cell
    if (stored.probe, stored.trials, env_key(stored)) != (
        asked.probe,
        asked.trials,
        env_key(asked),
    ):
        return False
    if not _within_limit(run, asked):
        return False
    if not asked.cases:  # the probe's default set: only a run of that set holds it
        return not stored.cases
    ran = {case.name for case in run.result.cases} if run.result else set()
    return set(asked.cases) <= ran and (not stored.cases or set(asked.cases) <= set(stored.cases))


def _within_limit(run: CellRun, asked: Cell) -> bool:
    """Whether the stored run's verdict would be the same under the asked limit: the same limit,
    or a longer one asked of a run none of whose cases (those asked) timed out."""
    limit, wanted = float(run.cell.timeout), float(asked.timeout)
    if limit == wanted:
        return True
    if limit > wanted or run.result is None:
        return False
    if not asked.cases and run.result.verdict is Verdict.TIMEOUT:
        return False
    return all(
        c.verdict is not Verdict.TIMEOUT
        for c in run.result.cases
        if not asked.cases or c.name in asked.cases
    )


def env_key(cell: Cell) -> tuple[tuple[str, str], ...]:
    """A cell's `env:`, in one order: two cells asked under the same environment compare equal."""
    return tuple(sorted(dict(cell.env).items()))
