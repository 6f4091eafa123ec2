"""Taking back a verdict: `bisect --forget DATE|VERSION|COMMIT` drops the stored runs a
bisection with these settings would reuse for that build, so a mistaken answer (a script that was
wrong that day, a flaky probe) is asked again without starting over — mozregression lets a user
do the same.

Only the runs that would answer again are dropped: a verdict (status ok) of that build, with this
bisection's probe (or script) and probe version, case, trials, timeout, CUDA tag, Python, GPU model
and driver.  Under `--cuda auto` the CUDA tag is the one the walk takes for that release (the
newest stored one this driver runs), never the word `auto`.  Each dropped row is returned for the
caller to name; when none matches nothing is touched and one sentence says why.  A COMMIT matches
a run's `torch.version.git_version`, the main-branch sha a stored bisection recorded for a nightly
(the one its compare URL shows), or the commit a `--pytorch-repo` run overlaid on a nightly's
binary.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace

from ..errors import ConfigError
from ..model import Cell, CellRun, Channel, RunStatus
from ..outcome import BisectResult, NightlyPoint
from ..plan.indexes import driver_supports, tag_order
from ..store import reuse
from ..store.db import Store
from .candidates import parse_end, release_of
from .overlay import COMMIT_VAR
from .verdicts import Rule

_SHA = re.compile(r"[0-9a-f]{7,40}")
AUTO = "auto"  # --cuda auto (bisect/run.py): each release's own build


@dataclass(frozen=True, kw_only=True)
class Settings:
    """What decides whether a stored run answers for this bisection (besides the build)."""

    rule: Rule
    cuda: str
    python: str
    timeout: float
    probe_version: str
    gpu: str
    driver: str

    def template(self) -> Cell:
        return Cell(
            id="",
            channel=Channel.NIGHTLY,
            version="",
            cuda=self.cuda,
            python=self.python,
            probe=self.rule.probe_name,
            cases=(self.rule.case_name,) if self.rule.script is None else (),
            trials=self.rule.trials,
            timeout=self.timeout,
            env=self.rule.env,
        )


@dataclass(frozen=True, kw_only=True)
class Forgotten:
    runs: tuple[CellRun, ...]  # the dropped rows, oldest first
    bisections: tuple[BisectResult, ...]  # stored results that had used one of their verdicts


def forget(store: Store, what: str, settings: Settings) -> Forgotten:
    """Drop the runs that would answer for `what` under `settings`; ConfigError when none."""
    bisections = store.bisections()
    matches = _matcher(what, bisections)
    builds = [r for r in store.runs() if matches(r)]
    chosen = _auto_builds(tuple(r for r in builds if _answers(r, settings)), settings)
    if not chosen:
        others = (
            f"; it holds {len(builds)} other run(s) of it (another GPU, driver, probe, "
            "case or setting, or without a verdict), which this bisection would not reuse"
            if builds
            else ""
        )
        raise ConfigError(
            f"{store.path} holds no verdict of {what} that this bisection would "
            f"reuse (--cuda {settings.cuda}, --python {settings.python}, "
            f"{_decider(settings.rule)}){others}: nothing to forget"
        )
    store.drop_runs(r.run_id for r in chosen if r.run_id is not None)
    keys = {_key(r) for r in chosen}
    used = tuple(
        b
        for b in bisections
        if b.cuda == settings.cuda
        and b.python == settings.python
        and any(p.key in keys for p in _pairs(b) if p)
    )
    return Forgotten(runs=chosen, bisections=used)


def describe(run: CellRun, rule: Rule) -> str:
    """One dropped row, as the user is told: enough to find it in a log or an export."""
    verdict = rule.judge(run).verdict.value
    return (
        f"row {run.run_id}: {run.cell.id} ({run.cell.version}), {verdict}, probed "
        f"{run.started or '?'} on {run.gpu or '?'}"
    )


def _matcher(what: str, bisections: list[BisectResult]) -> Callable[[CellRun], bool]:
    text = what.strip()
    try:
        day = parse_end(text, "--forget")
    except ConfigError:
        day = ""
    if day:
        return lambda r: r.cell.channel is Channel.NIGHTLY and r.cell.date == day
    release = release_of(text)
    if release:
        return lambda r: (
            r.cell.channel is not Channel.NIGHTLY and release_of(r.cell.version) == release
        )
    sha = text.lower()
    if not _SHA.fullmatch(sha):
        raise ConfigError(
            f"--forget {what!r} is neither a date, a nightly or release version, "
            "nor a commit sha (7 to 40 hex digits)"
        )
    seen = [p for b in bisections for p in (*b.points, b.before, b.after) if p]
    dates = {p.date for p in seen if p.date and p.main_sha.startswith(sha)}
    return lambda r: (
        _git_version(r).startswith(sha)
        or _overlaid(r).startswith(sha)
        or (r.cell.channel is Channel.NIGHTLY and r.cell.date in dates)
    )


def _answers(run: CellRun, s: Settings) -> bool:
    if run.status is not RunStatus.OK or run.result is None:
        return False
    cuda = s.cuda if s.cuda != AUTO else run.cell.cuda  # the build's own tag, chosen below
    where = (cuda, run.cell.python, run.probe_version, run.gpu, run.driver)
    template = replace(s.template(), cuda=cuda)
    if _overlaid(run):  # a commit on a nightly's binary: its env names the commit too
        env = {**dict(template.env), COMMIT_VAR: _overlaid(run)}
        template = replace(template, env=tuple(sorted(env.items())))
    return where == (cuda, s.python, s.probe_version, s.gpu, s.driver) and reuse.settings_cover(
        run, template
    )


def _auto_builds(runs: tuple[CellRun, ...], s: Settings) -> tuple[CellRun, ...]:
    """Under `--cuda auto` the walk probes, of each release, the build of the newest CUDA tag
    this driver runs (bisect/run.py `_release_builds`), and stores its run under that tag: the
    runs it would reuse are those of that tag, never `auto`, which no build is."""
    if s.cuda != AUTO:
        return runs
    runnable = [r for r in runs if driver_supports(r.cell.cuda, s.driver or None)]
    newest: dict[str, int] = {}
    for run in runnable:
        release = release_of(run.cell.version) or run.cell.version
        newest[release] = max(newest.get(release, -1), tag_order(run.cell.cuda))
    return tuple(
        r
        for r in runnable
        if tag_order(r.cell.cuda) == newest[release_of(r.cell.version) or r.cell.version]
    )


def _overlaid(run: CellRun) -> str:
    """The commit a run overlaid on its nightly (`bisect --pytorch-repo`), or ""."""
    return dict(run.cell.env).get(COMMIT_VAR, "")


def _git_version(run: CellRun) -> str:
    return str(run.result.env.get("git_version") or "") if run.result else ""


def _key(run: CellRun) -> str:
    return _overlaid(run)[:12] or run.cell.date or run.cell.version


def _pairs(b: BisectResult) -> tuple[NightlyPoint | None, ...]:
    """The builds a stored bisection's answer rests on, its commit bisection's included."""
    narrowed = (b.narrowed.before, b.narrowed.after) if b.narrowed else ()
    return (b.before, b.after, *narrowed)


def _decider(rule: Rule) -> str:
    return f"--script {rule.script!r}" if rule.script is not None else f"--case {rule.case_name}"
