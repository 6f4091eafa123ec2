"""Round 3, item 1: a shard killed at any moment loses nothing it committed.

A real `torchbisect matrix` (venv backend, stand-in torch wheels, the stand-in probe) is killed
with SIGKILL once some runs are stored.  The store left so merges whole; the file alone (what the
workflow used to upload) holds every committed run, checkpointed into it after each (48.5); and
the workflow's own copy step, run as the workflow writes it, leaves one file that holds every
committed run, which is all the upload step takes.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml
from helpers import REPO, fake_torch_wheel
from helpers.cli import command, local_matrix, torchbisect
from helpers.cli import env as cli_env
from helpers.runaway import wait_until

from torchbisect.exits import Exit

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("uv") is None, reason="uv is not installed"),
]
CELLS = 8
KILL_AFTER = 3  # stored runs


def _count(store: Path) -> int:
    """Committed runs in `store`, as SQLite reads the file with its -wal or hot -journal (which
    it rolls back), on a copy of them."""
    copy = Path(tempfile.mkdtemp(prefix="count-")) / store.name
    for suffix in ("", "-wal", "-journal"):
        if Path(f"{store}{suffix}").exists():
            shutil.copyfile(f"{store}{suffix}", f"{copy}{suffix}")
    db = sqlite3.connect(copy)
    try:
        has = db.execute("SELECT 1 FROM sqlite_master WHERE name = 'runs'").fetchone()
        return db.execute("SELECT count(*) FROM runs").fetchone()[0] if has else 0
    finally:
        db.close()
        shutil.rmtree(copy.parent)


def _digests(store: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in store.parent.glob(store.name + "*")
    }


@pytest.fixture(scope="module")
def killed(tmp_path_factory) -> Path:
    """A shard's live store, as a SIGKILL in the middle of its matrix run left it."""
    root = tmp_path_factory.mktemp("killed")
    entries = "".join(
        f"  - wheel: {fake_torch_wheel(root / 'wheels', f'2.99.{i}+cpu')}\n    name: k{i}\n"
        "    overlay: true\n"
        for i in range(CELLS)
    )
    (root / "matrix.yaml").write_text(f"defaults:\n  timeout: 120\ndev:\n{entries}")
    store = root / "live" / "shard.sqlite"
    env = {
        **os.environ,
        "TORCHBISECT_PROBES": str(REPO / "tests" / "helpers" / "probes"),
        "TB_FAKE_SLEEP": "1",
    }
    run = subprocess.Popen(
        command(
            *local_matrix(store=str(store)),
            "--no-report",
        ),
        cwd=root,
        env=cli_env(base=env),
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert wait_until(lambda: store.exists() and _count(store) >= KILL_AFTER, 300)
        # killed between runs (48.5): stopped first, and killed only once no write is under
        # way (no -wal or -journal beside the file); a copy taken mid-write is refused
        # instead, which test_store_travels_whole.py shows
        assert wait_until(lambda: _stopped_at_rest(run.pid, store), 120)
    finally:
        os.killpg(run.pid, signal.SIGKILL)
        run.wait()
    return store


def _stopped_at_rest(pgid: int, store: Path) -> bool:
    os.killpg(pgid, signal.SIGSTOP)
    with open(store, "rb") as fh:
        header = fh.read(20)
    # at rest: in rollback mode (header bytes 18-19 are 1, not WAL's 2) and neither a -wal nor a
    # -journal beside it (a -journal is a transaction under way: stopped inside one, the file
    # holds half a run that the -journal rolls back, as CI once caught with 3 runs against 2)
    beside = (Path(f"{store}{side}").exists() for side in ("-wal", "-journal"))
    if header[18:20] == b"\x01\x01" and not any(beside):
        return True
    os.killpg(pgid, signal.SIGCONT)
    return False


def _merge(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return torchbisect("merge", *args, cwd=cwd, timeout=120)


def test_a_killed_shards_store_merges_every_committed_run_and_is_left_as_it_was(killed, tmp_path):
    committed, before = _count(killed), _digests(killed)
    assert committed >= KILL_AFTER
    done = _merge(tmp_path, "site.sqlite", str(killed))
    assert done.returncode == Exit.OK, done.stderr
    assert f"{committed} runs added" in done.stdout
    assert _count(tmp_path / "site.sqlite") == committed
    assert _digests(killed) == before  # read from a copy: nothing written or created beside it


def test_the_file_alone_of_a_shard_killed_between_runs_holds_every_committed_run(killed, tmp_path):
    """48.5: each committed run is checkpointed into the file (store/db.py `_at_rest`), so the
    file alone — what an upload of `shard.sqlite` takes — merges whole; a copy taken while a
    write was under way is refused (test_store_travels_whole.py)."""
    alone = tmp_path / "artifact" / "shard.sqlite"
    alone.parent.mkdir()
    shutil.copyfile(killed, alone)  # what an upload of `shard.sqlite` alone took
    done = _merge(tmp_path, "site.sqlite", str(alone))
    assert done.returncode == Exit.OK, done.stdout + done.stderr
    assert _count(tmp_path / "site.sqlite") == _count(killed) >= KILL_AFTER


def _probe_steps() -> list[dict]:
    workflow = yaml.safe_load((REPO / ".github" / "workflows" / "matrix.yml").read_text())
    return workflow["jobs"]["probe"]["steps"]


def test_the_workflows_copy_step_uploads_one_file_with_every_committed_run(killed, tmp_path):
    """The probe job's own steps: the copy step's command as the workflow writes it (nox's
    merge session is `torchbisect merge`), then exactly the paths its upload step lists."""
    steps = _probe_steps()
    copy = next(s for s in steps if s.get("name", "").startswith("The shard's store as one file"))
    upload = next(s for s in steps if s.get("uses", "").startswith("actions/upload-artifact@"))
    assert steps.index(copy) + 1 == steps.index(upload) and copy["if"] == "always()"
    assert upload["with"]["path"].split() == ["shard.sqlite", "reports/logs/"]
    matrix = next(s for s in steps if "nox -s matrix" in s.get("run", ""))
    assert '--store "$RUNNER_TEMP/live/shard.sqlite"' in matrix["run"]

    workspace, temp = tmp_path / "workspace", tmp_path / "runner-temp"
    workspace.mkdir()
    shutil.copytree(killed.parent, temp / "live")  # the live store, its -wal and -shm
    command = copy["run"].replace("nox -s merge --", f"{sys.executable} -m torchbisect merge")
    done = subprocess.run(
        ["bash", "-c", command],
        cwd=workspace,
        capture_output=True,
        text=True,
        env={**os.environ, "RUNNER_TEMP": str(temp)},
        timeout=120,
    )
    assert done.returncode == Exit.OK, done.stdout + done.stderr
    assert sorted(p.name for p in workspace.iterdir()) == ["shard.sqlite"]  # no -wal beside it

    artifact = tmp_path / "shards" / "store-shard-H200-1"
    artifact.mkdir(parents=True)
    shutil.copyfile(workspace / "shard.sqlite", artifact / "shard.sqlite")  # the upload
    built = _merge(
        tmp_path,
        "site.sqlite",
        "previous.sqlite",
        "--allow-missing",
        "previous.sqlite",
        "--shards",
        "shards",
    )  # as the build job merges
    assert built.returncode == Exit.OK, built.stderr
    assert _count(tmp_path / "site.sqlite") == _count(killed)


def test_the_copy_step_of_a_shard_that_never_ran_uploads_an_empty_store(tmp_path):
    copy = next(
        s for s in _probe_steps() if s.get("name", "").startswith("The shard's store as one file")
    )
    command = copy["run"].replace("nox -s merge --", f"{sys.executable} -m torchbisect merge")
    done = subprocess.run(
        ["bash", "-c", command],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "RUNNER_TEMP": str(tmp_path / "temp")},
        timeout=120,
    )
    assert done.returncode == Exit.OK, done.stdout + done.stderr
    assert _count(tmp_path / "shard.sqlite") == 0
