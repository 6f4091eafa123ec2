"""Made-up runs for benchmarks and tests: one builder for a single run, one for a large store.

`synthetic_runs(n)` looks like a real matrix of the default probe: a year of nightlies in two
CUDA variants, flaky races in the cases its file judges over trials (TRIAL_CASES), refusals after
a "fix", and some infrastructure failures.  The cases are the ones its file names.  Nothing here is
ever shown as a result: the sample page is rendered from recorded probe documents.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

from .. import defaults
from ..model import PROBE_SCHEMA, CellRun, Channel, ProbeResult, RunStatus, Verdict, roll_up
from ..page.regression import regression_for
from ..report.probe_files import cell_for

# The default probe's cases and controls, as its file says them: the runs made up here are its.
_PROBE = regression_for(defaults.PROBE)
CONTROLS = _PROBE.controls
CASE_ORDER = tuple(_PROBE.case_labels)

Outcome = Verdict | tuple[int, int]  # a verdict, or (stale_trials, trials) of a comparison


def _case(outcome: Outcome, detail: str) -> dict[str, Any]:
    """One case of the probe's JSON document."""
    if isinstance(outcome, tuple):
        stale, trials = outcome
        verdict = Verdict.AFFECTED if stale else Verdict.NOT_AFFECTED
        return {
            "verdict": verdict.value,
            "detail": detail or f"stale on {stale}/{trials}",
            "seconds": 0.4,
            "stale_trials": stale,
            "trials": trials,
        }
    return {"verdict": outcome.value, "detail": detail, "seconds": 0.4}


def synthetic_run(
    version: str,
    outcomes: dict[str, Outcome] | None = None,
    *,
    channel: Channel | None = None,
    gpu: str = "NVIDIA H200",
    driver: str = "580.159.04",
    started: str = "",
    detail: str = "",
    infra: str = "",
    log: str = "",
    cell_id: str = "",
) -> CellRun:
    """One run of `version`; controls behave unless `outcomes` says otherwise; `infra` = reason."""
    cell = cell_for(version, "3.12")
    cell = dataclasses.replace(cell, channel=channel or cell.channel, id=cell_id or cell.id)
    common: dict[str, Any] = dict(
        cell=cell, gpu=gpu, driver=driver, started=started, log_excerpt=log
    )
    if infra:
        return CellRun(status=RunStatus.INFRA_FAILURE, reason=infra, **common)
    behaving = {
        name: (5, 5) if verdict is Verdict.AFFECTED else (0, 5)
        for name, verdict in CONTROLS.items()
    }
    chosen = {**behaving, **(outcomes or {})}
    cases = {n: _case(chosen[n], detail) for n in CASE_ORDER if n in chosen}
    env = {
        "torch": version,
        "git_version": "0123456789abcdef" * 2 + "01234567",
        "cuda_runtime": "13.0",
        "driver": driver,
        "gpu": gpu,
        "capability": "9.0",
        "python": "3.12.3",
    }
    verdict = roll_up(cases, CONTROLS)
    assert verdict is not None  # the controls are always among the cases
    doc = {
        "schema": PROBE_SCHEMA,
        "probe": defaults.PROBE,
        "probe_version": "1",
        "verdict": verdict.value,
        "cases": cases,
        "env": env,
    }
    return CellRun(
        status=RunStatus.OK, result=ProbeResult.from_json(doc), probe_version="1", **common
    )


def synthetic_runs(n_cells: int) -> list[CellRun]:
    start = dt.date(2025, 1, 1)
    runs = []
    for i in range(n_cells):
        day = start + dt.timedelta(days=i // 2)
        version = f"2.{10 + i // 730}.0.dev{day:%Y%m%d}+{('cu128', 'cu130')[i % 2]}"
        stamp = f"{day}T08:00:00Z"
        if i % 97 == 13:
            runs.append(synthetic_run(version, started=stamp, infra="wheel download: HTTP 503"))
            continue
        bad: Outcome = Verdict.REFUSED if i > n_cells * 0.8 else (5, 5)
        race: Outcome = (0 if bad is Verdict.REFUSED else (i * 7) % 21, 20)
        outcomes = {
            name: race if name in _PROBE.trial_cases else bad
            for name in CASE_ORDER
            if name not in CONTROLS
        }
        runs.append(
            synthetic_run(
                version,
                outcomes,
                started=stamp,
                detail="max abs error nan <script>x</script>",
                log="probe: 7 cases\nok",
            )
        )
    return runs
