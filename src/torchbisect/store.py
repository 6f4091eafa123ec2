"""The result store: every cell run and every bisection, in one SQLite file.

One row per cell run, never updated: a rerun adds a row, and readers take the newest run per
(cell, GPU model).  Each write is one transaction and rows carry a natural key (cell, wheel sha256,
probe version, GPU, driver, start time) with a UNIQUE constraint, so a process killed at any moment
leaves either the whole row or nothing, and merging the same shard twice adds nothing the second
time.  Bisection results sit in their own table; nightlies probed by a bisection are ordinary runs.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .errors import ConfigError
from .model import BisectResult, Cell, CellRun, ProbeResult, RunStatus

DEFAULT_PATH = Path("reports/results.sqlite")
EXPORT_SCHEMA = 1
_SCHEMA_VERSION = 1
_SQLITE_MAGIC = b"SQLite format 3\x00"

_RUN_FIELDS = (
    "cell_id", "cell_json", "status", "verdict", "cases_json", "probe_json", "reason",
    "wheel_sha256", "probe_version", "gpu", "driver", "backend", "started",
    "seconds_install", "seconds_probe", "log_excerpt",
)

_SCHEMA = """
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
CREATE TABLE IF NOT EXISTS bisections (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    direction TEXT NOT NULL,
    case_name TEXT NOT NULL,
    cuda TEXT NOT NULL,
    python TEXT NOT NULL,
    finished TEXT NOT NULL,
    result_json TEXT NOT NULL,
    UNIQUE (direction, case_name, cuda, python, finished)
);
"""


class Store:
    """`Store(path)` opens (and creates) the SQLite file; use from one thread, or as a context."""

    def __init__(self, path: str | Path = DEFAULT_PATH, *, timeout: float = 60.0):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, timeout=timeout, isolation_level=None)
        self._db.row_factory = sqlite3.Row
        self._db.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
        self._db.execute("PRAGMA journal_mode = WAL")
        self._db.execute("PRAGMA synchronous = NORMAL")
        with self._transaction():
            self._check_version()
            _create(self._db)

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._db.close()

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
        rows = self._db.execute("SELECT * FROM runs ORDER BY started, id")
        return [_run_from_row(r) for r in rows]

    def latest(self) -> list[CellRun]:
        """The newest run of each (cell id, GPU model), ordered by cell id then GPU."""
        rows = self._db.execute(
            """SELECT * FROM runs r WHERE r.id = (
                   SELECT id FROM runs s WHERE s.cell_id = r.cell_id AND s.gpu = r.gpu
                   ORDER BY s.started DESC, s.id DESC LIMIT 1)
               ORDER BY r.cell_id, r.gpu""")
        return [_run_from_row(r) for r in rows]

    def has_result(self, cell_id: str) -> bool:
        """True when some run of this cell got a verdict (infrastructure failures do not count)."""
        row = self._db.execute("SELECT 1 FROM runs WHERE cell_id = ? AND status = ? LIMIT 1",
                               (cell_id, RunStatus.OK.value)).fetchone()
        return row is not None

    def find_ok(self, *, wheel_sha256: str, probe_version: str, gpu: str,
                driver: str) -> CellRun | None:
        """The newest run with a verdict for this skip key, or None (then the cell must run)."""
        row = self._db.execute(
            """SELECT * FROM runs WHERE wheel_sha256 = ? AND probe_version = ? AND gpu = ?
               AND driver = ? AND status = ? ORDER BY started DESC, id DESC LIMIT 1""",
            (wheel_sha256, probe_version, gpu, driver, RunStatus.OK.value)).fetchone()
        return _run_from_row(row) if row else None

    # -- bisections -----------------------------------------------------------------------------

    def add_bisection(self, result: BisectResult) -> int:
        with self._transaction():
            return self._insert_bisection(result)

    def bisections(self) -> list[BisectResult]:
        rows = self._db.execute("SELECT result_json FROM bisections ORDER BY finished, id")
        return [BisectResult.from_json(json.loads(r["result_json"])) for r in rows]

    # -- merging and exports --------------------------------------------------------------------

    def merge_from(self, other: str | Path) -> tuple[int, int]:
        """Add the runs and bisections of another store (SQLite or JSON export) that are not here.

        Returns (runs added, runs already present); merging the same file twice adds nothing.
        """
        runs, bisections = _read_any(Path(other))
        with self._transaction():
            before = self._count()
            for run in runs:
                self._insert(run)
            for result in bisections:
                self._insert_bisection(result)
            added = self._count() - before
        return added, len(runs) - added

    def export_json(self, path: str | Path) -> Path:
        """Write every run and bisection to a JSON document that `merge_from` reads back."""
        doc = {
            "schema": EXPORT_SCHEMA,
            "runs": [run_to_json(r) for r in self.runs()],
            "bisections": [b.to_json() for b in self.bisections()],
        }
        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(out.name + ".tmp")
        tmp.write_text(json.dumps(doc, indent=1, sort_keys=True), encoding="utf-8")
        tmp.replace(out)
        return out

    def import_json(self, path: str | Path) -> tuple[int, int]:
        return self.merge_from(path)

    # -- internals ------------------------------------------------------------------------------

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        # BEGIN IMMEDIATE takes the write lock up front, so two shards writing one file queue on
        # busy_timeout instead of failing halfway through a transaction.
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def _check_version(self) -> None:
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        if version > _SCHEMA_VERSION:
            raise ConfigError(f"{self.path} was written by a newer torchbisect (store schema "
                              f"{version}); upgrade torchbisect or use another --store")

    def _count(self) -> int:
        return self._db.execute("SELECT COUNT(*) FROM runs").fetchone()[0]

    def _insert(self, run: CellRun) -> int:
        values = _run_to_row(run)
        self._db.execute(
            f"INSERT OR IGNORE INTO runs ({', '.join(_RUN_FIELDS)}) "
            f"VALUES ({', '.join('?' * len(_RUN_FIELDS))})",
            [values[f] for f in _RUN_FIELDS])
        row = self._db.execute(
            """SELECT id FROM runs WHERE cell_id = ? AND wheel_sha256 = ? AND probe_version = ?
               AND gpu = ? AND driver = ? AND started = ?""",
            [values[f] for f in ("cell_id", "wheel_sha256", "probe_version", "gpu", "driver",
                                 "started")]).fetchone()
        return int(row[0])

    def _insert_bisection(self, result: BisectResult) -> int:
        key = (result.direction.value, result.case, result.cuda, result.python, result.finished)
        self._db.execute(
            """INSERT OR IGNORE INTO bisections
               (direction, case_name, cuda, python, finished, result_json)
               VALUES (?, ?, ?, ?, ?, ?)""",
            (*key, json.dumps(result.to_json(), sort_keys=True)))
        row = self._db.execute(
            """SELECT id FROM bisections WHERE direction = ? AND case_name = ? AND cuda = ?
               AND python = ? AND finished = ?""", key).fetchone()
        return int(row[0])


def _create(db: sqlite3.Connection) -> None:
    # executescript() would COMMIT the open transaction, so run the statements one by one.
    for statement in _SCHEMA.split(";"):
        if statement.strip():
            db.execute(statement)
    db.execute(f"PRAGMA user_version = {_SCHEMA_VERSION}")


# -- one run <-> one row / one JSON object --------------------------------------------------------

def run_to_json(run: CellRun) -> dict[str, Any]:
    """A run as plain JSON (the export format; also what a report can read)."""
    return {
        "cell": run.cell.to_json(),
        "status": run.status.value,
        "verdict": run.verdict.value if run.verdict else None,
        "probe": run.result.raw if run.result else None,
        "reason": run.reason,
        "wheel_sha256": run.wheel_sha256,
        "probe_version": run.probe_version,
        "gpu": run.gpu,
        "driver": run.driver,
        "backend": run.backend,
        "started": run.started,
        "seconds_install": run.seconds_install,
        "seconds_probe": run.seconds_probe,
        "log_excerpt": run.log_excerpt,
    }


def run_from_json(data: dict[str, Any], *, run_id: int | None = None) -> CellRun:
    probe = data.get("probe")
    return CellRun(
        cell=Cell.from_json(data["cell"]),
        status=RunStatus(data["status"]),
        result=ProbeResult.from_json(probe) if probe else None,
        reason=data.get("reason", ""),
        wheel_sha256=data.get("wheel_sha256", ""),
        probe_version=data.get("probe_version", ""),
        gpu=data.get("gpu", ""),
        driver=data.get("driver", ""),
        backend=data.get("backend", ""),
        started=data.get("started", ""),
        seconds_install=float(data.get("seconds_install", 0.0)),
        seconds_probe=float(data.get("seconds_probe", 0.0)),
        log_excerpt=data.get("log_excerpt", ""),
        run_id=run_id,
    )


def _run_to_row(run: CellRun) -> dict[str, Any]:
    data = run_to_json(run)
    cases = {c.name: c.verdict.value for c in run.result.cases} if run.result else {}
    return {
        **{k: data[k] for k in _RUN_FIELDS if k in data},
        "cell_id": run.cell.id,
        "cell_json": json.dumps(data["cell"], sort_keys=True),
        "cases_json": json.dumps(cases, sort_keys=True),
        "probe_json": json.dumps(data["probe"], sort_keys=True) if data["probe"] else None,
    }


def _run_from_row(row: sqlite3.Row) -> CellRun:
    data = dict(row)
    data["cell"] = json.loads(data["cell_json"])
    data["probe"] = json.loads(data["probe_json"]) if data["probe_json"] else None
    return run_from_json(data, run_id=int(data["id"]))


def _read_any(path: Path) -> tuple[list[CellRun], list[BisectResult]]:
    """Runs and bisections from a store file or a JSON export, told apart by content."""
    if not path.is_file():
        raise ConfigError(f"{path} does not exist: give a results .sqlite file or a JSON export")
    with path.open("rb") as fh:
        magic = fh.read(len(_SQLITE_MAGIC))
    if magic == _SQLITE_MAGIC:
        with Store(path) as other:
            return other.runs(), other.bisections()
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ConfigError(f"{path} is neither a SQLite store nor a JSON export ({err})") from None
    if not isinstance(doc, dict) or doc.get("schema") != EXPORT_SCHEMA:
        raise ConfigError(f"{path} is not a torchbisect export (expected \"schema\": "
                          f"{EXPORT_SCHEMA})")
    runs = [run_from_json(r) for r in doc.get("runs", [])]
    return runs, [BisectResult.from_json(b) for b in doc.get("bisections", [])]
