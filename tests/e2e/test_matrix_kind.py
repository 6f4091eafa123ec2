"""`torchbisect matrix --runners runners.yaml --kind NAME`: a runner is checked against the kind it
claims to be before anything runs, and a shard leaves its attendance in the store, also when it is
interrupted.  Real planning of per-platform stand-in wheels, real uv venvs, the stand-in probe."""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import time
from pathlib import Path

import pytest
from helpers import FAKE_PROBES
from helpers.cli import command, torchbisect
from helpers.runner_kinds import DAYS, make_world

from torchbisect.exits import Exit
from torchbisect.store.db import Store


@pytest.fixture
def world(tmp_path: Path) -> Path:
    return make_world(tmp_path / "world")


def matrix(cwd: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return torchbisect(
        "matrix",
        "--runners",
        "runners.yaml",
        "--store",
        "results.sqlite",
        "--no-report",
        "--workdir",
        "work",
        "--backend",
        "venv",
        *args,
        cwd=cwd,
        timeout=300,
        env_extra={"TORCHBISECT_PROBES": str(FAKE_PROBES), **(env or {})},
    )


def _smi(folder: Path, name: str) -> dict:
    """An nvidia-smi on PATH that lists one GPU called `name` (this machine has none)."""
    folder.mkdir()
    script = folder / "nvidia-smi"
    script.write_text(f"#!/bin/sh\necho '0, {name}, 580.95.05, GPU-0a1b2c3d'\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return {"PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"}


def test_a_runner_of_another_platform_is_refused_before_anything_runs(world):
    done = matrix(world, "--kind", "GB300", "--allow-no-gpu")
    assert done.returncode == Exit.NO_VERDICT
    assert done.stderr.strip() == (
        "torchbisect matrix: error: runners.yaml:8 declares kind GB300 as linux_aarch64, but "
        "this runner is linux_x86_64: give the runner the labels of its own kind (or fix that "
        "entry); nothing was probed, so no other kind's wheels run here"
    )
    assert not (world / "results.sqlite").exists()  # no attendance: that kind did not report


def test_a_runner_with_another_gpu_is_refused(world, tmp_path):
    env = _smi(tmp_path / "bin", "NVIDIA A100-SXM4-80GB")
    done = matrix(world, "--kind", "H200", env=env)
    assert done.returncode == Exit.NO_VERDICT
    assert (
        "runners.yaml:2 declares kind H200 as linux_x86_64 with NVIDIA H200, but this "
        "runner is linux_x86_64 with NVIDIA A100-SXM4-80GB"
    ) in done.stderr
    done = matrix(world, "--kind", "H200", env={})  # no GPU at all
    assert done.returncode == Exit.NO_VERDICT
    assert "this runner is linux_x86_64 with no GPU" in done.stderr


@pytest.mark.parametrize(
    "args, said",
    [
        (["--kind", "H200", "--lock", "a.json", "--lock-dir", "locks"], "give one of them"),
        (["--lock-dir", "locks"], "--runners needs --kind NAME"),
        (["--kind", "B200"], "declares no kind named 'B200'"),
    ],
)
def test_kind_flags_that_do_not_go_together(world, args, said):
    done = matrix(world, *args)
    assert done.returncode == Exit.MISTAKE and said in done.stderr


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("uv") is None, reason="uv is not installed")
def test_a_shard_leaves_its_attendance_even_when_interrupted(world):
    planned = torchbisect(
        "plan",
        "--runners",
        "runners.yaml",
        "--kind",
        "H200",
        "--store",
        "none.sqlite",
        cwd=world,
        timeout=120,
    )
    assert planned.returncode == Exit.OK, planned.stderr
    first = f"nightly-{DAYS[0]:%Y%m%d}-*"
    done = matrix(
        world,
        "--kind",
        "H200",
        "--allow-no-gpu",
        "--offline",
        "--cells",
        first,
        env={"GITHUB_RUN_ID": "77", "GITHUB_RUN_ATTEMPT": "1"},
    )
    assert done.returncode == Exit.OK, done.stdout + done.stderr
    assert "attendance: H200 shard 1/1 of run 77-1: 1 cell, 1 probed now" in done.stdout

    # the whole kind next: the first cell is reused, the next probe waits until it is stopped
    gate = world / "go"
    argv = command(
        "matrix",
        "--runners",
        "runners.yaml",
        "--kind",
        "H200",
        "--allow-no-gpu",
        "--offline",
        "--store",
        "results.sqlite",
        "--no-report",
        "--workdir",
        "work",
        "--backend",
        "venv",
        "--shard",
        "1/1",
    )
    child = subprocess.Popen(
        argv,
        cwd=world,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={
            **os.environ,
            "TORCHBISECT_PROBES": str(FAKE_PROBES),
            "TB_FAKE_WAIT_FOR": str(gate),
            "GITHUB_RUN_ID": "77",
            "GITHUB_RUN_ATTEMPT": "2",
        },
    )
    deadline = time.monotonic() + 240
    while (
        not Path(f"{gate}.waiting").exists()
        and child.poll() is None
        and time.monotonic() < deadline
    ):
        time.sleep(0.05)
    assert Path(f"{gate}.waiting").exists(), child.communicate()[0]
    child.send_signal(signal.SIGTERM)  # a cancelled CI job
    out, _ = child.communicate(timeout=120)
    assert child.returncode == Exit.INTERRUPTED, out
    with Store(world / "results.sqlite") as store:
        first_run, stopped = store.attendance()
    assert (first_run.kind, first_run.run, first_run.shard) == ("H200", "77-1", "1/1")
    assert (first_run.cells, first_run.probed, first_run.reused, first_run.failed) == (1, 1, 0, 0)
    # what it did before the stop: 3 cells, one from the store, two left without a verdict
    assert (stopped.run, stopped.cells, stopped.probed, stopped.reused, stopped.failed) == (
        "77-2",
        3,
        0,
        1,
        2,
    )
    assert stopped.gpu == "" and stopped.host and stopped.started < stopped.finished


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("uv") is None, reason="uv is not installed")
def test_a_shards_own_page_says_which_declared_kinds_reported(world):
    """Without --no-report the shard draws its page after its attendance is stored, with the
    declared kinds: this kind reported, the others never did (not a silent omission)."""
    planned = torchbisect(
        "plan",
        "--runners",
        "runners.yaml",
        "--kind",
        "H200",
        "--store",
        "none.sqlite",
        cwd=world,
        timeout=120,
    )
    assert planned.returncode == Exit.OK, planned.stderr
    done = torchbisect(
        "matrix",
        "--runners",
        "runners.yaml",
        "--kind",
        "H200",
        "--allow-no-gpu",
        "--offline",
        "--cells",
        f"nightly-{DAYS[0]:%Y%m%d}-*",
        "--store",
        "results.sqlite",
        "--out",
        "site",
        "--workdir",
        "work",
        "--backend",
        "venv",
        cwd=world,
        timeout=300,
        env_extra={
            "TORCHBISECT_PROBES": str(FAKE_PROBES),
            "GITHUB_RUN_ID": "78",
            "GITHUB_RUN_ATTEMPT": "1",
        },
    )
    assert done.returncode == Exit.OK, done.stdout + done.stderr
    kinds = {
        k["name"]: k
        for k in json.loads((world / "site" / "results.json").read_text())["models"]["kinds"]
    }
    assert list(kinds) == ["H200", "GB300", "A100"]
    assert kinds["H200"]["state"] == "reported"
    assert kinds["H200"]["text"].startswith("reported in the latest run (run 78-1, ")
    assert kinds["GB300"]["state"] == kinds["A100"]["state"] == "never"
    html = (world / "site" / "index.html").read_text()
    assert "declared, never reported — its runners have not run the matrix" in html
