"""Issue 53.6: bounds everywhere input comes from elsewhere, and links below the folders the tool
writes or prunes.

Each attack of the round is one test, against the real command or the real component: a store in
WAL mode whose application id was cleared (half its runs merged without a word), an ownership mark
with a NUL or of gigabytes (read whole, then a traceback), a regression folder or a `venvs/`
swapped for a link (written or pruned through)."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

from helpers import make_cell, make_run
from helpers.cli import env, one_sentence

from torchbisect.exits import Exit
from torchbisect.store.db import Store


def _tb(cwd: Path, *argv: str | Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "torchbisect", *map(str, argv)], cwd=cwd,
                          env=env(), capture_output=True, text=True, timeout=300)


def test_a_wal_store_without_the_tools_id_and_without_its_wal_is_refused(tmp_path):
    """Its runs since the last checkpoint are in the -wal left behind: merged alone, half its
    runs went in with exit 0 and no word."""
    live = tmp_path / "live" / "store.sqlite"
    with Store(live) as store:
        for i in range(24):
            store.add(make_run(make_cell(f"dev-a{i}")))
    other = sqlite3.connect(live, isolation_level=None)  # another program's store, in WAL mode
    other.execute("PRAGMA application_id = 0")
    other.execute("PRAGMA journal_mode = WAL")
    reader = sqlite3.connect(live, isolation_level=None)
    reader.execute("BEGIN")  # a reader: no checkpoint can finish meanwhile
    reader.execute("SELECT count(*) FROM runs").fetchall()
    with Store(live) as store:
        for i in range(24):
            store.add(make_run(make_cell(f"dev-b{i}")))
        shutil.copyfile(live, tmp_path / "alone.sqlite")  # the file, without its -wal
    reader.close()
    other.close()
    done = _tb(tmp_path, "merge", "site.sqlite", "alone.sqlite")
    line = one_sentence(done.stderr, done.returncode, Exit.MISTAKE)
    assert "alone.sqlite is in WAL mode without its alone.sqlite-wal and was not written by " \
        "this torchbisect" in line and "nothing was merged" in line, line
    assert not (tmp_path / "site.sqlite").exists()
