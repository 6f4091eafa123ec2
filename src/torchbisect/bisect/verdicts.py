"""How one stored run becomes good / bad / unknown for a bisection: the stated rule.

Probe mode reads one case of the probe's result.  A case with trials (the side-stream race passes
now and then) is bad when it was stale on at least `min_stale` trials, good when it was stale on
none, and unknown in between.  Script mode follows `git bisect run`: exit 0 good, 125 skip,
1–127 bad, anything else aborts (probes/script.py runs the command and records its status).
Infrastructure failures (a script that timed out included) and inconclusive runs are unknown.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from ..errors import TorchbisectError
from ..exits import Exit
from ..model import CellRun, RunStatus, Verdict
from ..outcome import Outcome
from ..probe.scripts import DEFAULT_PROBE
from ..utils.words import signal_name

DEFAULT_CASE = "capture_data_ptr"
SCRIPT_CASE = "script"
RACY_CASES = ("side_stream",)  # timing dependent: judged over trials


class ScriptAborted(TorchbisectError):
    """The --script command asked to stop the bisection (exit status above 127, or a signal)."""

    exit_code = Exit.ABORTED


class FlakyScript(TorchbisectError):
    """--script gave different answers for one nightly: no range can be trusted."""

    exit_code = Exit.FLAKY


@dataclass(frozen=True, kw_only=True)
class Judged:
    verdict: Outcome  # in the user's terms: BAD is affected
    stale_fraction: float | None = None
    reason: str = ""
    git_version: str = ""


@dataclass(frozen=True, kw_only=True)
class Rule:
    case: str = DEFAULT_CASE  # ignored with a script
    trials: int | None = None  # None: the probe's default
    min_stale: int = 1
    script: str | None = None
    probe: str = DEFAULT_PROBE  # the probe that judges (`--probe`); ignored with a script

    @property
    def case_name(self) -> str:
        """The case that decides: the probe's `case`, or the script's own."""
        return SCRIPT_CASE if self.script is not None else self.case

    @property
    def probe_name(self) -> str:
        """The probe a run was made with: `probe` ("stale_replay", "cumsum_64bit"), or
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
            return (f"script `{self.script}`: exit 0 good, 125 skip, 1-127 bad, "
                    ">127 aborts the bisection")
        probe = "" if self.probe == DEFAULT_PROBE else f"probe {self.probe}, "
        rule = (f"{probe}case {self.case}: bad when affected, good when not affected or "
                "refused, unknown otherwise")
        if self.trials or self.min_stale != 1 or self.case in RACY_CASES:
            of = f"{self.trials}" if self.trials else "the probe's default number of"
            rule += (f"; a case run in trials is bad when stale on at least {self.min_stale} of "
                     f"{of} trials, good when stale on none, unknown in between")
        return rule

    def judge(self, run: CellRun) -> Judged:
        if run.status is not RunStatus.OK or run.result is None:
            return Judged(verdict=Outcome.UNKNOWN, reason=run.reason or "infrastructure failure")
        git_version = str(run.result.env.get("git_version") or "")
        case = run.result.case(self.case_name)
        if case is None:
            return Judged(verdict=Outcome.UNKNOWN, reason=f"case {self.case_name} was not run",
                          git_version=git_version)
        if run.result.verdict is Verdict.INCONCLUSIVE and self.script is None:
            return Judged(verdict=Outcome.UNKNOWN, reason="inconclusive: a control misbehaved",
                          git_version=git_version)
        verdict, reason = self._case_verdict(case)
        return Judged(verdict=verdict, stale_fraction=case.stale_fraction,
                      reason=reason, git_version=git_version)

    def _case_verdict(self, case) -> tuple[Outcome, str]:
        if case.trials and case.stale_trials is not None:
            stale = f"stale on {case.stale_trials} of {case.trials} trials"
            if case.stale_trials >= self.min_stale:
                return Outcome.BAD, stale
            if case.stale_trials == 0 and case.verdict.is_safe:
                return Outcome.GOOD, stale
            why = f"{stale} ({case.verdict.value}; --min-stale is {self.min_stale})"
            return Outcome.UNKNOWN, why
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
        raise ScriptAborted(f"--script `{rule.script}` was killed by signal "
                            f"{signal_name(-status)}, which stops the bisection; exit 125 to "
                            "skip a nightly instead")
    raise ScriptAborted(f"--script `{rule.script}` exited with status {status} (above 127), "
                        "which stops the bisection; exit 125 to skip a nightly instead")


