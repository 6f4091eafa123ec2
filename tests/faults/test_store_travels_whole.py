"""48.5: a shard's store travels whole.  A shard's `results.sqlite` without its `-wal` (what an
upload takes when the shard dies) merged 24 of 48 committed runs with exit 0 and no word; a run
dated in a form no clock writes sorted after every true date and stayed its cell's newest; a
cell or runner kind named with a zero-width space was merged.  Now every committed write is
checkpointed into the file, which is left in rollback mode (one file, at rest); a copy taken in
the middle of a write is refused in one sentence, nothing merged."""

from __future__ import annotations

import dataclasses
import shutil
import sqlite3
import subprocess
from pathlib import Path

from helpers import make_cell, make_run
from helpers.cli import torchbisect

from torchbisect.exits import Exit
from torchbisect.model import Attendance
from torchbisect.store.db import Store


def _merge(cwd: Path, *args) -> subprocess.CompletedProcess:
    return torchbisect("merge", *args, cwd=cwd, timeout=120)


def _runs(path: Path) -> int:
    with Store(path, read_only=True) as store:
        return store.count()


def test_each_committed_run_is_in_the_file_itself_at_rest(tmp_path):
    with Store(tmp_path / "shard.sqlite") as store:
        for i in range(24):
            store.add(make_run(make_cell(f"dev-a{i}")))
        shutil.copyfile(tmp_path / "shard.sqlite", tmp_path / "alone.sqlite")  # still open
    header = (tmp_path / "alone.sqlite").read_bytes()[:72]
    assert header[18] == 1 and not (tmp_path / "alone.sqlite-wal").exists()  # rollback: whole
    done = _merge(tmp_path, "site.sqlite", "alone.sqlite")
    assert done.returncode == Exit.OK and "24 runs added" in done.stdout, done.stderr
    assert (tmp_path / "shard.sqlite").read_bytes()[18] == 1  # closed: one file too


def test_a_copy_taken_while_a_write_was_under_way_is_refused_and_nothing_merged(tmp_path):
    live = tmp_path / "live" / "shard.sqlite"
    with Store(live) as store:
        for i in range(24):
            store.add(make_run(make_cell(f"dev-a{i}")))
        reader = sqlite3.connect(live, isolation_level=None)  # a reader mid-read of the store
        reader.execute("PRAGMA journal_mode = WAL")  # in WAL, as while a write is under way:
        reader.execute("BEGIN")  # the checkpoint after each run cannot finish meanwhile
        reader.execute("SELECT count(*) FROM runs").fetchall()
        for i in range(24):
            store.add(make_run(make_cell(f"dev-b{i}")))
        shutil.copyfile(live, tmp_path / "shard.sqlite")  # the upload took the file alone
        shutil.copytree(live.parent, tmp_path / "whole")  # and here with its -wal
        reader.close()
    done = _merge(tmp_path, "site.sqlite", "shard.sqlite")
    lines = done.stderr.strip().splitlines()
    assert done.returncode == Exit.MISTAKE and len(lines) == 1, done.stdout + done.stderr
    assert (
        "shard.sqlite was copied without its shard.sqlite-wal while a run was being written to it"
        in lines[0]
        and "nothing was merged" in lines[0]
    )
    assert not (tmp_path / "site.sqlite").exists()
    whole = _merge(tmp_path, "site.sqlite", tmp_path / "whole" / "shard.sqlite")
    assert whole.returncode == Exit.OK and _runs(tmp_path / "site.sqlite") == 48, whole.stderr


def test_runs_dated_past_any_clock_or_named_invisibly_are_refused_at_merge(tmp_path):
    runs = [
        make_run(make_cell("dev-ok")),
        make_run(make_cell("dev-later"), started="2099-01-01T00:00:00+00:00"),
        make_run(make_cell("dev-nines"), started="9999"),
        make_run(make_cell("dev-odd"), started="2099-01-01 at noon"),
        make_run(make_cell("dev-\u200bzw")),
        dataclasses.replace(make_run(make_cell("dev-bel")), gpu="NVIDIA H200\x07"),
    ]
    with Store(tmp_path / "shard.sqlite") as store:
        store.add_many(runs)
        store.add_attendance(
            Attendance(
                kind="H200\u200b",
                shard="1/1",
                run="1-1",
                gpu="",
                host="h",
                started="2026-11-30T10:00:00+00:00",
                finished="2026-11-30T10:00:01+00:00",
                cells=1,
                probed=1,
                reused=0,
                failed=0,
            )
        )
    done = _merge(tmp_path, "site.sqlite", "shard.sqlite")
    assert done.returncode == Exit.OK, done.stderr
    assert "3 entries dated after this merge" in done.stdout
    assert "3 entries named with an invisible or control character" in done.stdout
    with Store(tmp_path / "site.sqlite", read_only=True) as site:
        assert [r.cell.id for r in site.runs()] == ["dev-ok"] and site.attendance() == []
