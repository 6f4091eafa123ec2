"""SIGKILL in the middle of `torchbisect matrix` (probes running, the next venvs being built),
then run it again: every cell ends with exactly one verdict, and the ones stored before the kill
are kept and not probed again.  Cheap cells: stand-in torch wheels and a stand-in probe.  The
later cells' probe waits for a file that exists only for the rerun, so the kill lands mid-run
on any machine, however loaded: the test waits for that probe to be waiting, not for a timer."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest
from helpers import FAKE_PROBES, fake_torch_wheel
from helpers.cli import command, local_matrix

from torchbisect.exits import Exit
from torchbisect.model import RunStatus
from torchbisect.store.db import Store

CELLS = 6


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("uv") is None, reason="uv is not installed")
def test_a_run_killed_midway_resumes_with_no_cell_lost_or_duplicated(tmp_path):
    wheels = [fake_torch_wheel(tmp_path / "wheels", f"2.99.{i}+cpu") for i in range(CELLS)]
    go = tmp_path / "go"
    gated = f"    env:\n      TB_FAKE_WAIT_FOR: {go}\n"
    entries = "".join(
        f"  - wheel: {w}\n    name: k{i}\n    overlay: true\n" + (gated if i >= 2 else "")
        for i, w in enumerate(wheels)
    )
    (tmp_path / "matrix.yaml").write_text(f"defaults:\n  timeout: 120\ndev:\n{entries}")
    argv = command(
        *local_matrix(),
        "--offline",
        "--no-report",
    )
    env = {**os.environ, "TORCHBISECT_PROBES": str(FAKE_PROBES)}
    store = tmp_path / "results.sqlite"

    child = subprocess.Popen(
        argv, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    waiting = Path(f"{go}.waiting")
    deadline = time.monotonic() + 300
    while not waiting.exists() and time.monotonic() < deadline and child.poll() is None:
        time.sleep(0.05)
    assert waiting.exists(), "no gated probe ever started"
    child.send_signal(signal.SIGKILL)  # a probe is running and the next venvs are being built
    child.wait()
    with Store(store) as opened:
        before = {r.cell.id: r.run_id for r in opened.runs()}
    # one cell probes at a time (no GPU): what came before the first gated probe is stored
    assert 1 <= len(before) <= 2 and set(before) <= {"dev-k0", "dev-k1"}

    go.touch()
    done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == Exit.OK, done.stdout + done.stderr
    assert f"{len(before)} already have a verdict" in done.stdout + done.stderr

    with Store(store) as opened:
        runs = opened.runs()
    assert Counter(r.cell.id for r in runs) == {f"dev-k{i}": 1 for i in range(CELLS)}
    assert all(r.status is RunStatus.OK for r in runs)
    assert {r.cell.id: r.run_id for r in runs if r.cell.id in before} == before
    versions = {r.cell.id: r.result.env["torch_version"] for r in runs}
    assert versions == {f"dev-k{i}": f"2.99.{i}+cpu" for i in range(CELLS)}
