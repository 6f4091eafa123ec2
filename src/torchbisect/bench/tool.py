"""What torchbisect itself costs: the tool parts of `torchbisect bench`, into tool.json and .svg.

* `overhead`: one cell through the scheduler against the bare probe (bench/stage.py).
* `rerun`: `torchbisect matrix` over 20 cells whose verdicts are all stored.
* `plan`: planning 1,000 nightly dates against a local index in PyTorch's format, over HTTP.
* `render`: building and writing the four report files for 2,000 synthetic cells.
* `gpus`: one matrix on one GPU, then on all (needs two GPUs and a matrix file).

Each figure is measured in this run and reported with its goal; nothing is asserted.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from . import plots
from .figures import write

PARTS = ("overhead", "rerun", "plan", "render", "gpus")


def measure(
    parts: list[str],
    *,
    out: Path | None,
    overhead_cases: str = "",
    gpu_matrix: Path | None = None,
    backend: str | None = None,
) -> None:
    """Measure the tool `parts` asked for, print them and write tool.json/.svg into `out`;
    `backend` for the 'gpus' part (None: the benchmarks' own, backends.Purpose.BENCH)."""
    from ..backends import Purpose, default_backend
    from ..cells import preinstalled_cell
    from .stage import cell_overhead, rerun_unchanged

    cases = tuple(c for c in overhead_cases.split(",") if c)
    run = {
        "overhead": lambda: cell_overhead(cell=preinstalled_cell(cases=cases)),
        "rerun": lambda: rerun_unchanged(20),
        "plan": lambda: plan_dates(1000),
        "render": lambda: render_cells(2000),
        "gpus": lambda: gpu_speedup(
            gpu_matrix, backend=backend or default_backend(Purpose.BENCH).name
        ),
    }
    tool = {name: run[name]() for name in parts if name in PARTS}
    if tool:
        _write(out, tool)


def plan_dates(n_dates: int = 1000) -> dict[str, Any]:
    """Seconds to plan `n_dates` nightly dates (a gap every 97 days, a version bump half way)."""
    from ..config.matrix import load_matrix
    from ..plan.resolve import build_plan
    from .nightly_index import daily, serve, write_nightly_index

    first = date(2023, 12, 1)
    days = daily(
        first, n_dates, skip=frozenset(first + timedelta(days=d) for d in range(3, n_dates, 97))
    )
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_nightly_index(
            root, days, cuda="cu130", version="2.17.0", bump=(days[len(days) // 2], "2.18.0")
        )
        matrix = root / "matrix.yaml"
        with serve(root) as url:
            matrix.write_text(
                f"indexes:\n  nightly: {url}/whl/nightly/{{cuda}}/\n"
                f"nightly:\n  from: {first}\n  to: {days[-1]}\n  cuda: cu130\n"
            )
            began = time.perf_counter()
            plan = build_plan(
                load_matrix(matrix),
                lock=None,
                python="3.12",
                platform="linux_x86_64",
                driver="580.65.06",
                today=days[-1],
            )
            seconds = time.perf_counter() - began
    return {
        "dates": n_dates,
        "cells": len(plan.cells),
        "missing": len(plan.missing),
        "seconds": round(seconds, 3),
        "transport": "HTTP on 127.0.0.1",
    }


def render_cells(n_cells: int = 2000, repeat: int = 3) -> dict[str, Any]:
    """Seconds to build and write all four report files for `n_cells` synthetic runs (goal: < 1 s).

    `seconds` is the best of `repeat` renders (as timeit reports); `first_seconds` includes
    compiling the templates, as a fresh `torchbisect report` process pays it.
    """
    from ..report import render_runs
    from .synthetic import synthetic_runs

    runs = synthetic_runs(n_cells)
    times = []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(max(1, repeat)):
            begin = time.perf_counter()
            paths = render_runs(runs, [], Path(tmp), generated=dt.datetime.now(dt.timezone.utc))
            times.append(time.perf_counter() - begin)
        sizes = {p.name: p.stat().st_size for p in paths}
    return {
        "cells": n_cells,
        "seconds": round(min(times), 3),
        "first_seconds": round(times[0], 3),
        "goal_seconds": 1.0,
        "ok": min(times) < 1.0,
        "bytes": sizes,
    }


def gpu_speedup(matrix: Path | None, *, backend: str) -> dict[str, Any]:
    """The same matrix on the first GPU alone, then on every GPU; environments already built."""
    from ..utils.gpus import list_gpus

    gpus = list_gpus()
    if len(gpus) < 2:
        return {"skipped": f"{len(gpus)} GPU(s) visible; this part needs at least two"}
    times = {}
    with tempfile.TemporaryDirectory() as tmp:
        for label, visible in (
            ("warm-up", None),
            ("one GPU", str(gpus[0].index)),
            ("all GPUs", None),
        ):
            env = dict(os.environ)
            if visible is not None:
                env["CUDA_VISIBLE_DEVICES"] = visible
            argv = [
                sys.executable,
                "-m",
                "torchbisect",
                "matrix",
                "--matrix",
                str(matrix),
                "--backend",
                backend,
                "--force",
                "--no-report",
                "--store",
                str(Path(tmp) / f"{label}.sqlite"),
            ]
            print(f"bench: gpus: {label}: {' '.join(argv)}", file=sys.stderr)
            began = time.monotonic()
            # Not proc.run: the matrix's own progress goes to this terminal as it happens.
            subprocess.run(argv, env=env, check=True)
            times[label] = time.monotonic() - began
    return {
        "gpus": len(gpus),
        "gpu": gpus[0].name,
        "one_gpu_seconds": round(times["one GPU"], 2),
        "all_gpus_seconds": round(times["all GPUs"], 2),
        "speedup": round(times["one GPU"] / times["all GPUs"], 2),
        "goal_speedup": 1.8,
    }


def _write(out: Path | None, tool: dict[str, Any]) -> None:
    write(out, "tool.json", json.dumps(tool, indent=2) + "\n")
    bars, goals = {}, {}
    if "ratio" in tool.get("overhead", {}):
        bars["cell / bare probe"], goals["cell / bare probe"] = tool["overhead"]["ratio"], 1.2
    if "seconds" in tool.get("rerun", {}):
        bars["re-run 20 cells (s)"], goals["re-run 20 cells (s)"] = tool["rerun"]["seconds"], 2.0
    if "seconds" in tool.get("plan", {}):
        bars["plan 1,000 dates (s)"] = tool["plan"]["seconds"]
    if "seconds" in tool.get("render", {}):
        bars["render 2,000 (s)"], goals["render 2,000 (s)"] = tool["render"]["seconds"], 1.0
    if "speedup" in tool.get("gpus", {}):
        bars["GPU speed-up"], goals["GPU speed-up"] = tool["gpus"]["speedup"], 1.8
    if bars:
        write(
            out,
            "tool.svg",
            plots.bar_chart("torchbisect overhead (measured in one run)", "", bars, goals),
        )
    print(json.dumps(tool, indent=2))
