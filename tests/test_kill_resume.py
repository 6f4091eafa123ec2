"""SIGKILL in the middle of `torchbisect matrix` (probes running, the next venvs being built),
then run it again: every cell ends with exactly one verdict, and the ones stored before the kill
are kept and not probed again.  Cheap cells: stand-in torch wheels and a probe that sleeps."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter

import pytest
from helpers import FAKE_PROBES, fake_torch_wheel

from torchbisect.model import RunStatus
from torchbisect.store.db import Store

CELLS = 6


def _stored(path) -> int:
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
        try:
            return db.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
        finally:
            db.close()
    except sqlite3.OperationalError:
        return 0  # not created yet


@pytest.mark.skipif(shutil.which("uv") is None, reason="uv is not installed")
def test_a_run_killed_midway_resumes_with_no_cell_lost_or_duplicated(tmp_path):
    wheels = [fake_torch_wheel(tmp_path / "wheels", f"2.99.{i}+cpu") for i in range(CELLS)]
    entries = "".join(f"  - wheel: {w}\n    name: k{i}\n    overlay: true\n"
                      for i, w in enumerate(wheels))
    (tmp_path / "matrix.yaml").write_text(f"defaults:\n  timeout: 120\ndev:\n{entries}")
    argv = [sys.executable, "-m", "torchbisect", "matrix", "--matrix", "matrix.yaml",
            "--offline", "--allow-no-gpu", "--backend", "venv", "--store", "results.sqlite",
            "--out", "reports", "--workdir", "work", "--no-report"]
    env = {**os.environ, "TORCHBISECT_PROBES": str(FAKE_PROBES), "TB_FAKE_SLEEP": "1.0"}
    store = tmp_path / "results.sqlite"

    child = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while _stored(store) < 2 and time.monotonic() < deadline and child.poll() is None:
        time.sleep(0.05)
    child.send_signal(signal.SIGKILL)
    child.wait()
    with Store(store) as opened:
        before = {r.cell.id: r.run_id for r in opened.runs()}
    assert 2 <= len(before) < CELLS, "the kill came too late to test anything"

    done = subprocess.run(argv, cwd=tmp_path, env={**env, "TB_FAKE_SLEEP": "0"},
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{len(before)} already have a verdict" in done.stdout + done.stderr

    with Store(store) as opened:
        runs = opened.runs()
    assert Counter(r.cell.id for r in runs) == {f"dev-k{i}": 1 for i in range(CELLS)}
    assert all(r.status is RunStatus.OK for r in runs)
    assert {r.cell.id: r.run_id for r in runs if r.cell.id in before} == before
    versions = {r.cell.id: r.result.env["torch_version"] for r in runs}
    assert versions == {f"dev-k{i}": f"2.99.{i}+cpu" for i in range(CELLS)}
