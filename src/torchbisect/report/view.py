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
from .headline import build_headline, gpu_of, is_release, nightly_date, public_version, version_key
from .kinds import kind_views
from .logs import split_log
from .marks import CONTROLS, NOT_RUN, Mark, legend_for, mark_for_case, mark_for_run
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


def group_channel(run: CellRun) -> Channel:
    """A preinstalled torch that is a release (2.11.0+cu130) is shown as that release: grouped
    and ordered with the stable ones, its row saying where it came from."""
    if run.cell.channel is Channel.PREINSTALLED and is_release(run):
        return Channel.STABLE
    return run.cell.channel


def row_key(run: CellRun) -> tuple:
    order = list(Channel).index(group_channel(run))
    when = nightly_date(run) if run.cell.channel is Channel.NIGHTLY else ""
    return (order, when, version_key(run.cell.version), run.cell.cuda, run.cell.python,
            run.cell.id)


def _env(run: CellRun) -> dict:
    return run.result.env if run.result else {}


def _seconds(value: float) -> str:
    return f"{value:.2f} s" if value < 10 else f"{value:.0f} s"


_NOT_RUN = CaseCell(mark=NOT_RUN, stale="", time="", detail="this case is not in the run")


def _case_cell(case: CaseResult | None, raw: object = None) -> CaseCell:
    """`raw`: the case's part of the probe's document, whose variants count a compile case."""
    if case is None:
        return _NOT_RUN
    mark = mark_for_case(case)
    stale = ""
    if case.stale_fraction is not None:
        stale = (f"{'flaky: ' if case.flaky else ''}stale {case.stale_trials}/{case.trials} "
                 f"trials ({case.stale_fraction:.0%})")
    elif counted := _variant_counts(raw) if mark.is_affected else None:
        # a compile case counts per variant: the stale one's count, worded as its neighbours'
        name, bad, trials = counted
        stale = f"stale {bad}/{trials} calls ({bad / trials:.0%}) in {name}"
        mark = Mark(kind=mark.kind, icon=mark.icon, word=mark.word, note=f"stale {bad}/{trials}")
    return CaseCell(mark=mark, stale=stale, time=_seconds(case.seconds),
                    detail=public_text(case.detail))


def _variant_counts(raw: object) -> tuple[str, int, int] | None:
    """The first variant that saw stale data, with its counts: (name, stale, trials)."""
    variants = raw.get("variants") if isinstance(raw, dict) else None
    for name, v in (variants.items() if isinstance(variants, dict) else ()):
        if not isinstance(v, dict) or v.get("outcome") != "stale":
            continue
        bad, trials = v.get("stale_trials"), v.get("trials")
        if isinstance(bad, int) and isinstance(trials, int) and 0 < bad <= trials:
            return str(name), bad, trials
    return None


def _run_facts(run: CellRun) -> tuple[Fact, ...]:
    """The build's details (shown when its label is clicked); empty values are left out."""
    env = _env(run)
    pairs = [
        ("infra failure", public_text(run.reason) if run.status is RunStatus.INFRA_FAILURE
         else ""),
        ("cell", run.cell.id),
        ("torch", env.get("torch") or run.cell.version),
        ("from", _origin(run)),
        ("git_version", env.get("git_version")),
        ("CUDA tag", run.cell.cuda),
        ("CUDA runtime", env.get("cuda_runtime")),
        ("cuDNN", cudnn_version(env.get("cudnn"))),
        ("GPU", f"{gpu_of(run)} {_capability(env)}".strip()),
        ("driver", run.driver or env.get("driver")),
        ("Python", env.get("python") or run.cell.python),
        ("backend", run.backend),
        ("started", _when(run.started)),
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


def cudnn_version(number: object) -> str:
    """torch.backends.cudnn.version()'s integer as the version it is: 91900 → 9.19.0 (cuDNN 9
    packs major·10000 + minor·100 + patch), 8902 → 8.9.2 (cuDNN 8: major·1000 + minor·100)."""
    if isinstance(number, bool) or not isinstance(number, int) or number <= 0:
        return str(number) if number else ""
    if number >= 90000:
        return f"{number // 10000}.{number // 100 % 100}.{number % 100}"
    return f"{number // 1000}.{number // 100 % 10}.{number % 100}"


def _when(stamp: str) -> str:
    """`2026-11-29T23:48:45.379326+00:00` → `2026-11-29 23:48:45 UTC`: a time a reader reads
    (and a line breaks between its date and its time, not inside either)."""
    try:
        when = dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return stamp
    if when.tzinfo is None:
        return when.strftime("%Y-%m-%d %H:%M:%S")
    return when.astimezone(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _origin(run: CellRun) -> str:
    """Where a preinstalled torch came from; "" for a build the tool installed."""
    cell = run.cell
    if cell.channel is not Channel.PREINSTALLED:
        return ""
    backend = f", {run.backend} backend" if run.backend else ""
    if cell.base_image:
        return f"preinstalled in the image {cell.base_image}{backend}"
    if cell.interpreter:
        return f"preinstalled for {public_text(cell.interpreter)}{backend}"
    return f"preinstalled: the torch of the python that ran torchbisect{backend}"


def _label(run: CellRun) -> tuple[str, str]:
    """The build's name and its second line: a release by its public version (the CUDA tag is
    said once, on the second line), a nightly by its date."""
    cell = run.cell
    python = cell.python or _probed_python(run)
    if cell.channel is Channel.NIGHTLY:
        return nightly_date(run) or cell.version, f"{cell.version} · py{python}"
    where = " · preinstalled" if cell.channel is Channel.PREINSTALLED else ""
    return (public_version(cell.version) or "torch ?",
            f"{cell.cuda or _probed_cuda(run)} · py{python}{where}")


def row_summary(columns: tuple[Column, ...], cases: tuple[CaseCell, ...]) -> str:
    """The row's cases in a line, for a screen too narrow for their columns: "all 5 cases
    affected; controls as expected", or each state with its count (its case when only one)."""
    measured = [(col, c) for col, c in zip(columns, cases, strict=True)
                if col.name not in CONTROLS and c.mark is not NOT_RUN]
    controls = [(col, c) for col, c in zip(columns, cases, strict=True)
                if col.name in CONTROLS and c.mark is not NOT_RUN]
    by_word: dict[str, list[str]] = {}
    for col, c in measured:
        by_word.setdefault(c.mark.word, []).append(col.title)
    if len({c.mark.word for _, c in measured + controls}) == 1 and len(measured + controls) > 1:
        return f"all {len(measured + controls)} cases {(measured + controls)[0][1].mark.word}"
    if len(by_word) == 1:
        [(word, titles)] = by_word.items()
        parts = [f"all {len(titles)} cases {word}" if len(titles) > 1 else f"{word}: {titles[0]}"]
    else:
        parts = [f"{word}: {titles[0]}" if len(titles) == 1 else f"{len(titles)} {word}"
                 for word, titles in by_word.items()]
    odd = [f"{col.title} {c.mark.word}" for col, c in controls if c.mark.kind != "ctl"]
    if controls:
        parts.append(f"controls: {', '.join(odd)}" if odd else "controls as expected")
    return "; ".join(parts)


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
    raw = run.result.raw.get("cases") if run.result else None
    raw = raw if isinstance(raw, dict) else {}
    cases = () if run.result is None else tuple(
        _case_cell(by_name.get(c.name), raw.get(c.name)) for c in columns)
    label, sub = _label(run)
    return Row(cell_id=run.cell.id, label=label, sub=sub, mark=mark_for_run(run), cases=cases,
               run_line=run_line, facts=_run_facts(run),
               log=split_log(public_text(run.log_excerpt)),
               summary=row_summary(columns, cases) if cases else "", origin=_origin(run))


def _groups(runs: list[CellRun], columns: tuple[Column, ...], where: str) -> tuple[Group, ...]:
    by_channel: dict[Channel, list[Row]] = {}
    for run in sorted(runs, key=row_key):
        by_channel.setdefault(group_channel(run), []).append(build_row(run, columns))
    return tuple(Group(channel=ch.value, title=CHANNEL_TITLES[ch], rows=tuple(rows),
                       folds=fold_rows(rows, fold=ch is Channel.NIGHTLY, anchor=where))
                 for ch, rows in by_channel.items())


def _environments(runs: list[CellRun]) -> tuple[Environment, ...]:
    """Where the verdicts came from, one line per GPU and driver (the CUDA runtime is each
    build's own: its runtimes are listed on that line); an infrastructure failure ran nothing."""
    counts: dict[tuple[str, str, str], Counter] = {}
    for r in runs:
        if r.result is None:
            continue
        key = (gpu_of(r), str(r.driver or _env(r).get("driver") or ""), _capability(_env(r)))
        # `or ""`: a CPU-only torch reports cuda_runtime None, which must not read "CUDA None".
        counts.setdefault(key, Counter())[str(_env(r).get("cuda_runtime") or "")] += 1
    return tuple(Environment(gpu=g, driver=d, capability=cap, runs=sum(c.values()),
                             cuda_runtimes=tuple(sorted(c.items(), key=_by_version)))
                 for (g, d, cap), c in sorted(counts.items()))


def _by_version(item: tuple[str, int]) -> tuple:
    return version_key(item[0])


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


def _marks_shown(sections: tuple[Section, ...]) -> list[Mark]:
    """Every mark drawn in the matrices: run verdicts, case verdicts, folded summaries."""
    marks = []
    for section in sections:
        for group in section.groups:
            for row in group.rows:
                marks += [row.mark, *(c.mark for c in row.cases)]
    return marks


NO_RUNS = ("Nothing has been probed into this store yet: `nox -s matrix` on a machine with an "
           "NVIDIA GPU installs each build and fills it.")


# How each backend's runs are named where the page says what it is drawn from.
_BACKENDS = {"venv": "the venv backend", "docker": "the docker backend",
             "recorded probe JSON": "recorded probe documents"}


def made_with(runs: list[CellRun]) -> str:
    """What sets a page apart from its siblings of the same GPU: how its runs were made
    ("the docker backend (image torchbisect/h200:torch-2.11.0)")."""
    backends = sorted({r.backend for r in runs if r.backend})
    how = " and ".join(_BACKENDS.get(b, f"the {b} backend") for b in backends)
    images = sorted({r.cell.base_image for r in runs if r.cell.base_image})
    if how and images:
        how += f" (image{'s' if len(images) > 1 else ''} {', '.join(images)})"
    return how


def _undated(runs: list[CellRun]) -> str:
    """What the page says for the newest run when no run has a date."""
    if runs and all(r.backend == "recorded probe JSON" for r in runs):
        return "not dated (recorded probe documents carry no date)"
    return "date not recorded"


def build_view(runs: list[CellRun], bisections: list[BisectResult], *,
               generated: dt.datetime, empty_reason: str = "",
               examples: tuple[tuple[str, str], ...] = (), links: Links | None = None,
               bench: dict | None = None, runners=None, attendance: Sequence = (),
               store: str = "") -> PageView:
    """`runners` (config.runners.Runners, when runners.yaml is read) and the store's
    `attendance` say which declared kinds reported (kinds.py); `store` names what the runs
    were read from, as the page may say it (a store's file, the probe documents' pattern)."""
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
    how = made_with(runs)
    if how and sections:  # sibling pages of one GPU differ in how their runs were made
        title = f"{title} · {how}"
    verb = "drawn from" if how == _BACKENDS["recorded probe JSON"] else "measured with"
    source = "; ".join(x for x in (f"{verb} {how}" if how else "",
                                   f"read from {store}" if store else "") if x)
    stamp = generated.astimezone(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    legend, legend_more = legend_for(_marks_shown(sections))
    return PageView(title=title, generated=stamp, source=source,
                    newest_run=newest or _undated(runs), columns=columns, sections=sections,
                    bisections=tuple(bisect_view(b, o, several_gpus=len(by_gpu) > 1)
                                     for b, o in zip(bisections, owner, strict=True)),
                    bisection_timeline=build_timeline([], loose) if loose else None,
                    legend=legend, legend_more=legend_more, runs=len(runs),
                    empty_reason=empty_reason or NO_RUNS,
                    examples=examples, comparison=comparison,
                    kinds=kind_views(runners.kinds, attendance, sorted(by_gpu)) if runners else (),
                    advice=build_advice(sections, links or Links(), bench) if sections else None)
