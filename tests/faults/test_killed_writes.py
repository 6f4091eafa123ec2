"""Issue 53.5: a store survives a kill at any instruction of a write.

A real writer process (the store's own `add`, one committed run after another, each said on its
stdout once committed) is killed with SIGKILL at random moments, again and again on one file.
After every kill the store must open as the next run opens it, hold every run that was said to
be committed, and take the next run's writes.  A kill inside the switch of journal modes left a
hot `-journal` that the read-only check could not roll back, and the store was called "damaged …
move it away" — following that advice loses every verdict.
"""

from __future__ import annotations

import random
import subprocess
import sys
import time
from pathlib import Path

from helpers import REPO
from helpers.cli import env

from torchbisect.store.db import Store

TRIALS = 400  # the bound: kills at random delays, until enough landed inside a write
HOT_KILLS = 4  # kills that left a -journal or a -wal beside the store
SECONDS = 150

_WRITER = f"""
import sys
sys.path.insert(0, {str(REPO / "tests")!r})
from helpers import make_cell, make_run
from torchbisect.store.db import Store
path, first, last = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with Store(path) as store:
    print("open", flush=True)
    for i in range(first, last):
        store.add(make_run(make_cell(f"dev-{{i}}")))
        print(i, flush=True)
"""


def _write(store: Path, first: int, last: int, *, kill_after: float | None) -> set[str]:
    """Start a writer of runs dev-FIRST … dev-LAST; kill it `kill_after` seconds after it opened
    the store (None: let it finish).  Returns the runs it said were committed."""
    writer = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(store), str(first), str(last)],
        stdout=subprocess.PIPE,
        text=True,
        env=env(),
    )
    assert writer.stdout is not None
    opened = writer.stdout.readline()
    if kill_after is not None:
        time.sleep(kill_after)
        writer.kill()
    said = writer.stdout.read().split()
    writer.wait(60)
    assert opened.strip() == "open", f"the writer could not open the store ({opened!r})"
    assert kill_after is not None or writer.returncode == 0
    return {f"dev-{i}" for i in said}


def _stored(store: Path) -> set[str]:
    with Store(store) as opened:  # as `matrix` and `bisect` open it: the check, then writes
        return {run.cell.id for run in opened.runs()}


def test_a_store_killed_anywhere_inside_a_write_opens_whole_and_the_next_run_resumes(tmp_path):
    store = tmp_path / "results.sqlite"
    committed: set[str] = set()
    hot, started = 0, time.monotonic()
    rng = random.Random(53)
    for trial in range(TRIALS):
        committed |= _write(
            store, trial * 1000, trial * 1000 + 1000, kill_after=rng.uniform(0, 0.04)
        )
        left = [s for s in ("-journal", "-wal") if Path(f"{store}{s}").exists()]
        hot += bool(left)
        stored = _stored(store)  # raised "damaged … move it away" on a hot journal
        assert committed <= stored, f"kill {trial} (left {left}) lost {committed - stored}"
        if hot >= HOT_KILLS or time.monotonic() - started > SECONDS:
            break
    assert hot, "no kill fell inside a write: the test proved nothing"
    resumed = _write(store, 10**6, 10**6 + 5, kill_after=None)
    assert _stored(store) >= committed | resumed


def test_a_shard_killed_inside_a_write_merges_every_committed_run(tmp_path):
    """`merge` reads an input from a private copy: the hot `-journal` beside a killed shard
    travels with it and is rolled back there, so the copy is the last committed state (without
    it the copy's header said WAL mode with no -wal, and the shard was refused)."""
    shard = tmp_path / "shard.sqlite"
    committed: set[str] = set()
    rng = random.Random(5)
    for trial in range(TRIALS):
        committed |= _write(
            shard, trial * 1000, trial * 1000 + 1000, kill_after=rng.uniform(0, 0.04)
        )
        if Path(f"{shard}-journal").exists() and committed:
            break
    else:
        raise AssertionError("no kill left a -journal: the test proved nothing")
    with Store(shard, read_only=True) as copy:
        assert {run.cell.id for run in copy.runs()} >= committed
    assert Path(f"{shard}-journal").exists(), "reading the shard changed it"
