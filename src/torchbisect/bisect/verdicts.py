"""How one stored run becomes good / bad / unknown for a bisection: the stated rule.

Probe mode reads one case of the probe's result: the one `--case` names, else the one the probe's
file declares (probe/info.py: BISECT_CASE).  A case with trials (a race that shows now and then;
the probe's TRIAL_CASES name those it judges so, with the fewest affected trials that make a build
bad) is bad when it was affected on at least `min_affected` trials, good when on none, and unknown
in between.  Script mode follows `git bisect run`: exit 0 good, 125 skip,
1–127 bad, anything else aborts (probes/script.py runs the command and records its status).
Infrastructure failures (a script that timed out included) and inconclusive runs are unknown.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from ..defaults import PROBE as DEFAULT_PROBE
from ..errors import TorchbisectError
from ..exits import Exit
from ..model import CaseResult, CellRun, RunStatus, Verdict
from ..outcome import Outcome
from ..probe.info import ProbeInfo
from ..probe.scripts import probe_info
from ..utils.words import signal_name

SCRIPT_CASE = "script"


class StoppedSearch(TorchbisectError):
    """A bisection that stopped without an answer (exit 7, 9 or 10).  `so_far`, once the
    search knows it (bisect/run.py): what `--json` and `--markdown` get instead of a result,
    the builds judged before the stop and the range they pin."""

    so_far: dict[str, Any] | None = None


class ScriptAborted(StoppedSearch):
    """The --script command asked to stop the bisection (exit status above 127, or a signal)."""

    exit_code = Exit.ABORTED


class FlakyScript(StoppedSearch):
    """--script gave different answers for one nightly: no range can be trusted.  `build`: that
    candidate's key, left out of the range found so far."""

    def __init__(self, message: str, *, build: str = "") -> None:
        super().__init__(message)
        self.build = build

    exit_code = Exit.FLAKY


@dataclass(frozen=True, kw_only=True)
class Judged:
    verdict: Outcome  # in the user's terms: BAD is affected
    stale_fraction: float | None = None
    reason: str = ""
    git_version: str = ""


@dataclass(frozen=True, kw_only=True)
class Rule:
    case: str = ""  # --case; "": the one the probe's file declares (ignored with a script)
    trials: int | None = None  # None: the probe's default
    min_affected: int | None = None  # --min-affected; None: the probe's TRIAL_CASES, else 1
    script: str | None = None
    probe: str = DEFAULT_PROBE  # the probe that judges (`--probe`); ignored with a script

    def _info(self) -> ProbeInfo | None:
        return None if self.script is not None else probe_info(self.probe)

    @property
    def case_name(self) -> str:
        """The case that decides: `case`, else the probe's declared one, or the script's own."""
        if self.script is not None:
            return SCRIPT_CASE
        info = self._info()
        return self.case or (info.deciding_case if info else "")

    @property
    def least_affected(self) -> int:
        """The fewest affected trials that make a build bad: --min-affected, else the probe's
        rule for the case (TRIAL_CASES), else 1."""
        if self.min_affected is not None:
            return self.min_affected
        info = self._info()
        return (info.trial_cases.get(self.case_name) if info else None) or 1

    def _judged_over_trials(self) -> bool:
        info = self._info()
        return bool(
            self.trials
            or self.min_affected is not None
            or (info and self.case_name in info.trial_cases)
        )

    @property
    def probe_name(self) -> str:
        """The probe a run was made with: `probe` (a file of the probes folder), or
        "script:<sha256 of CMD, 12 hex>"."""
        if self.script is None:
            return self.probe
        return "script:" + hashlib.sha256(self.script.encode()).hexdigest()[:12]

    @property
    def env(self) -> tuple[tuple[str, str], ...]:
        """What the probe's environment carries: probes/script.py reads the command from it."""
        return (("TORCHBISECT_SCRIPT", self.script),) if self.script is not None else ()

    def describe(self) -> str:
        if self.script is not None:
            return (
                f"script `{self.script}`: exit 0 good, 125 skip, 1-127 bad, "
                ">127 aborts the bisection"
            )
        probe = "" if self.probe == DEFAULT_PROBE else f"probe {self.probe}, "
        rule = (
            f"{probe}case {self.case_name}: bad when affected, good when not affected or "
            "refused, unknown otherwise"
        )
        if self._judged_over_trials():
            of = f"{self.trials}" if self.trials else "the probe's default number of"
            rule += (
                f"; a case run in trials is bad when affected on at least "
                f"{self.least_affected} of {of} trials, good when on none, unknown in "
                "between"
            )
        return rule

    def judge(self, run: CellRun) -> Judged:
        if run.status is not RunStatus.OK or run.result is None:
            return Judged(verdict=Outcome.UNKNOWN, reason=run.reason or "infrastructure failure")
        git_version = str(run.result.env.get("git_version") or "")
        case = run.result.case(self.case_name)
        if case is None:
            return Judged(
                verdict=Outcome.UNKNOWN,
                reason=f"case {self.case_name} was not run",
                git_version=git_version,
            )
        if run.result.verdict is Verdict.INCONCLUSIVE and self.script is None:
            return Judged(
                verdict=Outcome.UNKNOWN,
                reason="inconclusive: a control misbehaved",
                git_version=git_version,
            )
        verdict, reason = self._case_verdict(case)
        return Judged(
            verdict=verdict,
            stale_fraction=case.stale_fraction,
            reason=reason,
            git_version=git_version,
        )

    def _case_verdict(self, case: CaseResult) -> tuple[Outcome, str]:
        if case.trials and case.stale_trials is not None:
            seen = f"affected on {case.stale_trials} of {case.trials} trials"
            least = self.least_affected
            if case.stale_trials >= least:
                return Outcome.BAD, seen
            if case.stale_trials == 0 and case.verdict.is_safe:
                return Outcome.GOOD, seen
            return Outcome.UNKNOWN, f"{seen} ({case.verdict.value}; at least {least} make it bad)"
        if case.verdict is Verdict.AFFECTED:
            return Outcome.BAD, case.detail
        if case.verdict.is_safe:
            refused = case.verdict is Verdict.REFUSED
            return Outcome.GOOD, case.verdict.value if refused else case.detail
        return Outcome.UNKNOWN, f"{case.verdict.value}: {case.detail}".rstrip(": ")


def check_script_run(run: CellRun, rule: Rule) -> None:
    """Raise ScriptAborted when the --script asked to stop the bisection: an exit status above
    127 or a signal (probes/script.py records it; its verdict alone would read as unknown)."""
    if rule.script is None or run.result is None:
        return
    case = run.result.raw.get("cases", {}).get(SCRIPT_CASE, {})
    status = case.get("exit_status") if isinstance(case, dict) else None
    if type(status) is not int or 0 <= status <= 127:
        return
    if status < 0:
        raise ScriptAborted(
            f"--script `{rule.script}` was killed by signal "
            f"{signal_name(-status)}, which stops the bisection; exit 125 to "
            "skip a build instead"
        )
    raise ScriptAborted(
        f"--script `{rule.script}` exited with status {status} (above 127), "
        "which stops the bisection; exit 125 to skip a nightly instead"
    )
