"""The page as data: `build_view(runs, bisections)` turns stored runs into sections, rows and cells.

Everything the templates show is decided here (each build's row in rows.py), as plain strings and
numbers, so the templates stay dumb and the logic (grouping, order, flaky display, infra failures,
GPU separation, what the page says it is) is unit-tested without a browser.  Strings from probes
and logs stay raw here; escaping is the template's job.  What the regression is called, its cases'
labels and which of them are controls come from its probe (page/regression.py).
"""

from __future__ import annotations

import datetime as dt
import re
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .. import cells
from ..config.matrix import References
from ..model import Attendance, CellRun, Channel
from ..outcome import BisectResult
from .advice import build_advice
from .bisections import bisect_view, gpu_of_bisection
from .folding import fold_rows
from .gpu_models import compare
from .headline import VersionKey, build_headline, gpu_of, is_release, nightly_date, version_key
from .kinds import kind_views
from .marks import Mark, legend_for
from .parts import (
    NOT_REPORTED,
    Column,
    Environment,
    Group,
    PageView,
    Row,
    Section,
)
from .regression import Regression, probe_of, regression_for
from .rows import build_row, capability, env_of
from .timeline import build_timeline

if TYPE_CHECKING:  # read only for its kinds (kinds.py); the page does not load runners.yaml
    from ..config.runners import Runners

CHANNEL_TITLES = {
    Channel.STABLE: "Stable releases",
    Channel.TEST: "Release candidates",
    Channel.NIGHTLY: "Nightlies",
    Channel.DEV: "Development builds",
    Channel.PREINSTALLED: "Preinstalled",
}


def columns_for(runs: list[CellRun], regression: Regression) -> tuple[Column, ...]:
    """The cases the runs have, in the probe's CASE_LABELS order, then the others by name."""
    seen = {c.name for r in runs if r.result for c in r.result.cases}
    order = list(regression.case_labels)
    names = [n for n in order if n in seen] + sorted(seen - set(order))
    variants = tuple(sorted(regression.variants.items()))
    return tuple(
        Column(
            name=n,
            title=regression.label(n),
            note=regression.case_notes.get(n, ""),
            expected=regression.controls.get(n),
            variants=variants,
        )
        for n in names
    )


def group_channel(run: CellRun) -> Channel:
    """A preinstalled torch that is a release (2.11.0+cu130) is shown as that release: grouped
    and ordered with the stable ones, its row saying where it came from."""
    if run.cell.channel is Channel.PREINSTALLED and is_release(run):
        return Channel.STABLE
    return run.cell.channel


def row_key(run: CellRun) -> tuple[int, str, VersionKey, str, str, str]:
    order = list(Channel).index(group_channel(run))
    when = nightly_date(run) if run.cell.channel is Channel.NIGHTLY else ""
    return (order, when, version_key(run.cell.version), run.cell.cuda, run.cell.python, run.cell.id)


def _groups(runs: list[CellRun], columns: tuple[Column, ...], where: str) -> tuple[Group, ...]:
    by_channel: dict[Channel, list[Row]] = {}
    for run in sorted(runs, key=row_key):
        by_channel.setdefault(group_channel(run), []).append(build_row(run, columns))
    return tuple(
        Group(
            channel=ch.value,
            title=CHANNEL_TITLES[ch],
            rows=tuple(rows),
            folds=fold_rows(rows, fold=ch is Channel.NIGHTLY, anchor=where),
        )
        for ch, rows in by_channel.items()
    )


def _environments(runs: list[CellRun]) -> tuple[Environment, ...]:
    """Where the verdicts came from, one line per GPU and driver (the CUDA runtime is each
    build's own: its runtimes are listed on that line); an infrastructure failure ran nothing."""
    counts: dict[tuple[str, str, str], Counter[str]] = {}
    for r in runs:
        if r.result is None:
            continue
        key = (gpu_of(r), str(r.driver or env_of(r).get("driver") or ""), capability(env_of(r)))
        # `or ""`: a CPU-only torch reports cuda_runtime None, which must not read "CUDA None";
        # a probe that reports no environment (a plain exit-status script) says nothing of it
        env = env_of(r)
        runtime = str(env.get("cuda_runtime") or "") if "cuda_runtime" in env else NOT_REPORTED
        counts.setdefault(key, Counter())[runtime] += 1
    return tuple(
        Environment(
            gpu=g,
            driver=d,
            capability=cap,
            runs=sum(c.values()),
            cuda_runtimes=tuple(sorted(c.items(), key=_by_version)),
        )
        for (g, d, cap), c in sorted(counts.items())
    )


def _by_version(item: tuple[str, int]) -> VersionKey:
    return version_key(item[0])


def _tally(rows: list[Row]) -> tuple[tuple[Mark, int], ...]:
    counts = Counter(r.mark.word for r in rows)
    marks = {r.mark.word: r.mark for r in rows}
    return tuple((marks[w], n) for w, n in counts.most_common())


def anchor(text: str) -> str:
    return "gpu-" + (re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "unknown")


def _section(
    gpu: str,
    runs: list[CellRun],
    bisections: list[BisectResult],
    columns: tuple[Column, ...],
    api: str,
) -> Section:
    groups = _groups(runs, columns, anchor(gpu))
    nightly = [r for r in runs if r.cell.channel is Channel.NIGHTLY]
    return Section(
        gpu=gpu,
        anchor=anchor(gpu),
        headline=build_headline(gpu, runs, bisections, api),
        groups=groups,
        timeline=build_timeline(nightly, bisections),
        environments=_environments(runs),
        tally=_tally([row for g in groups for row in g.rows]),
    )


def _marks_shown(sections: tuple[Section, ...]) -> list[Mark]:
    """Every mark drawn in the matrices: run verdicts, case verdicts, folded summaries."""
    marks = []
    for section in sections:
        for group in section.groups:
            for row in group.rows:
                marks += [row.mark, *(c.mark for c in row.cases)]
    return marks


NO_RUNS = (
    "Nothing has been probed into this store yet: `nox -s matrix` on a machine with an "
    "NVIDIA GPU installs each build and fills it."
)


# How runs that no backend made are named where the page says what it is drawn from (a
# backend's own runs: its label, backends.label).
_NOT_A_BACKEND = {"recorded probe JSON": "recorded probe documents"}


def made_with(runs: list[CellRun]) -> str:
    """What sets a page apart from its siblings of the same GPU: how its runs were made
    ("the docker backend (image torchbisect/h200:torch-2.11.0)")."""
    from ..backends import label

    backends = sorted({r.backend for r in runs if r.backend})
    how = " and ".join(_NOT_A_BACKEND[b] if b in _NOT_A_BACKEND else label(b) for b in backends)
    images = sorted({r.cell.base_image for r in runs if r.cell.base_image})
    if how and images:
        how += f" (image{'s' if len(images) > 1 else ''} {', '.join(images)})"
    return how


def _undated(runs: list[CellRun]) -> str:
    """What the page says for the newest run when no run has a date."""
    if runs and all(r.backend == "recorded probe JSON" for r in runs):
        return "not dated (recorded probe documents carry no date)"
    return "date not recorded"


def build_view(
    runs: list[CellRun],
    bisections: list[BisectResult],
    *,
    generated: dt.datetime,
    empty_reason: str = "",
    examples: tuple[tuple[str, str], ...] = (),
    links: References | None = None,
    bench: dict[str, Any] | None = None,
    runners: Runners | None = None,
    attendance: Sequence[Attendance] = (),
    store: str = "",
    regression: Regression | None = None,
) -> PageView:
    """`runners` (config.runners.Runners, when runners.yaml is read) and the store's
    `attendance` say which declared kinds reported (kinds.py); `store` names what the runs
    were read from, as the page may say it (a store's file, the probe documents' pattern);
    `regression`: what the runs' probe says it is (by default read from the probe's file)."""
    # `bisect --script` verdicts come from the user's command, not the probe, and a commit's
    # Python on a nightly's binary (`bisect --pytorch-repo`) is no build: not in the matrix
    # (the commit bisection shows under the nightly bisection it narrows).
    runs = [
        r for r in runs if not r.cell.probe.startswith("script:") and not cells.is_commit(r.cell.id)
    ]
    regression = regression or regression_for(probe_of(runs))
    api = regression.requires_api
    columns = columns_for(runs, regression)
    by_gpu: dict[str, list[CellRun]] = {}
    for run in runs:
        by_gpu.setdefault(gpu_of(run), []).append(run)
    # Each bisection goes to the GPU model its builds ran on; release bisections have no dates:
    # they are listed, not drawn on the nightly strip.
    owner = [gpu_of_bisection(b, runs, sorted(by_gpu)) for b in bisections]
    sections = tuple(
        _section(
            g,
            rs,
            [
                b
                for b, o in zip(bisections, owner, strict=True)
                if o == g and b.before and b.before.date
            ],
            columns,
            api,
        )
        for g, rs in sorted(by_gpu.items())
    )
    loose = [
        b for b, o in zip(bisections, owner, strict=True) if not o and b.before and b.before.date
    ]
    newest = max((s.headline.newest_run for s in sections), default="")
    comparison = compare(sections, runs, gpu_of, api)
    title = (
        comparison.headline
        if comparison
        else "; ".join(s.headline.text for s in sections) or "No results yet"
    )
    how = made_with(runs)
    if how and sections:  # sibling pages of one GPU differ in how their runs were made
        title = f"{title} · {how}"
    verb = "drawn from" if how == _NOT_A_BACKEND["recorded probe JSON"] else "measured with"
    source = "; ".join(
        x for x in (f"{verb} {how}" if how else "", f"read from {store}" if store else "") if x
    )
    stamp = generated.astimezone(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    legend, legend_more = legend_for(_marks_shown(sections), api)
    advice = build_advice(sections, links or References(), bench, regression) if sections else None
    return PageView(
        title=title,
        generated=stamp,
        source=source,
        newest_run=newest or _undated(runs),
        columns=columns,
        sections=sections,
        bisections=tuple(
            bisect_view(b, o, several_gpus=len(by_gpu) > 1)
            for b, o in zip(bisections, owner, strict=True)
        ),
        bisection_timeline=build_timeline([], loose) if loose else None,
        legend=legend,
        legend_more=legend_more,
        runs=len(runs),
        empty_reason=empty_reason or NO_RUNS,
        examples=examples,
        comparison=comparison,
        kinds=kind_views(runners.kinds, attendance, sorted(by_gpu)) if runners else (),
        advice=advice,
        regression=regression,
    )
