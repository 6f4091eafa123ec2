"""D5 concurrency on one host, D8 damaged stores, D11 the reuse key: real SQLite, real processes."""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import shutil
import sqlite3
import subprocess
import threading
from dataclasses import replace

import pytest
from helpers import ScriptedBackend, make_cell, make_run
from helpers.cli import command, one_sentence, torchbisect
from helpers.runaway import environment, project

from torchbisect.exits import Exit
from torchbisect.plan.lock import Lock, LockedBuild
from torchbisect.probe.scripts import probe_version
from torchbisect.run.selection import select
from torchbisect.store.db import Store

needs_uv = pytest.mark.skipif(shutil.which("uv") is None, reason="uv is not installed")


def _shard(path: str, i: int, barrier, errors) -> None:
    try:
        barrier.wait()
        with Store(path) as store:
            store.add(make_run(make_cell(f"dev-{i}")))
    except Exception as err:  # noqa: BLE001 - reported to the parent
        errors.put(repr(err))


@pytest.mark.slow
def test_shards_started_together_on_a_store_that_does_not_exist_yet(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    errors = ctx.Queue()
    for trial in range(6):
        path = str(tmp_path / f"fresh-{trial}.sqlite")
        barrier = ctx.Barrier(4)
        workers = [ctx.Process(target=_shard, args=(path, i, barrier, errors)) for i in range(4)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(60)
        assert errors.empty(), errors.get()
        with Store(path) as store:
            assert sorted(r.cell.id for r in store.runs()) == [f"dev-{i}" for i in range(4)]


def test_simultaneous_lock_writes_leave_one_whole_lock(tmp_path):
    path = tmp_path / "matrix.lock.json"
    failures = []

    def write(i: int) -> None:
        build = LockedBuild(
            channel="dev",
            version=f"2.99.{i}",
            cuda="cpu",
            python="3.11",
            url=f"/w/torch-2.99.{i}-py3-none-any.whl",
        )
        try:
            for _ in range(20):
                Lock(builds={f"dev-{i}": build}).save(path)
        except Exception as err:  # noqa: BLE001
            failures.append(err)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    assert len(Lock.load(path).builds) == 1
    assert [p.name for p in tmp_path.iterdir()] == ["matrix.lock.json"]  # no temporary left


@pytest.mark.slow
@needs_uv
def test_two_runs_sharing_a_workdir_and_store_give_no_false_failures(tmp_path):
    """With --wait the second run queues behind the first (without it, it is refused: see
    test_runlock.py); both end well and each stores its own runs."""
    argv = project(tmp_path, cells=3)
    env, _ = environment(tmp_path, "daemon")
    runs = [
        subprocess.Popen(
            command(*argv, "--force", "--wait"),
            cwd=tmp_path,
            env=env,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        for _ in range(2)
    ]
    outputs = [r.communicate(timeout=240)[0] for r in runs]
    assert [r.returncode for r in runs] == [Exit.OK, Exit.OK], "\n".join(outputs)
    with Store(tmp_path / "results.sqlite") as store:
        assert {r.status.value for r in store.runs()} == {"ok"}
        assert len(store.runs()) == 6


def _healthy(path):
    with Store(path) as store:
        store.add(make_run(make_cell("dev-a")))
    return path


def _damage(kind: str, path) -> None:
    data = _healthy(path).read_bytes() if kind not in ("random", "text") else b""
    if kind == "truncated":
        path.write_bytes(data[: len(data) // 3])
    elif kind == "random":
        path.write_bytes(os.urandom(20000))
    elif kind == "text":
        path.write_text("this is not a database\n" * 50)
    elif kind == "header_then_noise":
        path.write_bytes(b"SQLite format 3\x00" + os.urandom(8000))
    else:
        db = sqlite3.connect(path)
        statements = {
            "bad_json_row": "UPDATE runs SET cell_json = '{not json'",
            "bad_cell_row": 'UPDATE runs SET cell_json = \'{"id": "x"}\'',
            "bad_date_row": "UPDATE runs SET cell_json = json_set(cell_json, '$.date', "
            "'2025-13-45')",
            "foreign_runs": "DROP TABLE runs; CREATE TABLE runs (id INTEGER, what TEXT)",
            "foreign_db": "DROP TABLE runs; DROP TABLE bisections; CREATE TABLE t (x)",
            "newer_schema": "PRAGMA user_version = 99",
        }
        db.executescript(statements[kind])
        db.close()


KINDS = (
    "truncated",
    "random",
    "text",
    "header_then_noise",
    "bad_json_row",
    "bad_cell_row",
    "bad_date_row",
    "foreign_runs",
    "foreign_db",
    "newer_schema",
)


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_a_damaged_store_is_one_sentence_and_is_never_modified(tmp_path, kind):
    store = tmp_path / "results.sqlite"
    _damage(kind, store)
    before = hashlib.sha256(store.read_bytes()).hexdigest()
    (tmp_path / "matrix.yaml").write_text("preinstalled: true\n")
    commands = [
        ["report", "--store", str(store), "--out", str(tmp_path / "out")],
        ["merge", str(tmp_path / "merged.sqlite"), str(store)],
        ["matrix", "--store", str(store), "--no-report"],
    ]
    for args in commands:
        done = torchbisect(*args, cwd=tmp_path, timeout=120)
        lines = [one_sentence(done.stderr, done.returncode, Exit.MISTAKE, command=args[0])]
        assert "Traceback" not in done.stdout and str(store) in lines[0], lines
        assert any(
            what_to_do in lines[0]
            for what_to_do in ("restore it", "upgrade torchbisect", "give a results .sqlite file")
        ), lines[0]
        assert hashlib.sha256(store.read_bytes()).hexdigest() == before, args


@pytest.mark.parametrize(
    "change",
    [
        # cases: one the stored run never ran (a subset of its cases is reused: store/reuse.py's
        # rule)
        {"env": (("TB_ENTRY_VAR", "1"),)},
        {"cases": ("case_it_never_ran",)},
        {"trials": 7},
        {"timeout": 60.0},
    ],
)
def test_a_cell_probed_differently_is_not_reused(tmp_path, change):
    cell = make_cell("dev-a")
    with Store(tmp_path / "results.sqlite") as store:
        store.add(make_run(cell, probe_version=probe_version(cell.probe), gpu="none", driver=""))
        backend = ScriptedBackend()
        same = select([cell], store, backend=backend, gpu=None)
        changed = select([replace(cell, **change)], store, backend=backend, gpu=None)
    assert len(same.reused) == 1 and not same.to_run
    assert len(changed.to_run) == 1 and not changed.reused


def test_a_store_another_program_holds_locked_is_in_use_not_damaged(tmp_path):
    """An SQLite program (not a torchbisect: those take the store's lock file first) holding the
    store locked past the wait is "in use", exit 3, never "damaged … move it away"."""
    from torchbisect.errors import InfraError
    from torchbisect.store import check

    path = tmp_path / "results.sqlite"
    Store(path).close()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    reader = sqlite3.connect(path, timeout=0)
    try:
        with pytest.raises(sqlite3.OperationalError) as raised:
            reader.execute("SELECT count(*) FROM runs").fetchone()
        said = check.not_damage(path, raised.value)
        assert isinstance(said, InfraError) and said.exit_code == Exit.NO_VERDICT
        assert "is in use by another program" in str(said) and "damaged" not in str(said)
    finally:
        reader.close()
        holder.close()
