"""Issue 53.1: a probe's file is read once per cell.  The file is copied and hashed into the
run's own folder before the build runs it; the copy is what runs and its hash is what the run is
stored under.  What an adversary tried: the file gone when the build's Python opens it, edited or
deleted while the run goes on, holding no statement, and a script that exits at once but leaves
a daemon holding its output.

Real parts: the command line, the venv backend installing a stand-in torch (overlay, a local
wheel), probes/script.py run by the venv's interpreter, execute, and the store (SQLite).
"""

from __future__ import annotations

import shutil
import sqlite3
import textwrap
import time
import uuid
from pathlib import Path

import pytest
from helpers import fake_torch_wheel, write_wheel
from helpers.cli import call
from helpers.runaway import left, wait_until

from torchbisect.exits import Exit
from torchbisect.probe.info import read_info

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("uv") is None, reason="uv is not installed"),
]

# `import torch` of this stand-in (the adapter asks the build's torch for its version before it
# runs the probe) moves away the file its parent was told to run with --probe, and puts it back
# the moment that parent exits, as an editor that saves by delete-and-write might: the file is
# gone only while the build's Python opens it.  What puts it back is no process of the cell's
# (a session of its own, without torchbisect's variables), so the cell's end does not stop it.
PUT_BACK = """
import os, sys, time
parent, path = int(sys.argv[1]), sys.argv[2]
def alive():
    try:
        with open("/proc/%d/stat" % parent) as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
deadline = time.monotonic() + 60
while alive() and time.monotonic() < deadline:
    time.sleep(0.001)
try:
    os.rename(path + ".away", path)
except OSError:
    pass
"""
DELETING_TORCH = f"""
import os, subprocess, sys
__version__ = "2.99.1+cpu"
class cuda:
    @staticmethod
    def is_available():
        return False
try:
    with open("/proc/%d/cmdline" % os.getppid(), "rb") as fh:
        argv = fh.read().decode().split("\\0")
    path = argv[argv.index("--probe") + 1]
    if os.path.exists(path):
        os.rename(path, path + ".away")
        env = {{k: v for k, v in os.environ.items() if not k.startswith("TORCHBISECT_")}}
        subprocess.Popen([sys.executable, "-c", {PUT_BACK!r}, str(os.getppid()), path],
                         env=env, start_new_session=True, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
except (OSError, ValueError, IndexError):
    pass
"""


def _world(root: Path, script: str, *, torch: Path | None = None, timeout: int = 120) -> Path:
    """matrix.yaml of one cell (a stand-in torch overlaid) whose probe, named by the matrix, is
    `script` in the `probes/` folder beside it; returns the probe's file."""
    wheel = torch or fake_torch_wheel(root / "wheels", "2.99.0+cpu")
    (root / "probes").mkdir(parents=True, exist_ok=True)
    probe = root / "probes" / "my_bug.py"
    probe.write_text(script)
    (root / "matrix.yaml").write_text(
        f"defaults:\n  timeout: {timeout}\n  probe: my_bug\n"
        f"dev:\n  - wheel: {wheel}\n    name: k0\n    overlay: true\n"
    )
    return probe


def _matrix(root: Path, *extra: str) -> int:
    return call(
        "matrix",
        "--matrix",
        str(root / "matrix.yaml"),
        "--allow-no-gpu",
        "--backend",
        "venv",
        "--store",
        str(root / "results.sqlite"),
        "--workdir",
        str(root / "work"),
        "--out",
        str(root / "reports"),
        "--no-report",
        *extra,
    )


def _runs(root: Path) -> list[tuple[str, str, str, str]]:
    """(status, verdict, probe_version, reason) of each stored run, oldest first."""
    db = sqlite3.connect(f"file:{root / 'results.sqlite'}?mode=ro", uri=True)
    try:
        return db.execute(
            "SELECT status, verdict, probe_version, reason FROM runs ORDER BY id"
        ).fetchall()
    finally:
        db.close()


@pytest.fixture
def world(tmp_path, fake_probes) -> Path:
    fake_probes(tmp_path / "probes")
    return tmp_path


def test_a_probe_file_gone_when_the_builds_python_opens_it_is_an_error_never_affected(world):
    torch = write_wheel(world / "wheels", "2.99.1+cpu", {"torch/__init__.py": DELETING_TORCH})
    probe = _world(world, "import sys\nprint('fine here')\nsys.exit(0)\n", torch=torch)
    _matrix(world)
    # Python's own "can't open file" is exit 2, which the exit-status contract reads as
    # affected (and today stores so); the run is stored as failed, with its reason, and is
    # tried again next time
    ((status, verdict, _, reason),) = _runs(world)
    assert (status, verdict) == ("infra_failure", None), reason
    assert reason.startswith("the probe my_bug.py cannot be opened ("), reason
    assert wait_until(probe.is_file, 10)  # the user's file, back; what went was the run's copy


def test_a_file_edited_during_its_run_is_stored_as_the_version_that_ran(world):
    probe = world / "probes" / "my_bug.py"
    fixed = "import sys\nprint('version B: not affected')\nsys.exit(0)\n"
    # version A says affected and, while it runs, the file is saved as version B (an editor)
    version_a = textwrap.dedent(f"""\
        import sys
        with open({str(probe)!r}, "w") as fh:
            fh.write({fixed!r})
        print("version A: affected")
        sys.exit(1)
        """)
    _world(world, version_a)
    a = read_info(probe).version
    assert _matrix(world) == Exit.OK
    b = read_info(probe).version
    assert probe.read_text() == fixed and a != b
    # today: A's verdict stored under B's fingerprint
    assert [(s, v, version) for s, v, version, _ in _runs(world)] == [("ok", "affected", a)]
    # B is a probe not run yet: its verdict is measured, never A's reused
    assert _matrix(world) == Exit.OK
    assert [(v, version) for _, v, version, _ in _runs(world)] == [
        ("affected", a),
        ("not_affected", b),
    ]


def test_a_file_that_deletes_itself_keeps_its_finished_run(world, capsys):
    probe = world / "probes" / "my_bug.py"
    script = textwrap.dedent(f"""\
        import os, sys
        for path in (__file__, {str(probe)!r}):
            if os.path.exists(path):
                os.remove(path)
        print("affected, and gone")
        sys.exit(1)
        """)
    _world(world, script)
    version = read_info(probe).version
    code = _matrix(world)
    # today: exit 2, "not found", the finished run lost
    assert code == Exit.OK, capsys.readouterr()
    assert not probe.exists()
    assert [(s, v, found) for s, v, found, _ in _runs(world)] == [("ok", "affected", version)]


@pytest.mark.parametrize(
    "script",
    [
        "",
        "#!/usr/bin/env python3\n",
        "#!/usr/bin/env python3\n# exit 1 if affected\n# (todo)\n",
        '"""Only a docstring: nothing is checked."""\n',
    ],
    ids=["empty", "shebang", "comments", "docstring"],
)
def test_a_script_holding_no_statement_is_an_error_never_not_affected(world, script):
    _world(world, script)
    _matrix(world)
    ((status, verdict, _, reason),) = _runs(world)
    assert (status, verdict) == ("infra_failure", None), reason  # today: not_affected
    assert reason.startswith("the probe my_bug.py holds no statement"), reason


def test_a_script_that_exits_at_once_leaving_a_daemon_on_its_output_is_judged_at_its_exit(
    world, monkeypatch
):
    mark = uuid.uuid4().hex
    monkeypatch.setenv("TB_MARK", mark)  # passed to the probe (TORCHBISECT_PASS_ENV=TB_*)
    outlived = world / "outlived"
    script = textwrap.dedent(f"""\
        import subprocess, sys
        # a daemon in a session of its own, holding this script's stdout for 5 minutes
        subprocess.Popen([sys.executable, "-c",
                          "import time; time.sleep(300); open({str(outlived)!r}, 'w')"],
                         start_new_session=True)
        print("affected: wrong answer")
        sys.exit(1)
        """)
    _world(world, script, timeout=60)
    started = time.monotonic()
    assert _matrix(world) == Exit.OK
    assert time.monotonic() - started < 45  # today: the whole timeout, then an infra failure
    ((status, verdict, _, reason),) = _runs(world)
    assert (status, verdict) == ("ok", "affected"), reason
    assert wait_until(lambda: not left(mark), 25), f"still running: {left(mark)}"
    assert not outlived.exists()
