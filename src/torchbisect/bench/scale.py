"""The page at the size of a scheduled service: three years of daily nightlies on four GPU kinds.

`torchbisect bench --parts scale` (part of `nox -s bench`; no GPU needed, it measures the report)
writes a real result store of about 4,400 runs (each with a log excerpt the size of the H200
evidence's, some flaky days, some infrastructure failures, days without a nightly), a regression
and a fix bisection per GPU kind, and the attendance of every daily run's shards (the four kinds
of a runners.yaml, x86_64 and aarch64, one of them offline for the last days), then runs
`torchbisect report --runners` on it in a fresh process, as the scheduled build does (five
times: the median counts), and measures: the wall time, the peak memory of that process, the
size of the page and of all it publishes, and, when Chromium is at hand, whether the page holds
on a 390×844 phone (the document does not scroll sideways).  Goals: report ≤ 3 s, index.html
≤ 1.5 MB.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import cells
from ..errors import CommandFailed
from ..model import Verdict
from ..outcome import BisectResult, Direction, NightlyPoint, Outcome
from ..utils import proc

if TYPE_CHECKING:
    from ..model import Attendance, CellRun
    from .synthetic import Outcome as CaseOutcome  # a case's verdict or trials

GOAL_SECONDS = 3.0
REPEATS = 5
GOAL_PAGE_BYTES = 1_500_000
PHONE = (390, 844)
# (GPU model, driver, the day its nightlies turned affected, the day they were fixed)
KINDS = (
    ("NVIDIA H100 80GB HBM3", "575.57.08", "2024-06-10", "2026-06-02"),
    ("NVIDIA H200", "580.159.04", "2024-06-10", "2026-06-02"),
    ("NVIDIA GH200 480GB", "580.65.06", "2024-06-10", "2026-06-02"),
    ("NVIDIA GB300", "580.65.06", "2024-06-10", "2026-06-09"),
)
# The same kinds as runners.yaml declares them: (name, platform, shards), in KINDS' order
RUNNER_KINDS = (
    ("H100", "linux_x86_64", 2),
    ("H200", "linux_x86_64", 2),
    ("GH200", "linux_aarch64", 1),
    ("GB300", "linux_aarch64", 1),
)
OFFLINE_DAYS = 4  # GB300's runners are offline for the last days: the page says so
FIRST_DAY = dt.date(2023, 12, 1)
DAYS = 3 * 365 + 1
STABLE = (
    "2.3.0",
    "2.4.0",
    "2.5.0",
    "2.6.0",
    "2.7.0",
    "2.8.0",
    "2.9.0",
    "2.10.0",
    "2.11.0",
    "2.12.0",
    "2.13.0",
    "2.14.1",
    "2.15.0",
    "2.16.0",
    "2.17.0",
)
BAD: dict[str, CaseOutcome] = {
    "capture_data_ptr": (5, 5),
    "capture_write": (5, 5),
    "side_stream": (20, 20),
    "compile_reduce_overhead": Verdict.AFFECTED,
    "raw_pointer_triton": (5, 5),
}
GOOD: dict[str, CaseOutcome] = {
    "capture_data_ptr": (0, 5),
    "capture_write": (0, 5),
    "side_stream": (0, 20),
    "compile_reduce_overhead": Verdict.NOT_AFFECTED,
    "raw_pointer_triton": (0, 5),
}
FIXED: dict[str, CaseOutcome] = {
    **GOOD,
    "capture_data_ptr": Verdict.REFUSED,
    "capture_write": Verdict.REFUSED,
}


def _log(cell_id: str, version: str, started: str) -> str:
    """A log excerpt shaped like the H200 evidence's (about 3 KB): the venv, the install, the
    probe's lines, with the runner's absolute paths in it as a real log has them."""
    venv = f"/home/runner/work/torchbisect/.torchbisect/venvs/{cell_id}"
    wheel = f"torch-{version}-cp312-cp312-manylinux_2_28_x86_64.whl"
    warn = (
        "warning: The `UV_NATIVE_TLS` environment variable is deprecated and will be removed "
        "in a future release. Use `UV_SYSTEM_CERTS` instead.\n"
    )
    cases = "".join(
        f"[stale_replay] {name:<24} affected       0.4 s (2.6 s wall)\n" for name in BAD
    )
    return (
        f"# torchbisect: {cell_id} started {started} backend=venv\n"
        f"$ /usr/local/bin/uv venv --no-project --python /usr/bin/python3.12 {venv}\n{warn}"
        f"Using CPython 3.12.3 interpreter at: /usr/bin/python3.12\n"
        f"Creating virtual environment at: .torchbisect/venvs/{cell_id}\n"
        f"$ /usr/local/bin/uv pip install --python {venv}/bin/python --no-deps "
        f"'torch @ https://download.pytorch.org/whl/nightly/cu130/{wheel}'\n{warn}{warn}"
        f"Resolved 1 package in 27ms\nPrepared 1 package in 5.47s\n"
        f"Installed 1 package in 2.34s\nBytecode compiled 2372 files in 816ms\n"
        f" + torch=={version}\n"
        f"$ {venv}/bin/python /home/runner/work/torchbisect/probes/stale_replay.py --trials 20 "
        f"--json /home/runner/work/torchbisect/.torchbisect/probe-json/{cell_id}.json\n"
        f"{cases}[stale_replay] verdict: affected (exit 1) in 24.5 s\n"
    )


def _outcomes(day: dt.date, bad_from: str, fixed_from: str, i: int) -> dict[str, CaseOutcome]:
    iso = day.isoformat()
    if iso < bad_from:
        return GOOD
    if iso >= fixed_from:
        return FIXED
    if i % 23 == 5:  # now and then the side-stream race is lost only some of the time
        return {**BAD, "side_stream": (7 + i % 11, 20)}
    return BAD


def scale_runs() -> tuple[list[CellRun], list[BisectResult]]:
    """The runs and bisections of three years of daily nightlies on each GPU kind."""
    from .synthetic import synthetic_run

    runs, bisections = [], []
    for k, (gpu, driver, bad_from, fixed_from) in enumerate(KINDS):
        for i in range(DAYS):
            day = FIRST_DAY + dt.timedelta(days=i)
            if i % 37 == 11 or not _reported(k, i):  # no nightly that day, or runners offline
                continue
            version = f"2.{3 + i // 90}.0.dev{day:%Y%m%d}+cu130"
            started = f"{day}T0{k + 4}:00:00Z"
            cell_id = cells.nightly(day.isoformat(), "cu130", "3.12")
            log = _log(cell_id, version, started)
            if (i + 13 * k) % 97 == 13:
                runs.append(
                    synthetic_run(
                        version,
                        gpu=gpu,
                        driver=driver,
                        started=started,
                        infra="wheel download: HTTP 503",
                        log=log,
                    )
                )
                continue
            runs.append(
                synthetic_run(
                    version,
                    _outcomes(day, bad_from, fixed_from, i),
                    gpu=gpu,
                    driver=driver,
                    started=started,
                    log=log,
                )
            )
        for j, version in enumerate(STABLE):
            state = GOOD if j < 3 else FIXED if j >= 13 else BAD
            runs.append(
                synthetic_run(
                    f"{version}+cu130",
                    state,
                    gpu=gpu,
                    driver=driver,
                    started=f"{FIRST_DAY + dt.timedelta(days=DAYS)}T03:00:00Z",
                    log=_log(f"stable-{version}", version, ""),
                )
            )
        bisections += [
            _bisection(Direction.REGRESSION, bad_from),
            _bisection(Direction.FIX, fixed_from),
        ]
    return runs, bisections


def _reported(kind: int, day: int) -> bool:
    """Whether kind `kind`'s runners ran the matrix on day `day`: all but GB300's last days."""
    return kind != len(KINDS) - 1 or day < DAYS - OFFLINE_DAYS


def runners_yaml() -> str:
    """The runners.yaml that declares the four kinds."""
    entries = []
    for (name, platform_, shards), (gpu, driver, *_) in zip(RUNNER_KINDS, KINDS, strict=True):
        arch = "x64" if platform_ == "linux_x86_64" else "ARM64"
        entries.append(
            f"  - name: {name}\n    gpu: {gpu}\n"
            f"    labels: [self-hosted, linux, {arch}, {name.lower()}]\n"
            f'    platform: {platform_}\n    driver: "{driver}"\n'
            f"    shards: {shards}\n"
        )
    return "kinds:\n" + "".join(entries)


def scale_attendance() -> list[Attendance]:
    """Each daily run's shards, as `matrix --kind` stores them: one run a day (its new nightly
    probed by shard 1, the other cells reused), every kind's shards but an offline kind's."""
    from ..model import Attendance

    rows = []
    for i in range(DAYS):
        day = FIRST_DAY + dt.timedelta(days=i)
        for k, (name, _, shards) in enumerate(RUNNER_KINDS):
            if not _reported(k, i):
                continue
            cells = (min(i, 60) // 7 + len(STABLE)) // shards + 1
            for n in range(1, shards + 1):
                probed = int(n == 1 and i % 37 != 11)
                rows.append(
                    Attendance(
                        kind=name,
                        shard=f"{n}/{shards}",
                        run=f"{7000 + i}-1",
                        gpu=KINDS[k][0],
                        host=f"{name.lower()}-runner-{n}",
                        started=f"{day}T0{k + 4}:00:00Z",
                        finished=f"{day}T0{k + 4}:40:00Z",
                        cells=cells,
                        probed=probed,
                        reused=cells - probed,
                        failed=int((i + 13 * k) % 97 == 13),
                    )
                )
    return rows


def _bisection(direction: Direction, first: str) -> BisectResult:
    after = dt.date.fromisoformat(first)
    before = after - dt.timedelta(days=1)

    def point(day: dt.date, verdict: Outcome) -> NightlyPoint:
        return NightlyPoint(
            date=day.isoformat(),
            version=f"2.x.0.dev{day:%Y%m%d}+cu130",
            verdict=verdict,
            main_sha=f"{day:%Y%m%d}" * 5,
        )

    old, new = (Outcome.GOOD, Outcome.BAD)
    shas = f"{before:%Y%m%d}{'0' * 32}...{after:%Y%m%d}{'0' * 32}"
    return BisectResult(
        direction=direction,
        case="capture_data_ptr",
        cuda="cu130",
        python="3.12",
        before=point(before, old),
        after=point(after, new),
        probes=9,
        compare_url=f"https://github.com/pytorch/pytorch/compare/{shas}",
    )


def measure_scale() -> dict[str, Any]:
    """Write the store, render it with `torchbisect report` in a child process, measure."""
    from ..store.db import Store

    runs, bisections = scale_runs()
    attendance = scale_attendance()
    with tempfile.TemporaryDirectory() as tmp:
        store, out = Path(tmp) / "results.sqlite", Path(tmp) / "site"
        runners = Path(tmp) / "runners.yaml"
        runners.write_text(runners_yaml(), encoding="utf-8")
        with Store(store) as db:
            db.add_many(runs)
            for b in bisections:
                db.add_bisection(b)
            db.add_attendance_many(attendance)
        phases = _phases(store, runners, Path(tmp) / "phases")
        argv = [
            sys.executable,
            "-m",
            "torchbisect",
            "report",
            "--store",
            str(store),
            "--out",
            str(out),
            "--matrix",
            str(Path(tmp) / "none.yaml"),
            "--runners",
            str(runners),
        ]
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        times = []
        for _ in range(REPEATS):  # the same report again: a loaded machine varies by ±20 %
            began = time.perf_counter()
            # Not proc.run: this call is what is timed, and proc's sweep after the child exits
            # (its group, then /proc for its token) would be counted as the report's time.
            subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
            times.append(round(time.perf_counter() - began, 2))
        seconds = statistics.median(times)
        peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        files = [p for p in out.rglob("*") if p.is_file()]
        page = out / "index.html"
        html = page.read_text(encoding="utf-8")
        figures = {
            "runs": len(runs),
            "gpu_kinds": [k[0] for k in KINDS],
            "days": DAYS,
            "bisections": len(bisections),
            "attendance_rows": len(attendance),
            "runner_kinds": {name: platform_ for name, platform_, _ in RUNNER_KINDS},
            "offline_kind": {
                "name": RUNNER_KINDS[-1][0],
                "days": OFFLINE_DAYS,
                "said_on_page": _said_offline(html),
            },
            "report_seconds": round(seconds, 2),
            "report_seconds_runs": times,
            "goal_report_seconds": GOAL_SECONDS,
            "report_note": f"the median of {REPEATS} runs of `torchbisect report --store S --out D "
            "--runners R` in a fresh process, start to "
            "exit",
            **phases,
            # ru_maxrss of children is the largest of any child so far: this one's when it grew
            "peak_rss_mib": round(peak_kib / 1024, 1) if peak_kib > before else None,
            "page_bytes": page.stat().st_size,
            "goal_page_bytes": GOAL_PAGE_BYTES,
            "page_details": html.count("<details"),
            "page_rows": html.count("<tr"),
            "published_files": len(files),
            "published_bytes": sum(p.stat().st_size for p in files),
            "not_bisected_edges": html.count("not bisected"),
            "phone": _phone(page),
            "phone_fold_page": _phone(min((out / "nightlies").glob("*.html"))),
            "machine": machine(),
        }
    figures["ok"] = (
        figures["report_seconds"] <= GOAL_SECONDS
        and figures["page_bytes"] <= GOAL_PAGE_BYTES
        and figures["phone"].get("holds", True) is not False
        and figures["phone_fold_page"].get("holds", True) is not False
    )
    return figures


def _said_offline(html: str) -> bool:
    """Whether the page names the offline kind as not reporting in the latest run."""
    return RUNNER_KINDS[-1][0] in html and "did not report in the latest run" in html


def _phases(store: Path, runners: Path, out: Path) -> dict[str, Any]:
    """Where the report's time goes, measured in this process: reading the store, drawing and
    writing the files."""
    from ..config.runners import load_runners
    from ..report import render_runs
    from ..store.db import Store

    began = time.perf_counter()
    with Store(store) as db:
        runs, bisections, attendance = db.latest(), db.bisections(), db.attendance()
    read = time.perf_counter() - began
    began = time.perf_counter()
    render_runs(
        runs,
        bisections,
        out,
        generated=dt.datetime.now(dt.timezone.utc),
        runners=load_runners(runners),
        attendance=attendance,
    )
    return {
        "store_read_seconds": round(read, 2),
        "render_seconds": round(time.perf_counter() - began, 2),
    }


def _phone(page: Path) -> dict[str, Any]:
    """Whether the page holds at 390×844 in headless Chromium (pages/chromium.py, the tests'
    driver too); said as not measured when chromium is missing."""
    helper = Path(__file__).parent.parent / "pages" / "chromium.py"  # the standard library only
    probe = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); from chromium import Browser\n"
        "with Browser(390, 844, mobile=True) as b:\n"
        "    b.open(__import__('pathlib').Path(sys.argv[2]))\n"
        "    print(json.dumps([b.eval('document.documentElement.scrollWidth'),\n"
        "                      b.eval('document.body.scrollWidth')]))\n"
    )
    with tempfile.TemporaryDirectory(prefix="torchbisect-phone-") as tmp:
        out = Path(tmp) / "stdout"  # the widths, apart from the stderr that says why not
        try:
            done = proc.run(
                [sys.executable, "-c", probe, str(helper.parent), str(page)],
                timeout=180,
                stdout=out,
                check=False,
            )
        except (OSError, CommandFailed) as err:
            return {"measured": False, "why": f"chromium: {err}"}
        if done.returncode != 0:
            return {"measured": False, "why": (done.output.strip().splitlines() or ["?"])[-1]}
        widths = json.loads(out.read_text())
    return {
        "measured": True,
        "viewport": list(PHONE),
        "scroll_width": max(widths),
        "holds": max(widths) <= PHONE[0],
    }


def machine() -> dict[str, Any]:
    return {
        "cpu": _cpu_name(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "system": f"{platform.system()} {platform.machine()}",
    }


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def write_scale(out: Path | None) -> dict[str, Any]:
    """Measure, print, and write scale.json and scale.svg into `out` (when given)."""
    from . import plots
    from .figures import write

    figures = measure_scale()
    write(out, "scale.json", json.dumps(figures, indent=2) + "\n")
    bars = {
        "report (s)": figures["report_seconds"],
        "index.html (MB)": round(figures["page_bytes"] / 1e6, 2),
    }
    goals = {"report (s)": GOAL_SECONDS, "index.html (MB)": GOAL_PAGE_BYTES / 1e6}
    write(
        out,
        "scale.svg",
        plots.bar_chart(
            f"report on {figures['runs']:,} runs ({len(KINDS)} GPU kinds × 3 years of nightlies)",
            "",
            bars,
            goals,
        ),
    )
    print(json.dumps(figures, indent=2))
    return figures
