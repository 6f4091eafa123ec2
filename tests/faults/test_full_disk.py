"""E9: a full disk under the report folder, the lock, the store, the logs or the work folder is
one sentence naming the folder, exit status 3, nothing half-written — and a store on a full disk
is never called damaged.  Real full disks: a 1 MiB tmpfs filled to the brim (root may mount one;
CI runs as root), and a real file-size limit (RLIMIT_FSIZE), which needs no mount."""

from __future__ import annotations

import errno
import os
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import IN_CI, make_run
from helpers.cli import torchbisect
from helpers.runaway import project

from torchbisect.exits import Exit
from torchbisect.store.db import Store
from torchbisect.utils import owned


@pytest.fixture
def disk(tmp_path):
    """A real file system of 1 MiB (tmpfs), unmounted afterwards."""
    where = tmp_path / "disk"
    where.mkdir()
    mount = shutil.which("mount")
    done = (
        subprocess.run(
            [mount or "mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(where)],
            capture_output=True,
            text=True,
        )
        if mount
        else None
    )
    if done is None or done.returncode != 0:
        why = done.stderr.strip() if done else "no mount command"
        if IN_CI:  # CI runs as root: a full disk must be tested there, never skipped
            pytest.fail(f"cannot mount a tmpfs under CI ({why})")
        pytest.skip(
            f"cannot mount a tmpfs here ({why}): needs root; "
            "test_a_file_size_limit_while_writing_the_page_is_one_sentence still runs"
        )
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def fill(folder: Path) -> None:
    """Write zeros until the file system says ENOSPC."""
    with (folder / "filler").open("wb", buffering=0) as fh:
        for size in (65536, 4096, 1):
            try:
                while True:
                    fh.write(b"\0" * size)
            except OSError as err:
                assert err.errno == errno.ENOSPC


def one_sentence(done: subprocess.CompletedProcess, folder: Path) -> str:
    err = done.stderr.strip().splitlines()[-1]
    assert done.returncode == Exit.NO_VERDICT, done.stderr
    assert "Traceback" not in done.stderr and "damaged" not in done.stderr, done.stderr
    assert f"{folder}: no space left on device" in err or f"{folder}: file too large" in err, err
    return err


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*.tmp"))


def _store_with_a_run(path: Path) -> None:
    with Store(path) as store:
        store.add(make_run())


def test_a_full_report_folder_keeps_the_old_pages_whole(disk, tmp_path):
    _store_with_a_run(tmp_path / "results.sqlite")
    out = disk / "out"
    owned.claim(out, "report")  # the page before was torchbisect's
    for name in ("index.html", "results.json", "summary.md"):
        (out / name).write_text(f"the page before: {name}\n")
    fill(disk)
    done = torchbisect("report", "--store", tmp_path / "results.sqlite", "--out", out, cwd=tmp_path)
    one_sentence(done, out)
    for name in ("index.html", "results.json", "summary.md"):
        assert (out / name).read_text() == f"the page before: {name}\n"  # all or nothing
    assert leftovers(disk) == []


def test_a_store_on_a_full_disk_is_not_called_damaged_and_stays_as_it_was(disk, tmp_path):
    store = disk / "results.sqlite"
    _store_with_a_run(store)
    at_rest = disk / "at-rest.sqlite"
    shutil.copyfile(store, at_rest)  # as this torchbisect leaves a store: one file, no -wal
    with sqlite3.connect(store) as db:  # as an older torchbisect left it: reading needs a -shm
        db.execute("PRAGMA journal_mode = WAL")
    before = store.read_bytes()
    fill(disk)
    assert (
        torchbisect(
            "report", "--store", at_rest, "--out", tmp_path / "out", cwd=tmp_path
        ).returncode
        == Exit.OK
    )
    done = torchbisect("report", "--store", store, "--out", tmp_path / "out", cwd=tmp_path)
    err = one_sentence(done, disk)
    assert "results.sqlite is intact" in err
    assert store.read_bytes() == before
    os.unlink(disk / "filler")  # room again: the very same store opens and reads
    assert (
        torchbisect("report", "--store", store, "--out", tmp_path / "out", cwd=tmp_path).returncode
        == Exit.OK
    )


WRITER = """
import dataclasses, sys
from helpers import make_run
from torchbisect.errors import TorchbisectError
from torchbisect.store.db import Store
try:
    with Store(sys.argv[1]) as store:
        for i in range(200):
            store.add(dataclasses.replace(make_run(), log_excerpt="x" * 50000,
                                          started=f"2026-01-01T00:00:{i:03d}"))
except TorchbisectError as err:
    print(err, file=sys.stderr)
    sys.exit(err.exit_code)
"""


def test_a_full_store_while_writing_runs_is_one_sentence(disk, tmp_path):
    store = disk / "results.sqlite"
    _store_with_a_run(store)
    fill(disk)
    tests = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([tests, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-c", WRITER, str(store)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
    )
    one_sentence(done, disk)
    os.unlink(disk / "filler")
    with Store(store, read_only=True) as again:  # what was committed is whole
        assert len(again.runs()) >= 1


@pytest.mark.slow
def test_a_full_disk_under_the_lock_is_one_sentence_and_no_half_lock(disk, tmp_path):
    project(tmp_path)  # a matrix of one dev wheel: planning writes the lock beside it
    shutil.copy(tmp_path / "matrix.yaml", disk / "matrix.yaml")
    fill(disk)
    done = torchbisect("plan", "--matrix", disk / "matrix.yaml", "--offline", cwd=tmp_path)
    one_sentence(done, disk)
    assert not (disk / "matrix.lock.json").exists() and leftovers(disk) == []


@pytest.mark.slow
@pytest.mark.parametrize("where", ["logs", "workdir", "workdir-after-start"])
def test_a_full_disk_under_the_logs_or_the_work_folder_is_one_sentence(disk, tmp_path, where):
    argv = project(tmp_path)
    env = {**os.environ, "TORCHBISECT_PROBES": str(tmp_path / "probes")}
    if where == "logs":
        argv[argv.index("reports")] = str(disk / "reports")
        fill(disk)
        named = disk / "reports" / "logs"
    else:
        argv[argv.index("work")] = str(disk / "work")
        if where == "workdir":
            fill(disk)
        else:  # the run starts; the venv's files do not fit (the installer says ENOSPC)
            (disk / "filler").write_bytes(b"\0" * (1024 * 1024 - 60 * 1024))
        named = disk
    done = torchbisect(*argv, cwd=tmp_path, env=env, timeout=300)
    err = done.stderr.strip().splitlines()[-1]
    assert done.returncode == Exit.NO_VERDICT and "Traceback" not in done.stderr, done.stderr
    assert "no space left on device" in err and str(named) in err, err


def _file_size_limit() -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # then writes fail with EFBIG instead
    resource.setrlimit(resource.RLIMIT_FSIZE, (8192, 8192))


def test_a_file_size_limit_while_writing_the_page_is_one_sentence(tmp_path, data_dir):
    out = tmp_path / "out"
    owned.claim(out, "report")  # the page before was torchbisect's
    (out / "index.html").write_text("the page before\n")
    docs = sorted((data_dir / "report").glob("synthetic-h200-*.json"))
    done = torchbisect(
        "report", "--probe-json", *docs, "--out", out, cwd=tmp_path, preexec_fn=_file_size_limit
    )
    one_sentence(done, out)
    assert (out / "index.html").read_text() == "the page before\n"
    assert leftovers(out) == []
