"""The result store: every cell run and every bisection, in one SQLite file.

One row per cell run, never updated: a rerun adds a row, and readers take the newest run per
(cell, GPU model).  Each write is one transaction and rows carry a natural key (cell, wheel sha256,
probe version, GPU, driver, start time) with a UNIQUE constraint, so a process killed at any moment
leaves either the whole row or nothing, and merging the same shard twice adds nothing the second
time.  Bisection results sit in their own table; nightlies probed by a bisection are ordinary runs.
Which shard of which runner kind reported in which scheduled run sits in `attendance`
(`model.Attendance`).  That table came later and is created by the first write of one, not by
opening a store: a store that has none reads as "nothing reported", and a committed store opened
for a report is never changed by it.
"""

from __future__ import annotations

import json
import random
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .. import defaults
from ..errors import ConfigError, InfraError
from ..model import Attendance, Cell, CellRun, RunStatus
from ..outcome import BisectResult
from ..probe import document
from ..utils import files
from ..utils.words import count, plain_label
from . import check, foreign
from .columns import RUN_FIELDS
from .reuse import covers
from .runs import damaged_row, read_export, run_from_row, run_to_json, run_to_row

EXPORT_SCHEMA = 1
_SCHEMA_VERSION = 1
APPLICATION_ID = foreign.APPLICATION_ID  # a store this torchbisect has written to

# The tables of the store: a row of `runs` holds RUN_FIELDS, one bisection a row of `bisections`.
_TABLES_SQL = """
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    cell_id TEXT NOT NULL,
    cell_json TEXT NOT NULL,
    status TEXT NOT NULL,
    verdict TEXT,
    cases_json TEXT NOT NULL,   -- {"case name": "verdict"}, for SQL readers
    probe_json TEXT,            -- the probe's whole document when status is ok
    reason TEXT NOT NULL,
    wheel_sha256 TEXT NOT NULL,
    probe_version TEXT NOT NULL,
    gpu TEXT NOT NULL,
    driver TEXT NOT NULL,
    backend TEXT NOT NULL,
    started TEXT NOT NULL,
    seconds_install REAL NOT NULL,
    seconds_probe REAL NOT NULL,
    log_excerpt TEXT NOT NULL,
    UNIQUE (cell_id, wheel_sha256, probe_version, gpu, driver, started)
);
CREATE INDEX IF NOT EXISTS runs_skip_key
    ON runs (wheel_sha256, probe_version, gpu, driver, status);
CREATE INDEX IF NOT EXISTS runs_cell ON runs (cell_id, gpu, started);
"""
# Also made by the first write of one: a store from elsewhere may lack the table.
_BISECTIONS_SQL = """
CREATE TABLE IF NOT EXISTS bisections (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    direction TEXT NOT NULL,
    case_name TEXT NOT NULL,
    cuda TEXT NOT NULL,
    python TEXT NOT NULL,
    finished TEXT NOT NULL,
    result_json TEXT NOT NULL,
    UNIQUE (direction, case_name, cuda, python, finished)
)"""
# Created on the first write (`_ensure_attendance`), so opening a store never changes it.
_ATTENDANCE_SQL = """
CREATE TABLE IF NOT EXISTS attendance (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    shard TEXT NOT NULL,
    run TEXT NOT NULL,
    doc_json TEXT NOT NULL,     -- model.Attendance.to_json()
    UNIQUE (kind, shard, run)
)"""


def check_store(path: Path) -> None:
    """Refuse (ConfigError) a store at `path` that is damaged, foreign or newer, before a command
    does anything else; a missing or empty one is fine (it is created).  Opening it later does not
    read it again while the file is unchanged (check.inspect)."""
    check.inspect(path, _SCHEMA_VERSION)


class Store:
    """`Store(path)` opens (and creates) the SQLite file; use from one thread, or as a context."""

    def __init__(
        self, path: str | Path = defaults.STORE, *, timeout: float = 60.0, read_only: bool = False
    ):
        self.path = Path(path)
        self._copy: foreign.Copy | None = None
        self._wrote = False
        if read_only:  # an input: read from a private, defended copy (store/foreign.py)
            self._copy = foreign.Copy(self.path, schema_version=_SCHEMA_VERSION)
            self._db = self._copy.db
            return
        check.inspect(self.path, _SCHEMA_VERSION)  # read-only: a damaged file stays as is
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            if files.is_full(err):
                raise files.disk_full(self.path.parent, err) from None
            raise
        self._db = sqlite3.connect(self.path, timeout=timeout, isolation_level=None)
        self._db.row_factory = sqlite3.Row
        self._db.text_factory = foreign.lenient_text  # a store edited elsewhere may hold any bytes
        try:
            self._db.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
            _patiently(self._setup, timeout)
        except sqlite3.Error as err:
            self._db.close()
            raise check.not_damage(self.path, err) or err from None

    def _setup(self) -> None:
        # Two shards creating one file race for the lock that creating the tables takes, and
        # SQLite does not wait for it on a brand-new file: hence `_patiently`.  A store that is
        # already set up is not written to: opening one never changes it.
        self._db.execute("PRAGMA synchronous = NORMAL")
        if self._db.execute("PRAGMA user_version").fetchone()[0] == _SCHEMA_VERSION:
            return
        with self._transaction():
            self._check_version()
            _create(self._db)

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._wrote:  # left at rest, one file, when no other connection holds it
            with suppress(sqlite3.Error):
                self._at_rest()
        self._db.close()
        if self._copy is not None:
            self._copy.close()

    # -- cell runs ------------------------------------------------------------------------------

    def add(self, run: CellRun) -> int:
        """Store one run; returns its row id (the existing one when this run is already stored)."""
        with self._transaction():
            return self._insert(run)

    def add_many(self, runs: Iterable[CellRun]) -> int:
        """Store runs in one transaction; returns how many were new."""
        with self._transaction():
            before = self._count()
            for run in runs:
                self._insert(run)
            return self._count() - before

    def runs(self) -> list[CellRun]:
        """Every stored run, oldest first."""
        return list(self.iter_runs())

    def iter_runs(self) -> Iterator[CellRun]:
        """Every stored run, oldest first, one at a time (an export of any size)."""
        for row in self._rows("runs", "*", "started, id"):
            yield self._run(row)

    def count(self) -> int:
        """How many runs the store holds."""
        return self._count()

    def latest(self) -> list[CellRun]:
        """The newest run of each (cell id, probe, GPU model), ordered by cell id, probe, GPU:
        one build's runs by two probes (two regressions) never stand in for each other."""
        rows = self._db.execute(
            """SELECT * FROM runs r WHERE r.id = (
                   SELECT id FROM runs s WHERE s.cell_id = r.cell_id AND s.gpu = r.gpu
                   AND json_extract(s.cell_json, '$.probe') IS json_extract(r.cell_json, '$.probe')
                   ORDER BY s.started DESC, s.id DESC LIMIT 1)
               ORDER BY r.cell_id, json_extract(r.cell_json, '$.probe'), r.gpu"""
        )
        return [self._run(r) for r in rows]

    def latest_counted(self) -> list[CellRun]:
        """`latest`, as the pages draw it: a plain script's build that answered both ways over
        its stored runs is shown flaky, with how many were affected (store/repeats.py)."""
        from .repeats import latest_with_repeats

        return latest_with_repeats(self.latest(), self.iter_runs())

    def has_result(self, cell_id: str) -> bool:
        """True when some run of this cell got a verdict (infrastructure failures do not count)."""
        row = self._db.execute(
            "SELECT 1 FROM runs WHERE cell_id = ? AND status = ? LIMIT 1",
            (cell_id, RunStatus.OK.value),
        ).fetchone()
        return row is not None

    def find_ok(
        self, cell: Cell, *, wheel_sha256: str | None, probe_version: str, gpu: str, driver: str
    ) -> CellRun | None:
        """The newest stored run that answers for `cell` by the one reuse rule (`reuse.covers`),
        or None (then the cell must run).  The matrix and the bisection both ask here.  A run of
        the cell itself comes before one of another cell of the same build (two entries naming one
        wheel): that one is stored again under this cell's id (`keep_reused`), a row of a run
        the cell already has.

        `wheel_sha256` is what a run of `cell` would record, when known before installing; without
        it a nightly is looked up by its URL.  SQL narrows the rows by the skip key; `covers`
        decides.
        """
        found = self.answering(
            cell, wheel_sha256=wheel_sha256, probe_version=probe_version, gpu=gpu, driver=driver
        )
        return next(found, None)

    def answering(
        self, cell: Cell, *, wheel_sha256: str | None, probe_version: str, gpu: str, driver: str
    ) -> Iterator[CellRun]:
        """Every stored run that answers for `cell` by the reuse rule, in `find_ok`'s order
        (the cell's own first, newest first): a script asked of one build several times (a
        bisection's --repeat, `matrix --force`) left one run per answer."""
        url = cell.url if wheel_sha256 is None else None
        rows = self._db.execute(
            """SELECT * FROM runs WHERE (wheel_sha256 = ? OR json_extract(cell_json, '$.url') = ?)
               AND probe_version = ? AND gpu = ? AND driver = ? AND status = ?
               ORDER BY cell_id = ? DESC, started DESC, id DESC""",
            (wheel_sha256, url, probe_version, gpu, driver, RunStatus.OK.value, cell.id),
        ).fetchall()
        for row in rows:
            run = self._run(row)
            if covers(
                run,
                cell,
                wheel_sha256=wheel_sha256,
                probe_version=probe_version,
                gpu=gpu,
                driver=driver,
            ):
                yield run

    def has_run_of_url(self, url: str) -> bool:
        """Whether a run with a verdict was made of the wheel at `url` (a path or a link)."""
        row = self._db.execute(
            "SELECT 1 FROM runs WHERE json_extract(cell_json, '$.url') = ? AND status = ? LIMIT 1",
            (url, RunStatus.OK.value),
        ).fetchone()
        return row is not None

    def drop_runs(self, run_ids: Iterable[int]) -> int:
        """Delete these runs in one transaction (`bisect --forget`: a verdict taken back on
        purpose; the caller says which); returns how many went.  Nothing else deletes rows."""
        ids = sorted(set(run_ids))
        with self._transaction():
            before = self._count()
            self._db.executemany("DELETE FROM runs WHERE id = ?", [(i,) for i in ids])
            return before - self._count()

    # -- bisections -----------------------------------------------------------------------------

    def add_bisection(self, result: BisectResult) -> int:
        with self._transaction():
            return self._insert_bisection(result)

    def bisections(self) -> list[BisectResult]:
        """Every bisection, oldest first; [] for a store without the table."""
        if not self._has("bisections"):
            return []
        rows = self._rows("bisections", "id, result_json", "finished, id")
        out = []
        for row in rows:
            try:
                doc = document.check_bisection(json.loads(row["result_json"]))
                out.append(BisectResult.from_json(doc))
            except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as err:
                raise ConfigError(damaged_row(self.path, "bisections", row["id"], err)) from None
        return out

    # -- attendance -----------------------------------------------------------------------------

    def add_attendance(self, attended: Attendance) -> None:
        """Record that a shard reported; the same (kind, shard, run) again keeps the first."""
        self.add_attendance_many([attended])

    def add_attendance_many(self, attendance: Iterable[Attendance]) -> None:
        """`add_attendance` for each, in one transaction: all are recorded, or none."""
        with self._transaction():
            for attended in attendance:
                self._insert_attendance(attended)

    def attendance(self) -> list[Attendance]:
        """Every shard that reported, oldest first; [] for a store without the table."""
        if not self._has("attendance"):
            return []
        out = []
        for row in self._rows(
            "attendance", "id, doc_json", "json_extract(doc_json, '$.started'), id"
        ):
            try:
                out.append(Attendance.from_json(json.loads(row["doc_json"])))
            except (ValueError, TypeError, RecursionError) as err:
                raise ConfigError(damaged_row(self.path, "attendance", row["id"], err)) from None
        return out

    def _has(self, table: str) -> bool:
        return (
            self._db.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
            ).fetchone()
            is not None
        )

    def _rows(self, table: str, columns: str, order: str) -> Iterator[sqlite3.Row]:
        """`columns` of every row of `table` in `order`; an input is read in row-id order (no
        sort, so no temporary storage), and a row over its bounds is one sentence."""
        if self._copy is None:
            yield from self._db.execute(f"SELECT {columns} FROM {table} ORDER BY {order}")
            return
        last = None
        try:
            for row in self._db.execute(f"SELECT {columns} FROM {table} ORDER BY id"):
                last = row["id"]
                yield row
        except sqlite3.DataError:  # SQLITE_TOOBIG: a value over foreign.MAX_ROW_BYTES
            after = self._db.execute(
                f"SELECT min(id) FROM {table} WHERE ? IS NULL OR id > ?", (last, last)
            ).fetchone()[0]
            raise foreign.too_big(self.path, table, after) from None
        except sqlite3.OperationalError as err:
            if "interrupt" not in str(err):
                raise
            raise foreign.stopped(self.path) from None

    def _insert_attendance(self, attended: Attendance) -> None:
        self._db.execute(_ATTENDANCE_SQL)
        self._db.execute(
            "INSERT OR IGNORE INTO attendance (kind, shard, run, doc_json) VALUES (?, ?, ?, ?)",
            (
                attended.kind,
                attended.shard,
                attended.run,
                json.dumps(attended.to_json(), sort_keys=True),
            ),
        )

    # -- merging and exports --------------------------------------------------------------------

    def merge_from(
        self,
        other: str | Path,
        *,
        not_after: datetime | None = None,
        say: Callable[[str], None] = print,
    ) -> tuple[int, int]:
        """Add the runs, bisections and attendance of another store (SQLite or JSON export) that
        are not here.

        Returns (runs added, runs already present); merging the same file twice adds nothing.
        Entries are read and inserted one at a time, in one transaction: memory stays that of
        one run whatever the input's size, and a bad input adds nothing.  An entry dated after
        `not_after` (the merge's own time) is refused and said: a runner whose clock says 2099
        would otherwise hold the newest verdict of its cell forever.
        """
        future: list[str] = []
        hidden: list[str] = []
        differing: list[str] = []
        with self._transaction():
            before, seen = self._count(), 0
            for entry in _read_any(Path(other)):
                if not_after is not None and _after(entry, not_after):
                    future.append(_date_of(entry))
                elif not_after is not None and not all(map(plain_label, _labels(entry))):
                    hidden.append(next(t for t in _labels(entry) if not plain_label(t)))
                elif isinstance(entry, CellRun):
                    if differs := self._insert_or_compare(entry):
                        differing.append(differs)
                    seen += 1
                elif isinstance(entry, Attendance):
                    self._insert_attendance(entry)
                else:
                    self._insert_bisection(entry)
            added = self._count() - before
            if differing:  # raised inside the transaction: nothing of `other` is kept
                raise ConfigError(
                    f"{other}: holds {count(len(differing), 'run')} also stored here with "
                    f"other content (the first: {differing[0]}): a run is measured once, so one "
                    "of the two files was changed after it was measured; nothing was merged: "
                    "find which one holds the runs as measured, and merge that one"
                )
        if future:
            when = f"{not_after:%Y-%m-%d %H:%M} UTC"
            say(
                f"{other}: {len(future)} entries dated after this merge ({when}; the latest "
                f"{max(future)[:40]!r}) were not merged: the clock of the machine that made "
                "them is wrong; correct it and run those cells again"
            )
        if hidden:
            say(
                f"{other}: {len(hidden)} entries named with an invisible or control character "
                f"(the first {ascii(hidden[0])}) were not merged: no matrix.yaml or "
                "runners.yaml names one so; run those cells again from a checked matrix"
            )
        return added, seen - added

    def checkpoint(self) -> None:
        """Move every committed transaction from the `-wal` into the file itself, so that the
        file alone holds them all (what `merge` leaves for an upload that takes that file)."""
        try:
            busy = self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
        except sqlite3.Error as err:
            raise check.not_damage(self.path, err) or err from None
        if busy:
            raise InfraError(
                f"{self.path}: another process holds it open, so its -wal could not "
                "be moved into it; run again once that process has ended"
            )

    def export_json(self, path: str | Path) -> Path:
        """Write every run and bisection to a JSON document that `merge_from` reads back.

        Written run by run (memory stays that of one run, whatever the store holds), to a
        temporary file renamed when complete (`files.atomic`: a full disk is one sentence).
        """
        out = Path(path)
        with files.atomic(out) as fh:
            fh.write(f'{{"schema": {EXPORT_SCHEMA},\n "bisections": [')
            for i, result in enumerate(self.bisections()):
                fh.write(("," if i else "") + "\n  " + json.dumps(result.to_json(), sort_keys=True))
            fh.write('\n ],\n "attendance": [')
            for i, attended in enumerate(self.attendance()):
                fh.write(
                    ("," if i else "") + "\n  " + json.dumps(attended.to_json(), sort_keys=True)
                )
            fh.write('\n ],\n "runs": [')
            for i, run in enumerate(self.iter_runs()):
                fh.write(("," if i else "") + "\n  " + json.dumps(run_to_json(run), sort_keys=True))
            fh.write("\n ]\n}\n")
        return out

    # -- internals ------------------------------------------------------------------------------

    def _run(self, row: sqlite3.Row) -> CellRun:
        try:
            return run_from_row(row)
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as err:
            raise ConfigError(damaged_row(self.path, "runs", row["id"], err)) from None

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        # BEGIN IMMEDIATE takes the write lock up front, so two shards writing one file queue on
        # busy_timeout instead of failing halfway through a transaction.
        # Rollback mode, never switched per write (issue 53.5): a kill at any instruction leaves
        # the file and at most a hot -journal, which the next opener rolls back (check.inspect).
        try:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield
                if self._db.execute("PRAGMA application_id").fetchone()[0] != APPLICATION_ID:
                    self._db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            except BaseException:
                with suppress(sqlite3.Error):  # SQLite rolled back already after some errors
                    self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")
            self._wrote = True
            self._at_rest()
        except sqlite3.Error as err:  # a full disk is one sentence, and never called damage
            failed = check.not_damage(self.path, err)
            if failed is None:
                raise
            with suppress(sqlite3.Error):
                self._db.execute("ROLLBACK")
            raise failed from None

    def _at_rest(self) -> None:
        """The file alone holds every committed run — what an upload of a shard killed between
        two runs takes — and carries torchbisect's application id, by which `merge` knows that a
        copy in WAL mode lacks its `-wal` (store/foreign.py).  This torchbisect writes in
        rollback mode, so that holds after each commit; a store another program (or an older
        torchbisect) left in WAL mode has its `-wal` moved into the file and is put back in
        rollback mode once.  Skipped while another connection holds the store: it is shared
        then, not at rest."""
        if self._db.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
            return
        self._quickly("PRAGMA wal_checkpoint(TRUNCATE)")
        self._quickly("PRAGMA journal_mode = DELETE")

    def _quickly(self, pragma: str) -> None:
        """Run `pragma` unless another connection is in the way (no waiting for it)."""
        wait = self._db.execute("PRAGMA busy_timeout").fetchone()[0]
        self._db.execute("PRAGMA busy_timeout = 0")
        try:
            self._db.execute(pragma).fetchall()
        except sqlite3.OperationalError:
            pass  # busy or locked: the store is shared at the moment
        finally:
            self._db.execute(f"PRAGMA busy_timeout = {wait}")

    def _check_version(self) -> None:
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        if version > _SCHEMA_VERSION:
            raise ConfigError(
                f"{self.path} was written by a newer torchbisect (store schema "
                f"{version}); upgrade torchbisect or use another --store"
            )

    def _count(self) -> int:
        count: int = self._db.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
        return count

    def _insert(self, run: CellRun) -> int:
        values = run_to_row(run)
        self._insert_row(values)
        row = self._db.execute(f"SELECT id FROM runs WHERE {_BY_KEY}", _key_of(values)).fetchone()
        return int(row[0])

    def _insert_row(self, values: dict[str, Any]) -> bool:
        """The row `run_to_row` made, inserted unless a run of its key is stored; whether it was."""
        done = self._db.execute(_INSERT_RUN, [values[f] for f in RUN_FIELDS])
        return bool(done.rowcount)

    def _insert_or_compare(self, run: CellRun) -> str:
        """Insert `run`; where a run of its key (cell, wheel, probe file, GPU, driver, start) is
        stored already, "" when the two are the same run, else what differs, in words."""
        values = run_to_row(run)
        if self._insert_row(values):
            return ""
        row = self._db.execute(f"SELECT * FROM runs WHERE {_BY_KEY}", _key_of(values)).fetchone()
        stored = self._run(row)
        here = run_to_row(stored)  # as this torchbisect writes it, whoever wrote it
        fields = [f for f in RUN_FIELDS if here[f] != values[f]]
        if not fields:
            return ""
        verdicts = (
            f", verdict {_said(stored)} here and {_said(run)} there"
            if _said(stored) != _said(run)
            else ""
        )
        return f"{run.cell.id} started {run.started}: {' and '.join(fields)} differ{verdicts}"

    def _insert_bisection(self, result: BisectResult) -> int:
        key = (result.direction.value, result.case, result.cuda, result.python, result.finished)
        self._db.execute(_BISECTIONS_SQL)
        self._db.execute(
            """INSERT OR IGNORE INTO bisections
               (direction, case_name, cuda, python, finished, result_json)
               VALUES (?, ?, ?, ?, ?, ?)""",
            (*key, json.dumps(result.to_json(), sort_keys=True)),
        )
        row = self._db.execute(
            """SELECT id FROM bisections WHERE direction = ? AND case_name = ? AND cuda = ?
               AND python = ? AND finished = ?""",
            key,
        ).fetchone()
        return int(row[0])


# A run's key: a row with the same one is the same run (INSERT OR IGNORE keeps the first).
_RUN_KEY = ("cell_id", "wheel_sha256", "probe_version", "gpu", "driver", "started")
_BY_KEY = " AND ".join(f"{f} = ?" for f in _RUN_KEY)
_INSERT_RUN = (
    f"INSERT OR IGNORE INTO runs ({', '.join(RUN_FIELDS)}) "
    f"VALUES ({', '.join('?' * len(RUN_FIELDS))})"
)


def _key_of(values: dict[str, Any]) -> list[Any]:
    return [values[f] for f in _RUN_KEY]


def _said(run: CellRun) -> str:
    return run.verdict.value if run.verdict else run.status.value


def _date_of(entry: CellRun | BisectResult | Attendance) -> str:
    return entry.finished if isinstance(entry, BisectResult) else entry.started


def _after(entry: CellRun | BisectResult | Attendance, limit: datetime) -> bool:
    """Dated after `limit`, or dated in a form no clock writes ("9999", "2099-01-01 z"), which
    would sort after every true date and stay its cell's newest."""
    try:
        when = datetime.fromisoformat(_date_of(entry))
    except ValueError:
        return bool(_date_of(entry))  # no date at all sorts first: harmless
    return (when if when.tzinfo else when.replace(tzinfo=timezone.utc)) > limit


def _labels(entry: CellRun | BisectResult | Attendance) -> tuple[str, ...]:
    """What names an entry on the page and in a job's labels: a cell id, a runner kind."""
    if isinstance(entry, CellRun):
        return entry.cell.id, entry.gpu
    if isinstance(entry, Attendance):
        return entry.kind, entry.shard, entry.run
    return ()


def _patiently(step: Callable[[], None], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            return step()
        except sqlite3.OperationalError as err:
            if "locked" not in str(err) or time.monotonic() > deadline:
                raise
            time.sleep(random.uniform(0.01, 0.1))


def _create(db: sqlite3.Connection) -> None:
    # executescript() would COMMIT the open transaction, so run the statements one by one.
    for statement in [*_TABLES_SQL.split(";"), _BISECTIONS_SQL]:
        if statement.strip():
            db.execute(statement)
    db.execute(f"PRAGMA user_version = {_SCHEMA_VERSION}")


def _read_any(path: Path) -> Iterator[CellRun | BisectResult | Attendance]:
    """Runs, bisections and attendance from a store file or a JSON export, told apart by
    content."""
    if not path.is_file():
        raise ConfigError(f"{path} does not exist: give a results .sqlite file or a JSON export")
    with path.open("rb") as fh:
        magic = fh.read(len(check.SQLITE_MAGIC))
    if magic == check.SQLITE_MAGIC:
        with Store(path, read_only=True) as other:  # a shard's store is only read
            yield from other.iter_runs()
            yield from other.bisections()
            yield from other.attendance()
        return
    yield from read_export(path, EXPORT_SCHEMA)
