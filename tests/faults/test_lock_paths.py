"""Round 3, item 4: one lock per real file, and an odd lock path is one sentence.

Real processes: a holder takes the run lock of a store (or workdir) by its real path, and a
second real `torchbisect` names the same file another way — a symbolic link to it, a link to
its folder, a `..` detour — and must be refused while the holder runs (it got in and dropped a
row before).  A lock path that is a folder or a FIFO is one sentence, exit 2, store untouched.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import make_run
from helpers.cli import one_sentence, torchbisect
from helpers.runaway import wait_until

from torchbisect.exits import Exit
from torchbisect.store.db import Store
from torchbisect.utils.runlock import lock_path

HOLD = (
    "import pathlib, sys, time\n"
    "from torchbisect.utils import runlock\n"
    "with runlock.hold([pathlib.Path(p) for p in sys.argv[2:]], command='the holder'):\n"
    "    pathlib.Path(sys.argv[1] + '.held').touch()\n"
    "    while not pathlib.Path(sys.argv[1]).exists(): time.sleep(0.02)\n"
)


class _Holder:
    def __init__(self, tmp_path: Path, *paths: Path) -> None:
        self.go = tmp_path / "go"
        self.proc = subprocess.Popen([sys.executable, "-c", HOLD, str(self.go), *map(str, paths)])
        assert wait_until(lambda: Path(f"{self.go}.held").exists(), 30)

    def release(self) -> None:
        self.go.touch()
        assert self.proc.wait(30) == 0


def _aliases(tmp_path: Path, real: Path) -> dict[str, Path]:
    (tmp_path / "link.sqlite").symlink_to(real)
    (tmp_path / "folder-link").symlink_to(real.parent, target_is_directory=True)
    (tmp_path / "other").mkdir()
    (tmp_path / "chain.sqlite").symlink_to(tmp_path / "link.sqlite")
    return {
        "a link to the store": tmp_path / "link.sqlite",
        "a link to its folder": tmp_path / "folder-link" / real.name,
        "a link to a link": tmp_path / "chain.sqlite",
        "a detour through ..": tmp_path / "other" / ".." / "real" / real.name,
    }


@pytest.mark.slow  # over 2 s here: child processes
def test_a_store_named_through_a_link_or_a_detour_has_the_same_lock(tmp_path):
    real = tmp_path / "real" / "results.sqlite"
    real.parent.mkdir()
    with Store(real) as store:
        store.add(make_run())
    with Store(tmp_path / "shard.sqlite") as shard:
        shard.add(make_run(started="2026-11-30T10:00:00+00:00"))
    before = hashlib.sha256(real.read_bytes()).hexdigest()
    holder = _Holder(tmp_path, real)
    try:
        for how, alias in _aliases(tmp_path, real).items():
            done = torchbisect("merge", str(alias), "shard.sqlite", cwd=tmp_path)
            assert done.returncode == Exit.NO_VERDICT, (how, done.stdout + done.stderr)
            assert "is in use by another run" in done.stderr and "the holder" in done.stderr, how
            assert hashlib.sha256(real.read_bytes()).hexdigest() == before, how
    finally:
        holder.release()
    done = torchbisect("merge", str(tmp_path / "link.sqlite"), "shard.sqlite", cwd=tmp_path)
    assert done.returncode == Exit.OK and "1 runs added" in done.stdout, done.stderr
    assert lock_path(real).exists() is False and not (tmp_path / "link.sqlite.lock").exists()


def test_a_workdir_named_through_a_link_has_the_same_lock(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / "work-link").symlink_to(work, target_is_directory=True)
    (tmp_path / "m.yaml").write_text("nightly:\n  last: 1\n")
    holder = _Holder(tmp_path, work)
    try:
        done = torchbisect(
            "matrix",
            "--matrix",
            "m.yaml",
            "--allow-no-gpu",
            "--offline",
            "--workdir",
            "work-link",
            "--store",
            "other.sqlite",
            "--no-report",
            cwd=tmp_path,
        )
        assert done.returncode == Exit.NO_VERDICT, done.stdout + done.stderr
        assert "work is in use by another run" in done.stderr
    finally:
        holder.release()


@pytest.mark.parametrize("odd", ["folder", "fifo"])
def test_a_lock_path_that_is_not_a_file_is_one_sentence(tmp_path, odd):
    store = tmp_path / "results.sqlite"
    with Store(store) as opened:
        opened.add(make_run())
    if odd == "folder":
        lock_path(store).mkdir()
    else:
        os.mkfifo(lock_path(store))
    before = hashlib.sha256(store.read_bytes()).hexdigest()
    with Store(tmp_path / "shard.sqlite") as shard:
        shard.add(make_run(started="2026-11-30T10:00:00+00:00"))
    done = torchbisect("merge", "results.sqlite", "shard.sqlite", cwd=tmp_path)
    line = one_sentence(done.stderr, done.returncode, Exit.MISTAKE, command="merge")
    assert (
        f"results.sqlite.lock is a {'folder' if odd == 'folder' else 'FIFO'}, not a lock "
        "file" in line
    )
    assert hashlib.sha256(store.read_bytes()).hexdigest() == before
    assert lock_path(store).exists()  # what was there is left for the user to move
