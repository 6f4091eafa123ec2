"""How a verdict is drawn: a colour class, an icon and a word, so no reader depends on colour alone.

Every cell of the page, the Markdown table and the timeline goes through `mark_for_case`,
`mark_for_run` or `INFRA`; the legend is generated from the same table, so it cannot drift.  The
words are any regression's: which cases are controls, and which API a build may lack, are the
probe's (its CONTROLS and REQUIRES_API, page/regression.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property

from ..model import CaseResult, CellRun, RunStatus, Verdict
from .public import public_text


@dataclass(frozen=True, kw_only=True)
class Mark:
    kind: str  # CSS class: aff, flaky, ok, refused, ctl, na, doubt, err, infra, none
    icon: str
    word: str
    note: str = ""  # a short second line, e.g. "7/20": affected on 7 of 20 trials

    @cached_property  # marks are shared constants, read thousands of times per page
    def label(self) -> str:
        return f"{self.icon} {self.word}"

    @property
    def is_affected(self) -> bool:
        return self.kind in ("aff", "flaky")

    @property
    def is_safe(self) -> bool:
        return self.kind in ("ok", "refused")


# "\ufe0e" asks for the text (not emoji) form of the warning sign, so it takes the cell's colour.
_BY_VERDICT = {
    Verdict.AFFECTED: Mark(kind="aff", icon="✗", word="affected"),
    Verdict.NOT_AFFECTED: Mark(kind="ok", icon="✓", word="not affected"),
    Verdict.REFUSED: Mark(kind="refused", icon="⊘", word="refused", note="(a clear error)"),
    Verdict.NOT_APPLICABLE: Mark(kind="na", icon="–", word="not applicable"),
    Verdict.INCONCLUSIVE: Mark(kind="doubt", icon="?", word="inconclusive"),
    Verdict.ERROR: Mark(kind="err", icon="!", word="error"),
    Verdict.CRASHED: Mark(kind="err", icon="!", word="crashed"),
    Verdict.TIMEOUT: Mark(kind="err", icon="!", word="timeout"),
    Verdict.SKIPPED: Mark(kind="na", icon="–", word="skipped", note="(no GPU)"),
}
INFRA = Mark(kind="infra", icon="⚠\ufe0e", word="infra failure")
NOT_RUN = Mark(kind="none", icon="·", word="not run")
FLAKY = Mark(kind="flaky", icon="◐", word="flaky")
CONTROL_OK = Mark(kind="ctl", icon="✓", word="as expected")

# The legend, in the order a reader meets the kinds: (mark, what it means).
LEGEND: tuple[tuple[Mark, str], ...] = (
    (_BY_VERDICT[Verdict.AFFECTED], "the regression was seen; n/m: on n of the m trials run"),
    (FLAKY, "seen on some trials only: a race, with its rate"),
    (_BY_VERDICT[Verdict.NOT_AFFECTED], "correct results"),
    (_BY_VERDICT[Verdict.REFUSED], "not affected: the build raises a clear error instead"),
    (_BY_VERDICT[Verdict.NOT_APPLICABLE], "an API the case needs is absent in this build"),
    (_BY_VERDICT[Verdict.SKIPPED], "the probe ran where no CUDA GPU was visible: no verdict"),
    (CONTROL_OK, "a control case showed what it must (the probe's check of itself)"),
    (_BY_VERDICT[Verdict.INCONCLUSIVE], "a control misbehaved: no verdict"),
    (_BY_VERDICT[Verdict.ERROR], "error, crash or timeout inside the probe"),
    (INFRA, "install or container failed: no verdict, retried next run"),
)


def legend_for(
    shown: Iterable[Mark], api: str = ""
) -> tuple[tuple[tuple[Mark, str], ...], tuple[tuple[Mark, str], ...]]:
    """The legend's entries for the marks a page shows, and the others (a page of one state
    explains that one first; the rest stay a click away).  An entry stands for every mark of its
    kind and word; "error" also for "crashed" and "timeout", which it explains.  `api`: the
    probe's REQUIRES_API, named in what "not applicable" means."""
    legend = (
        LEGEND
        if not api
        else tuple(
            (m, f"{text} (such as {api})") if m.word == "not applicable" else (m, text)
            for m, text in LEGEND
        )
    )
    seen = {(m.kind, "" if m.kind == "err" else m.word) for m in shown}
    used = tuple(e for e in legend if (e[0].kind, "" if e[0].kind == "err" else e[0].word) in seen)
    return used, tuple(e for e in legend if e not in used)


def trials_note(case: CaseResult) -> str:
    """ "7/20": affected on 7 of the 20 trials a case ran, when it counts trials."""
    if case.trials and case.stale_trials is not None:
        return f"{case.stale_trials}/{case.trials}"
    return ""


def mark_for_verdict(verdict: Verdict) -> Mark:
    return _BY_VERDICT[verdict]


def mark_for_case(case: CaseResult | None, controls: Mapping[str, Verdict] | None = None) -> Mark:
    """`controls`: the probe's control cases and the verdict each must show; a control that
    shows it is drawn neutral, never red (a positive control seen affected is the probe working,
    not the build being affected)."""
    if case is None:
        return NOT_RUN
    if (controls or {}).get(case.name) is case.verdict:
        return CONTROL_OK
    if case.verdict is Verdict.AFFECTED and case.flaky:
        return Mark(kind=FLAKY.kind, icon=FLAKY.icon, word=FLAKY.word, note=trials_note(case))
    base = _BY_VERDICT[case.verdict]
    note = trials_note(case) if case.verdict is Verdict.AFFECTED else ""
    return Mark(kind=base.kind, icon=base.icon, word=base.word, note=note) if note else base


def mark_for_run(run: CellRun) -> Mark:
    if run.status is RunStatus.INFRA_FAILURE or run.result is None:
        return Mark(kind=INFRA.kind, icon=INFRA.icon, word=INFRA.word, note=public_text(run.reason))
    return _BY_VERDICT[run.result.verdict]
