"""One run at a time per store and workdir, between real processes: a second `torchbisect matrix`
on the same store says which process holds it and exits 3, or waits with `--wait` and then finds
every verdict stored (no duplicate rows); a holder killed with SIGKILL releases its lock.

The first run's probe is a stand-in that waits for a file the test creates, so the test, not a
timer, decides when the holder finishes.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.cli import command

from torchbisect.exits import Exit
from torchbisect.utils.runlock import lock_path

pytest.importorskip("torch", reason="the preinstalled cell needs this interpreter to have torch")

GATED = """PROBE_VERSION = "gated"
import argparse, json, os, pathlib, sys, time
p = argparse.ArgumentParser()
p.add_argument("--cases", default="capture_data_ptr"); p.add_argument("--json")
p.add_argument("--trials"); p.add_argument("--timeout")
a = p.parse_args()
pathlib.Path(os.environ["TB_STARTED"]).write_text(str(os.getpid()))
while not os.path.exists(os.environ["TB_GO"]):
    time.sleep(0.02)
case = {"verdict": "not_affected", "detail": "stand-in", "seconds": 0.1}
doc = {"schema": 1, "probe": "stale_replay", "probe_version": PROBE_VERSION,
       "verdict": "not_affected", "cases": {"capture_data_ptr": case},
       "env": {"torch": "2.13.0+cpu", "python": "3.11.7"}}
open(a.json, "w").write(json.dumps(doc)) if a.json else print(json.dumps(doc))
"""
WAIT_S = 120  # an upper bound for a loaded machine, never a race: each wait ends on an event


@pytest.fixture
def site(tmp_path):
    probes = tmp_path / "probes"
    probes.mkdir()
    (probes / "stale_replay.py").write_text(GATED)
    (tmp_path / "matrix.yaml").write_text("preinstalled: true\n")
    env = {k: v for k, v in os.environ.items() if k != "GITHUB_ACTIONS"}
    env.update(
        TORCHBISECT_PROBES=str(probes),
        TORCHBISECT_PASS_ENV="TB_*",
        TB_STARTED=str(tmp_path / "started"),
        TB_GO=str(tmp_path / "go"),
    )
    return tmp_path, env


def _argv(*extra: str, store: str = "results.sqlite") -> list[str]:
    return command(
        "matrix",
        "--interpreter",
        sys.executable,
        "--no-report",
        "--store",
        store,
        "--workdir",
        "work",
        *extra,
    )


def _start(folder: Path, env: dict, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        _argv(*extra),
        cwd=folder,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _run(folder: Path, env: dict, *extra: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(
        _argv(*extra, **kw), cwd=folder, env=env, capture_output=True, text=True, timeout=WAIT_S
    )


def _until(condition, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.02)


def _holding(folder: Path, holder: subprocess.Popen) -> None:
    """Wait until `holder` has taken the store's lock and its probe is running."""
    _until(lambda: (folder / "started").exists() or holder.poll() is not None, "probe started")
    assert holder.poll() is None, holder.communicate()[0]
    info = json.loads(lock_path(folder / "results.sqlite").read_text())
    assert info["pid"] == holder.pid


def _rows(store: Path) -> list[str]:
    with sqlite3.connect(store) as db:
        return [r[0] for r in db.execute("SELECT cell_id FROM runs")]


@pytest.mark.slow  # over 2 s on a 2-core machine: out of the fast loop
def test_a_second_run_names_the_holder_and_exits_3_without_touching_anything(site):
    folder, env = site
    first = _start(folder, env)
    try:
        _holding(folder, first)
        second = _run(folder, env)
        assert second.returncode == Exit.NO_VERDICT, second.stderr
        [line] = second.stderr.strip().splitlines()
        assert f"pid {first.pid}" in line and "torchbisect matrix" in line and "--wait" in line
        assert "results.sqlite" in line
    finally:
        (folder / "go").touch()
        out = first.communicate(timeout=WAIT_S)[0]
    assert first.returncode == Exit.OK, out
    assert _rows(folder / "results.sqlite") == ["preinstalled"]
    assert not lock_path(folder / "results.sqlite").exists()  # released and removed


@pytest.mark.slow  # over 2 s on a 2-core machine: out of the fast loop
def test_the_same_workdir_under_another_store_is_held_too(site):
    folder, env = site
    first = _start(folder, env)
    try:
        _holding(folder, first)
        second = _run(folder, env, store="other.sqlite")
        assert second.returncode == Exit.NO_VERDICT, second.stderr
        assert f"work is in use by another run (pid {first.pid}" in second.stderr
        assert not (folder / "other.sqlite").exists()
    finally:
        (folder / "go").touch()
        first.communicate(timeout=WAIT_S)


@pytest.mark.slow
def test_wait_queues_behind_the_holder_and_stores_no_duplicate(site):
    folder, env = site
    first = _start(folder, env)
    try:
        _holding(folder, first)
        second = _start(folder, env, "--wait")
        said = ""
        while "waiting for" not in said and second.poll() is None:
            said = second.stdout.readline()  # an event: the line is written before it waits
        assert f"waiting for another run (pid {first.pid}" in said, said
    finally:
        (folder / "go").touch()
        first.communicate(timeout=WAIT_S)
    rest = second.communicate(timeout=WAIT_S)[0]
    assert first.returncode == Exit.OK and second.returncode == Exit.OK, rest
    assert "1 probed now" not in rest  # the verdict the first run stored was reused
    assert _rows(folder / "results.sqlite") == ["preinstalled"]


@pytest.mark.slow
def test_a_holder_killed_with_sigkill_releases_the_store(site):
    folder, env = site
    first = _start(folder, env)
    _holding(folder, first)
    first.send_signal(signal.SIGKILL)
    first.communicate(timeout=WAIT_S)
    (folder / "go").touch()
    second = _run(folder, env)
    assert second.returncode == Exit.OK, second.stdout + second.stderr
    assert _rows(folder / "results.sqlite") == ["preinstalled"]
