"""Round 3, item 2: a store from elsewhere is data, never code.

Real SQLite files, built the way an attacker would (sqlite3 on a store torchbisect wrote), given
to the real `torchbisect merge` and `report`: whatever SQL a schema carries (a view, a trigger,
a generated column, a virtual table) never runs; rows are bounded; text that is not UTF-8, a
missing table, a clock in 2099 and a row id or path made of shell are each handled in words.
"""

from __future__ import annotations

import hashlib
import shlex
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import make_cell, make_run
from helpers.cli import one_sentence, torchbisect

from torchbisect.exits import Exit
from torchbisect.store.db import Store
from torchbisect.store.foreign import MAX_ROW_BYTES
from torchbisect.store.runs import EXCERPT_CHARS


def _store(path: Path, runs: int = 2, **kw) -> Path:
    with Store(path) as store:
        for i in range(runs):
            store.add(make_run(make_cell(f"dev-{path.stem}-{i}"), **kw))
    return path


def _sql(path: Path, *statements: str, params=()) -> None:
    db = sqlite3.connect(path)
    for statement in statements:
        db.execute(statement, params) if params else db.execute(statement)
    db.commit()
    db.close()


def _runs(path: Path) -> int:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return db.execute("SELECT count(*) FROM runs").fetchone()[0]
    finally:
        db.close()


def _digest(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.iterdir()}


# Each replaces or adds to a shard's schema what SQLite would run while the store is read.
ENDLESS = (
    "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) "
    "SELECT i AS id, randomblob(1000000) AS cell_json FROM n"
)
CODE_IN_SCHEMA = {
    "runs_is_an_endless_view": (
        ["ALTER TABLE runs RENAME TO kept", f"CREATE VIEW runs AS {ENDLESS}"],
        "it holds a view ('runs')",
    ),
    "a_view_beside_runs": ([f"CREATE VIEW extra AS {ENDLESS}"], "it holds a view ('extra')"),
    "a_trigger_on_runs": (
        ["CREATE TRIGGER t AFTER INSERT ON runs BEGIN DELETE FROM runs; END"],
        "it holds a trigger ('t')",
    ),
    "a_generated_column": (
        ["ALTER TABLE runs ADD COLUMN g BLOB GENERATED ALWAYS AS (zeroblob(1000000000)) VIRTUAL"],
        "has a generated column ('g')",
    ),
    "a_virtual_table": (
        [
            "ALTER TABLE bisections RENAME TO kept",
            "CREATE VIRTUAL TABLE bisections USING fts5(result_json)",
        ],
        "is a virtual table",
    ),
    "a_text_row_id": (
        [
            "ALTER TABLE runs RENAME TO kept",
            "CREATE TABLE runs AS SELECT CAST(id AS TEXT) AS id, * FROM kept",
            "UPDATE runs SET id = '1; rm -rf ~'",
        ],
        "is not an INTEGER PRIMARY KEY",
    ),
}


@pytest.mark.parametrize("case", sorted(CODE_IN_SCHEMA))
def test_sql_in_an_input_store_never_runs_and_is_one_sentence(tmp_path, case):
    statements, said = CODE_IN_SCHEMA[case]
    shard = _store(tmp_path / "in" / "shard.sqlite")
    _sql(shard, *statements)
    before = _digest(shard.parent)
    done = torchbisect("merge", "site.sqlite", str(shard), cwd=tmp_path)
    line = one_sentence(done.stderr, done.returncode, Exit.MISTAKE, command="merge")
    assert said in line and "left untouched" in line
    assert not (tmp_path / "site.sqlite").exists()
    assert _digest(shard.parent) == before  # no -wal, -shm or change beside the input


@pytest.mark.parametrize(
    "case", ["a_trigger_on_runs", "runs_is_an_endless_view", "a_generated_column"]
)
def test_the_target_stores_schema_is_checked_the_same_way(tmp_path, case):
    """A trigger in the target ran during the merge (5 + 5 runs became 1, said as success)."""
    statements, said = CODE_IN_SCHEMA[case]
    target = _store(tmp_path / "site.sqlite", runs=5)
    _sql(target, *statements)
    shard = _store(tmp_path / "shard.sqlite", runs=5)
    before = hashlib.sha256(target.read_bytes()).hexdigest()
    done = torchbisect("merge", str(target), str(shard), cwd=tmp_path)
    assert done.returncode == Exit.MISTAKE, done.stdout + done.stderr
    assert said in done.stderr
    assert hashlib.sha256(target.read_bytes()).hexdigest() == before
    # nor drawn
    shown = torchbisect("report", "--store", str(target), "--out", "page", cwd=tmp_path)
    assert shown.returncode == Exit.MISTAKE and said in shown.stderr, shown.stderr


@pytest.mark.slow  # over 2 s here: child processes
def test_the_connection_is_defended_on_this_python_and_on_any_other_found(tmp_path):
    """Python 3.12+ has Connection.setconfig (defensive, no views, no triggers, untrusted
    schema); 3.11 has only the pragmas, and relies on the schema check above: both are run."""
    pythons = {
        sys.executable,
        *filter(None, (shutil.which(f"python3.{minor}") for minor in (11, 12, 13))),
    }
    pythons |= {str(p) for p in Path("/root/.pyenv/versions").glob("3.1[1-3]*/bin/python")}
    store = _store(tmp_path / "shard.sqlite")
    _sql(store, "CREATE VIEW v AS SELECT id FROM runs")
    src = Path(__file__).resolve().parents[2] / "src"
    script = (
        "import sys, sqlite3, pathlib; sys.path.insert(0, sys.argv[1]);"
        "from torchbisect.store import foreign; p = pathlib.Path(sys.argv[2]);"
        "db = foreign._connect(p, p);"
        "print(db.execute('PRAGMA trusted_schema').fetchone()[0],"
        " db.execute('PRAGMA query_only').fetchone()[0], hasattr(db, 'setconfig'));"
        'exec(\'try: db.execute("SELECT * FROM v").fetchall(); print("view ran")\\n'
        "except sqlite3.Error as e: print(e)')"
    )
    seen = set()
    for python in sorted(pythons):
        copy = tmp_path / f"copy-{len(seen)}.sqlite"
        shutil.copyfile(store, copy)
        done = subprocess.run(
            [python, "-c", script, str(src), str(copy)], capture_output=True, text=True, timeout=60
        )
        if done.returncode == 127 or "SyntaxError" in done.stderr:
            continue  # a pyenv shim of a version not selected, or too old for the package
        assert done.returncode == 0, done.stderr
        flags, view = done.stdout.splitlines()
        trusted, query_only, has_setconfig = flags.split()
        assert (trusted, query_only) == ("0", "1")
        assert view == (
            'access to view "v" prohibited' if has_setconfig == "True" else "view ran"
        )  # 3.11: the schema check refuses it before any read
        seen.add(has_setconfig)
    assert seen


def test_a_row_over_16_mib_is_refused_by_sqlite_not_loaded(tmp_path):
    shard = _store(tmp_path / "shard.sqlite", runs=3)
    _sql(shard, "UPDATE runs SET log_excerpt = ? WHERE id = 2", params=("x" * (MAX_ROW_BYTES + 1),))
    done = torchbisect("merge", "site.sqlite", str(shard), cwd=tmp_path)
    assert done.returncode == Exit.MISTAKE, done.stderr
    assert "larger than 16 MiB" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "site.sqlite").exists()


@pytest.mark.slow  # over 2 s here: child processes
def test_a_huge_log_excerpt_is_capped_when_merged_and_when_drawn(tmp_path):
    """A 120 MB excerpt became a 120 MB index.html: now the store and the page keep its end."""
    excerpt = "FIRST LINE\n" + "y" * (3 * 1024 * 1024) + "\nLAST LINE"
    shard = _store(tmp_path / "shard.sqlite", runs=1)
    _sql(shard, "UPDATE runs SET log_excerpt = ?", params=(excerpt,))
    drawn = torchbisect("report", "--store", str(shard), "--out", "before", cwd=tmp_path)
    assert drawn.returncode == Exit.OK, drawn.stderr
    page = (tmp_path / "before" / "index.html").read_text()
    assert "LAST LINE" in page and "FIRST LINE" not in page and len(page) < 1024 * 1024
    done = torchbisect("merge", "site.sqlite", str(shard), cwd=tmp_path)
    assert done.returncode == Exit.OK, done.stderr
    db = sqlite3.connect(tmp_path / "site.sqlite")
    (stored,) = db.execute("SELECT log_excerpt FROM runs").fetchone()
    db.close()
    assert stored.endswith("LAST LINE") and len(stored) < EXCERPT_CHARS + 100


def test_text_that_is_not_utf8_reads_as_replacement_characters(tmp_path):
    shard = _store(tmp_path / "shard.sqlite", runs=2)
    _sql(
        shard,
        "UPDATE runs SET log_excerpt = CAST(X'6f6b20fffe20656e64' AS TEXT), "
        "reason = CAST(X'c3' AS TEXT) WHERE id = 1",
    )  # 'ok \xff\xfe end', a lone byte
    done = torchbisect("merge", "site.sqlite", str(shard), cwd=tmp_path)
    assert done.returncode == Exit.OK, done.stderr
    assert "2 runs added" in done.stdout
    with Store(tmp_path / "site.sqlite") as store:
        texts = sorted(r.log_excerpt for r in store.runs())
    assert "ok \ufffd\ufffd end" in texts
    # read in place
    drawn = torchbisect("report", "--store", str(shard), "--out", "page", cwd=tmp_path)
    assert drawn.returncode == Exit.OK, drawn.stderr
    assert "ok \ufffd\ufffd end" in (tmp_path / "page" / "index.html").read_text()


def test_a_store_without_a_bisections_or_attendance_table_merges_its_runs(tmp_path):
    shard = _store(tmp_path / "shard.sqlite", runs=2)
    _sql(shard, "DROP TABLE bisections")
    done = torchbisect("merge", "site.sqlite", str(shard), cwd=tmp_path)
    assert done.returncode == Exit.OK, done.stderr
    assert "2 runs added" in done.stdout
    target = _store(tmp_path / "target.sqlite", runs=1)
    _sql(target, "DROP TABLE bisections")
    done = torchbisect("merge", str(target), "site.sqlite", cwd=tmp_path)
    assert done.returncode == Exit.OK and _runs(target) == 3, done.stderr


def test_entries_dated_after_the_merge_are_refused_and_said(tmp_path):
    """A runner whose clock says 2099 would pin its verdict as the newest forever."""
    shard = tmp_path / "shard.sqlite"
    with Store(shard) as store:
        store.add(make_run(make_cell("dev-now")))
        store.add(make_run(make_cell("dev-future"), started="2099-01-01T00:00:00+00:00"))
        store.add(make_run(make_cell("dev-naive"), started="2098-06-01T00:00:00"))
    done = torchbisect("merge", "site.sqlite", str(shard), cwd=tmp_path)
    assert done.returncode == Exit.OK, done.stderr
    assert "1 runs added" in done.stdout
    assert "2 entries dated after this merge" in done.stdout and "clock" in done.stdout
    with Store(tmp_path / "site.sqlite") as store:
        assert [r.cell.id for r in store.runs()] == ["dev-now"]


def test_damaged_row_advice_pastes_nothing_into_a_shell(tmp_path):
    folder = tmp_path / "$(touch pwned) 'q"
    folder.mkdir()
    shard = _store(folder / "shard.sqlite", runs=2)
    db = sqlite3.connect(shard)
    db.execute("PRAGMA ignore_check_constraints = ON")
    db.execute("UPDATE runs SET reason = ? WHERE id = 2", ("x",))
    db.execute("UPDATE runs SET seconds_install = 'not a number' WHERE id = 2")
    db.commit()
    db.close()
    done = torchbisect("merge", "site.sqlite", str(shard), cwd=tmp_path)
    assert done.returncode == Exit.MISTAKE, done.stderr
    advice = done.stderr.split("`")[-2]
    assert shlex.split(advice) == ["sqlite3", str(shard), "DELETE FROM runs WHERE id = 2"]
    assert not (tmp_path / "pwned").exists()
