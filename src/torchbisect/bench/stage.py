"""Benchmarks of the run stage and the probe, as functions returning plain dicts of numbers.

* `cell_overhead`: one cell through the probing step of a matrix run (`run_picked`, as
  `run_matrix` calls it: thread pools, log, store write) against the bare probe script run by
  hand in the same environment, on a warm cache (the cell's environment already prepared).
  Goal: tool / bare ≤ 1.2.
* `rerun_unchanged`: `torchbisect matrix` over an unchanged 20-cell matrix whose verdicts are all
  stored: nothing may be re-run, and the whole command (plan, skip checks, summary, report) should
  take ≤ 2 s.
* `probe_speed`: whole probe runs (every case) with an earlier probe script and with today's,
  side by side in one session on one interpreter, cold (empty Triton and Inductor caches, as for
  a build seen the first time) and warm.  Goal: today's within 15 s a run.
"""

from __future__ import annotations

import hashlib
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ..backends import Purpose, default_backend
from ..backends.base import Backend
from ..cells import dev as dev_id
from ..model import Cell, CellRun, Channel, ProbeResult, RunStatus
from ..probe.scripts import probe_path, probe_version
from ..run import execute
from ..store.db import Store
from ..utils import proc
from ..utils.clock import now
from ..utils.gpus import Gpu, list_gpus

_BENCH = default_backend(Purpose.BENCH).name  # the rerun's backend, and its stored runs'


def cell_overhead(
    *, cell: Cell | None = None, backend: Backend | None = None, repeats: int = 3
) -> dict[str, Any]:
    """Median wall seconds of the bare probe and of the tool for one cell, and their ratio.

    Default: the preinstalled cell on the `current` backend (this interpreter's torch).  When the
    cell cannot be prepared the dict says why under "skipped" and holds no timings.
    """
    from ..backends import backend_class
    from ..cells import preinstalled_cell
    from ..run.matrix_run import run_picked
    from ..run.selection import Selection

    backend = backend or backend_class(default_backend(Purpose.OWN_TORCH).name)()
    cell = cell or preinstalled_cell()
    gpus = list_gpus()
    gpu = gpus[0] if gpus else None
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        staged = execute.prepare(backend, cell, log=tmp_path / "warm.log", gpu=gpu)  # warm cache
        if isinstance(staged, CellRun):  # e.g. no torch in this interpreter
            return {"cell": cell.id, "skipped": staged.reason}
        bare, tool = [], []
        _bare_probe(
            staged.prepared.python, cell, gpu, tmp_path / "warm.json", env=staged.prepared.env
        )  # page cache and bytecode warm for both sides
        with Store(tmp_path / "bench.sqlite") as store:
            for i in range(repeats):
                bare.append(
                    _bare_probe(
                        staged.prepared.python,
                        cell,
                        gpu,
                        tmp_path / f"{i}.json",
                        env=staged.prepared.env,
                    )
                )
                began = time.monotonic()
                (run,) = run_picked(
                    Selection(to_run=(cell,), reused=()),
                    backend=backend,
                    store=store,
                    slots=[gpu],
                    logs=tmp_path / "logs",
                )
                tool.append(time.monotonic() - began)
        bare_s, tool_s = statistics.median(bare), statistics.median(tool)
    return {
        "cell": cell.id,
        "backend": backend.name,
        "gpu": execute.gpu_name(gpu),
        "repeats": repeats,
        "bare_seconds": round(bare_s, 3),
        "tool_seconds": round(tool_s, 3),
        "overhead_seconds": round(tool_s - bare_s, 3),
        "ratio": round(tool_s / bare_s, 3),
        "goal_ratio": 1.2,
        "ok": tool_s / bare_s <= 1.2,
        "verdict": _verdict(run),
    }


def rerun_unchanged(n_cells: int = 20) -> dict[str, Any]:
    """Seconds for `torchbisect matrix` over `n_cells` cells that all have a stored verdict."""
    gpus = list_gpus()
    gpu = gpus[0] if gpus else None
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        cells = _synthetic_matrix(tmp_path / "matrix.yaml", n_cells)
        with Store(tmp_path / "results.sqlite") as store:
            store.add_many(_stored_verdict(c, gpu) for c in cells)
        argv = [
            sys.executable,
            "-m",
            "torchbisect",
            "matrix",
            "--matrix",
            "matrix.yaml",
            "--offline",
            "--allow-no-gpu",
            "--backend",
            _BENCH,
            "--store",
            "results.sqlite",
            "--out",
            "reports",
            "--workdir",
            "work",
        ]
        began = time.monotonic()
        done = proc.run(argv, cwd=tmp_path, check=False)
        seconds = time.monotonic() - began
        with Store(tmp_path / "results.sqlite") as store:
            rerun = len(store.runs()) - n_cells
    if done.returncode != 0:
        raise RuntimeError(f"matrix exited {done.returncode}: {done.output[-2000:]}")
    return {
        "cells": n_cells,
        "seconds": round(seconds, 3),
        "rerun_cells": rerun,
        "goal_seconds": 2.0,
        "ok": rerun == 0 and seconds <= 2.0,
    }


def probe_speed(
    *, python: str, baseline: Path, warm_repeats: int = 2, env: dict[str, str] | None = None
) -> dict[str, Any]:
    """Wall seconds of whole probe runs, `baseline` script against today's, cold then warm."""
    scripts = {"before": Path(baseline), "after": probe_path()}
    seconds: dict[str, dict[str, list[float]]] = {k: {"cold": [], "warm": []} for k in scripts}
    docs: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for kind in ["cold"] + ["warm"] * warm_repeats:  # alternated, so drift hits both alike
            for label, script in scripts.items():
                caches = Path(tmp) / label  # empty for the cold run, which fills it
                took, docs[label] = _timed_probe(
                    python, script, caches, Path(tmp) / "doc.json", env=env
                )
                seconds[label][kind].append(took)
    return _probe_speed_summary(python, seconds, docs)


def _timed_probe(
    python: str, script: Path, caches: Path, out: Path, *, env: dict[str, str] | None
) -> tuple[float, dict[str, Any]]:
    run_env = {
        **(env or {}),
        "TRITON_CACHE_DIR": str(caches / "triton"),
        "TORCHINDUCTOR_CACHE_DIR": str(caches / "inductor"),
    }
    began = time.monotonic()
    proc.run([python, str(script), "--json", str(out)], env=run_env, timeout=1800, check=False)
    return time.monotonic() - began, json.loads(out.read_text())


def _probe_speed_summary(
    python: str, seconds: dict[str, dict[str, list[float]]], docs: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    def median(label: str, kind: str) -> float:
        return round(statistics.median(seconds[label][kind]), 2)

    before, after = docs["before"], docs["after"]
    verdicts = {
        name: [before["cases"].get(name, {}).get("verdict"), case["verdict"]]
        for name, case in after["cases"].items()
    }
    return {
        "python": python,
        "torch": after["env"].get("torch"),
        "gpu": after["env"].get("gpu"),
        "before_probe_version": before.get("probe_version"),
        "after_probe_version": after.get("probe_version"),
        "seconds": {
            label: {kind: [round(s, 2) for s in runs] for kind, runs in kinds.items()}
            for label, kinds in seconds.items()
        },
        "cold": {"before": median("before", "cold"), "after": median("after", "cold")},
        "warm": {"before": median("before", "warm"), "after": median("after", "warm")},
        "case_seconds": {
            name: [before["cases"].get(name, {}).get("wall_seconds"), case.get("wall_seconds")]
            for name, case in after["cases"].items()
        },
        "verdicts": verdicts,
        "same_verdicts": all(a == b for a, b in verdicts.values()),
        "goal_seconds": 15.0,
        "ok": max(median("after", "cold"), median("after", "warm")) <= 15.0,
    }


def _bare_probe(
    python: str, cell: Cell, gpu: Gpu | None, out: Path, *, env: dict[str, str]
) -> float:
    from ..backends.venv import gpu_env
    from ..utils import proc

    argv = [python, str(probe_path(cell.probe)), *execute.probe_args(cell), "--json", str(out)]
    began = time.monotonic()
    proc.run(
        argv, env={**env, **gpu_env(gpu.index if gpu else None)}, check=False, timeout=cell.timeout
    )
    return time.monotonic() - began


def _synthetic_matrix(path: Path, n: int) -> list[Cell]:
    """A matrix of `n` dev wheels with known sha256s (nothing to download or hash to plan it)."""
    lines = ["dev:"]
    cells = []
    for i in range(n):
        name, sha = f"bench{i:02d}", hashlib.sha256(f"bench{i}".encode()).hexdigest()
        url = f"https://wheels.invalid/torch-2.99.{i}%2Bcpu-py3-none-any.whl"
        lines += [f"  - wheel: {url}", f"    sha256: {sha}", f"    name: {name}"]
        cells.append(
            Cell(
                id=dev_id(name),
                channel=Channel.DEV,
                version=f"2.99.{i}+cpu",
                cuda="cpu",
                python="3",
                url=url,
                sha256=sha,
            )
        )
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return cells


def _stored_verdict(cell: Cell, gpu: Gpu | None) -> CellRun:
    doc = {
        "schema": 1,
        "probe": cell.probe,
        "verdict": "skipped",
        "cases": {"capture_data_ptr": {"verdict": "skipped"}},
    }
    return CellRun(
        cell=cell,
        status=RunStatus.OK,
        result=ProbeResult.from_json(doc),
        wheel_sha256=cell.sha256 or "",
        probe_version=probe_version(cell.probe),
        gpu=execute.gpu_name(gpu),
        driver=gpu.driver if gpu else "",
        backend=_BENCH,
        started=now(),
    )


def _verdict(run: CellRun) -> str:
    return run.verdict.value if run.verdict else f"infra failure: {run.reason}"
