"""One build's row: its name, its case cells, its details, its summary in a line and its log.

`build_row(run, columns)` is the whole of it; view.py groups the rows into sections.  Strings from
probes and logs stay raw here (made public: no runner's paths); escaping is the template's job.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from .. import cells
from ..model import CaseResult, Cell, CellRun, Channel, RunStatus, Verdict
from .headline import gpu_of, nightly_date, public_version
from .logs import split_log
from .marks import NOT_RUN, Mark, mark_for_case, mark_for_run
from .parts import CaseCell, Column, Fact, Row
from .public import public_text, public_url


def env_of(run: CellRun) -> dict[str, Any]:
    return run.result.env if run.result else {}


def _seconds(value: float) -> str:
    return f"{value:.2f} s" if value < 10 else f"{value:.0f} s"


_NOT_RUN = CaseCell(mark=NOT_RUN, rate="", time="", detail="this case is not in the run")


def _case_cell(
    case: CaseResult | None,
    raw: object = None,
    controls: dict[str, Verdict] | None = None,
    variants: dict[str, str] | None = None,
) -> CaseCell:
    """`raw`: the case's part of the probe's document, whose variants (as the probe's VARIANTS
    says where they are) count a case that tries several; `controls`: the probe's, as
    mark_for_case takes them."""
    if case is None:
        return _NOT_RUN
    mark = mark_for_case(case, controls)
    rate = ""
    if case.stale_fraction is not None:
        # a plain script asked again on one build counts its runs (report/repeats.py)
        runs = isinstance(raw, dict) and raw.get("counted") == "runs"
        unit = "runs" if runs else "trials"
        rate = (
            f"{'flaky: ' if case.flaky else ''}affected on {case.stale_trials}/{case.trials} "
            f"{unit} ({case.stale_fraction:.0%})"
        )
    elif counted := _variant_counts(raw, variants or {}) if mark.is_affected else None:
        # a case of variants counts per variant: the affected one's count, as its neighbours'
        name, bad, trials = counted
        unit = (variants or {}).get("unit") or "trials"
        rate = f"affected on {bad}/{trials} {unit} ({bad / trials:.0%}) in {name}"
        mark = Mark(kind=mark.kind, icon=mark.icon, word=mark.word, note=f"{bad}/{trials}")
    return CaseCell(
        mark=mark, rate=rate, time=_seconds(case.seconds), detail=public_text(case.detail)
    )


def _variant_counts(raw: object, declared: dict[str, str]) -> tuple[str, int, int] | None:
    """The first variant the document says was affected, with its counts: (name, affected
    trials, trials).  Where the variants are and what an affected one's `outcome` says are the
    probe's (VARIANTS: `key`, `affected`); a probe that declares none has none counted."""
    key, affected = declared.get("key"), declared.get("affected")
    variants = raw.get(key) if key and affected and isinstance(raw, dict) else None
    for name, v in variants.items() if isinstance(variants, dict) else ():
        if not isinstance(v, dict) or v.get("outcome") != affected:
            continue
        bad, trials = v.get("stale_trials"), v.get("trials")
        if isinstance(bad, int) and isinstance(trials, int) and 0 < bad <= trials:
            return str(name), bad, trials
    return None


def _run_facts(run: CellRun) -> tuple[Fact, ...]:
    """The build's details (shown when its label is clicked); empty values are left out."""
    env = env_of(run)
    pairs = [
        ("infra failure", public_text(run.reason) if run.status is RunStatus.INFRA_FAILURE else ""),
        ("cell", run.cell.id),
        ("torch", env.get("torch") or run.cell.version),
        ("from", _origin(run)),
        ("git_version", env.get("git_version")),
        ("CUDA tag", run.cell.cuda),
        (
            "yanked",
            (public_text(run.cell.yanked) or "yes, no reason given")
            if run.cell.yanked is not None
            else "",
        ),
        ("CUDA runtime", env.get("cuda_runtime")),
        ("cuDNN", cudnn_version(env.get("cudnn"))),
        ("GPU", f"{gpu_of(run)} {capability(env)}".strip()),
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


def capability(env: dict[str, Any]) -> str:
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
        return nightly_date(run) or cell.version, f"{cell.version} · py{python}{_marks(cell)}"
    where = " · preinstalled" if cell.channel is Channel.PREINSTALLED else ""
    return (
        public_version(cell.version) or "torch ?",
        f"{cell.cuda or _probed_cuda(run)} · py{python}{where}{_marks(cell)}",
    )


def _marks(cell: Cell) -> str:
    """A re-spin's build tag and a yanked file, said beside the build's name."""
    try:
        build = cells.parse(cell.id).build
    except ValueError:
        build = ""
    return (f" · build {build}" if build else "") + (" · yanked" if cell.yanked is not None else "")


def row_summary(columns: tuple[Column, ...], cases: tuple[CaseCell, ...]) -> str:
    """The row's cases in a line, for a screen too narrow for their columns: "all 5 cases
    affected; controls as expected", or each state with its count (its case when only one)."""
    measured = [
        (col, c)
        for col, c in zip(columns, cases, strict=True)
        if col.expected is None and c.mark is not NOT_RUN
    ]
    controls = [
        (col, c)
        for col, c in zip(columns, cases, strict=True)
        if col.expected is not None and c.mark is not NOT_RUN
    ]
    by_word: dict[str, list[str]] = {}
    for col, c in measured:
        by_word.setdefault(c.mark.word, []).append(col.title)
    if len({c.mark.word for _, c in measured + controls}) == 1 and len(measured + controls) > 1:
        return f"all {len(measured + controls)} cases {(measured + controls)[0][1].mark.word}"
    if len(by_word) == 1:
        [(word, titles)] = by_word.items()
        parts = [f"all {len(titles)} cases {word}" if len(titles) > 1 else f"{word}: {titles[0]}"]
    else:
        parts = [
            f"{word}: {titles[0]}" if len(titles) == 1 else f"{len(titles)} {word}"
            for word, titles in by_word.items()
        ]
    odd = [f"{col.title} {c.mark.word}" for col, c in controls if c.mark.kind != "ctl"]
    if controls:
        parts.append(f"controls: {', '.join(odd)}" if odd else "controls as expected")
    return "; ".join(parts)


def _probed_cuda(run: CellRun) -> str:
    """A preinstalled torch's CUDA build, as the probe saw it ("cu130" from "2.11.0+cu130")."""
    local = str(env_of(run).get("torch", "")).partition("+")[2]
    return local or "cuda ?"


def _probed_python(run: CellRun) -> str:
    return ".".join(str(env_of(run).get("python", "?")).split(".")[:2])


def build_row(run: CellRun, columns: tuple[Column, ...]) -> Row:
    controls = {c.name: c.expected for c in columns if c.expected is not None}
    env = env_of(run)
    git = str(env.get("git_version", ""))[:12]
    driver = run.driver or env.get("driver")
    run_line = " · ".join(
        x
        for x in (
            gpu_of(run),
            f"driver {driver}" if driver else "",
            f"torch git {git}" if git else "",
        )
        if x
    )
    by_name = {c.name: c for c in run.result.cases} if run.result else {}
    raw = run.result.raw.get("cases") if run.result else None
    raw = raw if isinstance(raw, dict) else {}
    cases = (
        ()
        if run.result is None
        else tuple(
            _case_cell(by_name.get(c.name), raw.get(c.name), controls, dict(c.variants))
            for c in columns
        )
    )
    label, sub = _label(run)
    return Row(
        cell_id=run.cell.id,
        label=label,
        sub=sub,
        mark=mark_for_run(run),
        cases=cases,
        run_line=run_line,
        facts=_run_facts(run),
        log=split_log(public_text(run.log_excerpt)),
        summary=row_summary(columns, cases) if cases else "",
        origin=_origin(run),
    )
