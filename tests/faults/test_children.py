"""D2, D7: timeouts hold whatever children do, SIGTERM and kill -9 leave nothing running, and the
rerun succeeds over a half-written venv.  Real processes, a real uv venv, a stand-in torch."""

from __future__ import annotations

import shutil
import signal
import sqlite3
import subprocess
import sys
import time
import uuid

import pytest
from helpers.cli import command, torchbisect
from helpers.runaway import environment, left, project, wait_until

from torchbisect.errors import CommandFailed
from torchbisect.exits import Exit
from torchbisect.utils import proc

# The daemon leaves TB_OUTLIVED only if it lives out its 30 s: a run that waited for it (the pipe
# it holds) leaves that file; a run that ended it, none.
DAEMON = (
    "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', "
    "'import os, time; time.sleep(30); open(os.environ[\\'TB_OUTLIVED\\'], \\'w\\')'], "
    "start_new_session=True); print('started'); {rest}"
)
needs_uv = pytest.mark.skipif(shutil.which("uv") is None, reason="uv is not installed")
# How long what a run started may take to be gone once the run ended: the stand-ins would live
# 30-300 s, so a generous bound still tells, and a loaded machine does not fail the test.
GONE_S = 25


def _mark(tmp_path) -> tuple[dict[str, str], str]:
    mark = uuid.uuid4().hex
    return {"TB_MARK": mark, "TB_OUTLIVED": str(tmp_path / "outlived")}, mark


def test_a_command_that_exits_is_judged_by_its_exit_although_a_daemon_holds_the_pipe(tmp_path):
    env, mark = _mark(tmp_path)
    done = proc.run(
        [sys.executable, "-c", DAEMON.format(rest="sys.exit(0)")], env=env, timeout=60, grace=0.5
    )
    assert done.returncode == 0 and "started" in done.output
    assert wait_until(lambda: not left(mark), GONE_S)
    assert not (tmp_path / "outlived").exists()  # the run did not wait for the daemon


def test_a_timeout_holds_when_a_daemon_holds_the_pipe(tmp_path):
    env, mark = _mark(tmp_path)
    with pytest.raises(CommandFailed) as caught:
        proc.run(
            [sys.executable, "-c", DAEMON.format(rest="time.sleep(300)")],
            env=env,
            timeout=1,
            grace=0.5,
        )
    assert caught.value.timed_out and "started" in caught.value.output
    assert wait_until(lambda: not left(mark), GONE_S)
    assert not (tmp_path / "outlived").exists()  # the run did not wait for the daemon


def _runs(store) -> list[tuple[str, str, str]]:
    db = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        return db.execute("SELECT cell_id, status, reason FROM runs ORDER BY id").fetchall()
    finally:
        db.close()


@pytest.mark.slow
@needs_uv
def test_a_probe_that_leaves_a_daemon_gets_its_verdict_and_a_hung_one_times_out(tmp_path):
    argv = project(tmp_path, timeout=10)
    env, mark = environment(tmp_path, "daemon")
    # The probe's daemon sleeps 300 s, past these runs' limit: a matrix that waited for it fails.
    done = torchbisect(*argv, cwd=tmp_path, env=env, timeout=120)
    assert done.returncode == Exit.OK, done.stdout + done.stderr
    assert _runs(tmp_path / "results.sqlite") == [("dev-k0", "ok", "")]
    assert wait_until(lambda: not left(mark), GONE_S)

    env, mark = environment(tmp_path, "hang")
    done = torchbisect(*argv, "--force", cwd=tmp_path, env=env, timeout=120)
    assert done.returncode == Exit.NO_VERDICT, done.stdout + done.stderr
    cell, status, reason = _runs(tmp_path / "results.sqlite")[-1]
    assert status == "infra_failure" and "timed out after 10 s" in reason
    assert wait_until(lambda: not left(mark), GONE_S)


def _start_hung_run(tmp_path, mode="hang"):
    argv = project(tmp_path)
    env, mark = environment(tmp_path, mode)
    child = subprocess.Popen(
        command(*argv), cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    started = tmp_path / "probe-started"
    assert wait_until(started.exists, 60), "the probe never started"
    assert len(left(mark)) >= 3  # the matrix process, the probe and its daemon
    return argv, env, child, mark


@pytest.mark.slow
@needs_uv
def test_kill_9_of_matrix_leaves_nothing_running_and_the_rerun_rebuilds_a_broken_venv(tmp_path):
    argv, env, child, mark = _start_hung_run(tmp_path)
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert wait_until(lambda: not left(mark), GONE_S), f"still running: {left(mark)}"

    venv = tmp_path / "work" / "venvs" / "dev-k0"  # as a killed uv would leave it: half there
    (venv / ".torchbisect-ready.json").unlink()
    shutil.rmtree(venv / "lib")
    (venv / "bin" / "python").unlink()
    (venv / "bin" / "python").write_text("#!/bin/sh\nexit 99\n")
    env["TB_MODE"] = "daemon"
    done = torchbisect(*argv, cwd=tmp_path, env=env, timeout=120)
    assert done.returncode == Exit.OK, done.stdout + done.stderr
    assert _runs(tmp_path / "results.sqlite") == [("dev-k0", "ok", "")]


@pytest.mark.slow
@needs_uv
@pytest.mark.parametrize("mode", ["hang", "stubborn"])
def test_sigterm_ends_a_run_within_seconds(tmp_path, mode):
    _, _, child, mark = _start_hung_run(tmp_path, mode)
    child.send_signal(signal.SIGTERM)
    # A stubborn probe gets SIGKILL 5 s after SIGTERM; one left to its 300 s sleep fails here.
    child.wait(timeout=15)
    assert wait_until(lambda: not left(mark), GONE_S), f"still running: {left(mark)}"


SLOW_UV = """#!/bin/sh
# uv that is still writing when its run is killed: a writer in the background, then a long wait
if [ "$1" = "pip" ]; then
  date >> "$TB_JUNK"  # written before the test is told: the kill may come at once
  ( while true; do date >> "$TB_JUNK"; sleep 0.05; done ) &
  touch "$TB_INSTALLING"
  sleep 300
fi
exec {uv} "$@"
"""


@pytest.mark.slow
@needs_uv
def test_kill_9_during_install_stops_the_installer_and_the_rerun_succeeds(tmp_path):
    argv = project(tmp_path)
    env, mark = environment(tmp_path, "daemon")
    wrapper = tmp_path / "bin" / "uv"
    wrapper.parent.mkdir()
    wrapper.write_text(SLOW_UV.format(uv=shutil.which("uv")))
    wrapper.chmod(0o755)
    junk, installing = tmp_path / "junk", tmp_path / "installing"
    slow = {
        **env,
        "PATH": f"{wrapper.parent}:{env['PATH']}",
        "TB_JUNK": str(junk),
        "TB_INSTALLING": str(installing),
    }
    child = subprocess.Popen(
        command(*argv), cwd=tmp_path, env=slow, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    assert wait_until(installing.exists, 60), "the install never started"
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert wait_until(lambda: not left(mark), GONE_S), f"still running: {left(mark)}"
    size = junk.stat().st_size
    time.sleep(0.3)
    assert junk.stat().st_size == size  # nothing writes any more

    done = torchbisect(*argv, cwd=tmp_path, env=env, timeout=120)
    assert done.returncode == Exit.OK, done.stdout + done.stderr
    assert _runs(tmp_path / "results.sqlite") == [("dev-k0", "ok", "")]


# A torchbisect whose own SIGINT is ignored (a script's background job): the SIGINT it sends to
# stop a command must still stop it, not wait for the SIGKILL fallback.
STOPPED_BY_SIGINT = r"""
import os, signal, sys, threading, time
from torchbisect.utils import proc
from torchbisect.errors import CommandFailed
assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN, "not launched with SIGINT ignored"
pidfile, ended = sys.argv[1], {}
def command():
    try:
        ended["how"] = proc.run(["sh", "-c", 'echo $$ > "$0"; exec sleep 300', pidfile],
                                check=False, timeout=60).returncode
    except CommandFailed as exc:
        ended["how"] = "timed out" if exc.timed_out else exc
worker = threading.Thread(target=command)
worker.start()
deadline = time.monotonic() + 60
while not (os.path.exists(pidfile) and open(pidfile).read().strip()):
    assert time.monotonic() < deadline, "the command never started"
    time.sleep(0.05)
status = open("/proc/%s/status" % open(pidfile).read().strip()).read()
ignored = int(status.split("SigIgn:")[1].split()[0], 16)
print("command ignores SIGINT:", bool(ignored & 1 << (signal.SIGINT - 1)))
# The command may write its pid before run() has counted it as running (a loaded machine):
# a SIGINT sent then reaches nothing, so it is sent again until the command ends.
while worker.is_alive() and time.monotonic() < deadline:
    proc.signal_all(signal.SIGINT)
    worker.join(0.5)
worker.join()
print("command ended:", ended["how"])
"""


def test_a_command_started_by_a_torchbisect_that_ignores_sigint_still_stops_on_sigint(tmp_path):
    done = subprocess.run(
        [
            "bash",
            "-c",
            'trap "" INT; exec "$@"',
            "-",
            sys.executable,
            "-c",
            STOPPED_BY_SIGINT,
            str(tmp_path / "pid"),
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines() == [
        "command ignores SIGINT: False",
        f"command ended: {-signal.SIGINT}",
    ]
