"""The page as data: `build_view(runs, bisections)` turns stored runs into sections, rows and cells.

Everything the templates show is decided here, as plain strings and numbers, so the templates stay
dumb and the logic (grouping, order, flaky display, infra failures, GPU separation) is unit-tested
without a browser.  Strings from probes and logs stay raw here; escaping is the template's job.
"""

from __future__ import annotations

import datetime as dt
import re
from collections import Counter
from collections.abc import Sequence

from .. import cells
from ..model import CaseResult, CellRun, Channel, RunStatus
from ..outcome import BisectResult
from .advice import build_advice
from .bisections import bisect_view, gpu_of_bisection
from .folding import fold_rows
from .headline import build_headline, gpu_of, nightly_date, version_key
from .kinds import kind_views
from .marks import LEGEND, NOT_RUN, Mark, mark_for_case, mark_for_run
from .models import compare
from .page import (
    CaseCell,
    Column,
    Environment,
    Fact,
    Group,
    Links,
    PageView,
    Row,
    Section,
)
from .public import public_text, public_url
from .timeline import build_timeline

CHANNEL_TITLES = {
    Channel.STABLE: "Stable releases",
    Channel.TEST: "Release candidates",
    Channel.NIGHTLY: "Nightlies",
    Channel.DEV: "Development builds",
    Channel.PREINSTALLED: "Preinstalled",
}
CASE_ORDER = ("capture_data_ptr", "capture_write", "side_stream", "compile_reduce_overhead",
              "raw_pointer_triton", "control_clone", "control_stale")
CASE_TITLES = {
    "capture_data_ptr": "capture + data_ptr()",
    "capture_write": "capture + write",
    "side_stream": "side-stream race",
    "compile_reduce_overhead": "compile (reduce-overhead)",
    "raw_pointer_triton": "raw pointer → Triton",
    "control_clone": "control: clone()",
    "control_stale": "control: stale copy",
}
CASE_NOTES = {
    "control_clone": "negative control, must be correct",
    "control_stale": "positive control, must be detected",
}
def columns_for(runs: list[CellRun]) -> tuple[Column, ...]:
    seen = {c.name for r in runs if r.result for c in r.result.cases}
    names = [n for n in CASE_ORDER if n in seen] + sorted(seen - set(CASE_ORDER))
    return tuple(Column(name=n, title=CASE_TITLES.get(n, n), note=CASE_NOTES.get(n, ""))
                 for n in names)


def row_key(run: CellRun) -> tuple:
    order = list(Channel).index(run.cell.channel)
    when = nightly_date(run) if run.cell.channel is Channel.NIGHTLY else ""
    return (order, when, version_key(run.cell.version), run.cell.cuda, run.cell.python,
            run.cell.id)


def _env(run: CellRun) -> dict:
    return run.result.env if run.result else {}


def _seconds(value: float) -> str:
    return f"{value:.2f} s" if value < 10 else f"{value:.0f} s"


_NOT_RUN = CaseCell(mark=NOT_RUN, stale="", time="", detail="this case is not in the run")


def _case_cell(case: CaseResult | None) -> CaseCell:
    if case is None:
        return _NOT_RUN
    stale = ""
    if case.stale_fraction is not None:
        stale = (f"{'flaky: ' if case.flaky else ''}stale {case.stale_trials}/{case.trials} "
                 f"trials ({case.stale_fraction:.0%})")
    return CaseCell(mark=mark_for_case(case), stale=stale, time=_seconds(case.seconds),
                    detail=public_text(case.detail))


def _run_facts(run: CellRun) -> tuple[Fact, ...]:
    """The build's details (shown when its label is clicked); empty values are left out."""
    env = _env(run)
    pairs = [
        ("infra failure", public_text(run.reason) if run.status is RunStatus.INFRA_FAILURE
         else ""),
        ("cell", run.cell.id),
        ("torch", env.get("torch") or run.cell.version),
        ("git_version", env.get("git_version")),
        ("CUDA tag", run.cell.cuda),
        ("CUDA runtime", env.get("cuda_runtime")),
        ("cuDNN", env.get("cudnn")),
        ("GPU", f"{gpu_of(run)} {_capability(env)}".strip()),
        ("driver", run.driver or env.get("driver")),
        ("Python", env.get("python") or run.cell.python),
        ("backend", run.backend),
        ("started", run.started),
        ("install", run.seconds_install and _seconds(run.seconds_install)),
        ("probe", run.seconds_probe and _seconds(run.seconds_probe)),
        ("wheel", public_url(run.cell.url)),
        ("wheel sha256", run.wheel_sha256),
        ("probe version", run.probe_version),
    ]
    return tuple((k, str(v)) for k, v in pairs if v)


def _capability(env: dict) -> str:
    cap = env.get("capability")
    if isinstance(cap, (list, tuple)):
        cap = ".".join(str(c) for c in cap)
    return f"(sm {cap})" if cap else ""


def _label(run: CellRun) -> tuple[str, str]:
    cell = run.cell
    python = cell.python or _probed_python(run)
    if cell.channel is Channel.NIGHTLY:
        return nightly_date(run) or cell.version, f"{cell.version} · py{python}"
    return cell.version, f"{cell.cuda or _probed_cuda(run)} · py{python}"


def _probed_cuda(run: CellRun) -> str:
    """A preinstalled torch's CUDA build, as the probe saw it ("cu130" from "2.11.0+cu130")."""
    local = str(_env(run).get("torch", "")).partition("+")[2]
    return local or "cuda ?"


def _probed_python(run: CellRun) -> str:
    return ".".join(str(_env(run).get("python", "?")).split(".")[:2])


def build_row(run: CellRun, columns: tuple[Column, ...]) -> Row:
    env = _env(run)
    git = str(env.get("git_version", ""))[:12]
    driver = run.driver or env.get("driver")
    run_line = " · ".join(x for x in (gpu_of(run), f"driver {driver}" if driver else "",
                                      f"torch git {git}" if git else "") if x)
    by_name = {c.name: c for c in run.result.cases} if run.result else {}
    cases = () if run.result is None else tuple(_case_cell(by_name.get(c.name)) for c in columns)
    label, sub = _label(run)
    return Row(cell_id=run.cell.id, label=label, sub=sub, mark=mark_for_run(run), cases=cases,
               run_line=run_line, facts=_run_facts(run), log_excerpt=public_text(run.log_excerpt))


def _groups(runs: list[CellRun], columns: tuple[Column, ...], where: str) -> tuple[Group, ...]:
    by_channel: dict[Channel, list[Row]] = {}
    for run in sorted(runs, key=row_key):
        by_channel.setdefault(run.cell.channel, []).append(build_row(run, columns))
    return tuple(Group(channel=ch.value, title=CHANNEL_TITLES[ch], rows=tuple(rows),
                       folds=fold_rows(rows, fold=ch is Channel.NIGHTLY, anchor=where))
                 for ch, rows in by_channel.items())


def _environments(runs: list[CellRun]) -> tuple[Environment, ...]:
    """Where the verdicts came from; an infrastructure failure ran nothing, so it is not counted."""
    # `or ""`: a CPU-only torch reports cuda_runtime None, which must not read "CUDA None".
    counts = Counter((gpu_of(r), str(r.driver or _env(r).get("driver") or ""),
                      str(_env(r).get("cuda_runtime") or ""), _capability(_env(r)))
                     for r in runs if r.result is not None)
    return tuple(Environment(gpu=g, driver=d, cuda_runtime=c, capability=cap, runs=n)
                 for (g, d, c, cap), n in sorted(counts.items()))


def _tally(rows: list[Row]) -> tuple[tuple[Mark, int], ...]:
    counts = Counter(r.mark.word for r in rows)
    marks = {r.mark.word: r.mark for r in rows}
    return tuple((marks[w], n) for w, n in counts.most_common())


def anchor(text: str) -> str:
    return "gpu-" + (re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "unknown")


def _section(gpu: str, runs: list[CellRun], bisections: list[BisectResult],
             columns: tuple[Column, ...]) -> Section:
    groups = _groups(runs, columns, anchor(gpu))
    nightly = [r for r in runs if r.cell.channel is Channel.NIGHTLY]
    return Section(gpu=gpu, anchor=anchor(gpu), headline=build_headline(gpu, runs, bisections),
                   groups=groups, timeline=build_timeline(nightly, bisections),
                   environments=_environments(runs),
                   tally=_tally([row for g in groups for row in g.rows]))


NO_RUNS = ("Nothing has been probed into this store yet: `nox -s matrix` on a machine with an "
           "NVIDIA GPU installs each build and fills it.")


def build_view(runs: list[CellRun], bisections: list[BisectResult], *,
               generated: dt.datetime, empty_reason: str = "",
               examples: tuple[tuple[str, str], ...] = (), links: Links | None = None,
               bench: dict | None = None, runners=None, attendance: Sequence = ()) -> PageView:
    """`runners` (config.runners.Runners, when runners.yaml is read) and the store's
    `attendance` say which declared kinds reported (kinds.py)."""
    # `bisect --script` verdicts come from the user's command, not the probe, and a commit's
    # Python on a nightly's binary (`bisect --pytorch-repo`) is no build: not in the matrix
    # (the commit bisection shows under the nightly bisection it narrows).
    runs = [r for r in runs if not r.cell.probe.startswith("script:")
            and not cells.is_commit(r.cell.id)]
    columns = columns_for(runs)
    by_gpu: dict[str, list[CellRun]] = {}
    for run in runs:
        by_gpu.setdefault(gpu_of(run), []).append(run)
    # Each bisection goes to the GPU model its builds ran on; release bisections have no dates:
    # they are listed, not drawn on the nightly strip.
    owner = [gpu_of_bisection(b, runs, sorted(by_gpu)) for b in bisections]
    sections = tuple(_section(g, rs, [b for b, o in zip(bisections, owner, strict=True)
                                      if o == g and b.before and b.before.date], columns)
                     for g, rs in sorted(by_gpu.items()))
    loose = [b for b, o in zip(bisections, owner, strict=True)
             if not o and b.before and b.before.date]
    newest = max((s.headline.newest_run for s in sections), default="")
    comparison = compare(sections, runs, gpu_of)
    title = (comparison.headline if comparison else
             "; ".join(s.headline.text for s in sections) or "No results yet")
    stamp = generated.astimezone(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return PageView(title=title, generated=stamp,
                    newest_run=newest, columns=columns, sections=sections,
                    bisections=tuple(bisect_view(b, o, several_gpus=len(by_gpu) > 1)
                                     for b, o in zip(bisections, owner, strict=True)),
                    bisection_timeline=build_timeline([], loose) if loose else None,
                    legend=LEGEND, runs=len(runs), empty_reason=empty_reason or NO_RUNS,
                    examples=examples, comparison=comparison,
                    kinds=kind_views(runners.kinds, attendance, sorted(by_gpu)) if runners else (),
                    advice=build_advice(sections, links or Links(), bench) if sections else None)
