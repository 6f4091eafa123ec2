"""Is this file a result store we may open?  Asked read-only, before anything writes to it.

A damaged store (truncated, random bytes, a foreign database, a `runs` table torchbisect did not
write, a row that does not decode) is one sentence that names the file and what to do, with exit
status 2 — and the file is left byte for byte as it was: the check opens it read-only, and only a
file that passes is opened for writing (which creates missing tables).  A hot `-journal` (a writer
killed mid-write) is not damage: SQLite rolls it back on a read-write open, back to the last
committed state, and the check then runs read-only as before (`_roll_back`).
Its schema is checked entry by entry before any row is read (`_structure`): a store torchbisect
wrote holds tables and indexes only, so a view, a trigger, a virtual table or a generated column
(SQL that would run when the store is read or written) is refused, whoever the store came from.
A disk that fails under a sound store (full, over quota, an I/O error) is not damage:
`not_damage` tells them apart, for this check and for every write (`Store`), exit status 3.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from ..errors import ConfigError, InfraError
from ..utils import files
from .columns import RUN_FIELDS

SQLITE_MAGIC = b"SQLite format 3\x00"
_TABLES = {
    "runs": {"id", *RUN_FIELDS},
    "bisections": {"id", "direction", "case_name", "cuda", "python", "finished", "result_json"},
}
_OURS = {*_TABLES, "sqlite_sequence"}
# sqlite3 names SQLite's result codes from Python 3.11 on; the codes themselves never change
_FULL = getattr(sqlite3, "SQLITE_FULL", 13)
# a read-only connection met a hot journal: SQLite's SQLITE_READONLY_ROLLBACK
_READONLY_ROLLBACK = getattr(sqlite3, "SQLITE_READONLY_ROLLBACK", 776)
_DISK_CODES = frozenset(
    {_FULL, getattr(sqlite3, "SQLITE_IOERR", 10), getattr(sqlite3, "SQLITE_CANTOPEN", 14)}
)
# another program (not a torchbisect, whose runs take the store's lock file first) holds it
_BUSY_CODES = frozenset({getattr(sqlite3, "SQLITE_BUSY", 5), getattr(sqlite3, "SQLITE_LOCKED", 6)})
# What a reader's bounds (store/foreign.py) stop, in words.
_READER_BOUNDS = {
    "SQLITE_TOOBIG": "a row is larger than any run or bisection is",
    "SQLITE_INTERRUPT": "checking it ran past the time a read may take",
}
# In SQL, so that checking a store of thousands of runs costs milliseconds.
_CHANNELS = "('stable', 'test', 'nightly', 'dev', 'preinstalled')"
_BAD_ROWS = {
    "runs": f"""SELECT id FROM runs WHERE NOT json_valid(cell_json)
                OR (probe_json IS NOT NULL AND NOT json_valid(probe_json))
                OR json_type(cell_json, '$.id') IS NOT 'text'
                OR json_extract(cell_json, '$.channel') NOT IN {_CHANNELS}
                OR (json_type(cell_json, '$.date') IS NOT NULL
                    AND json_type(cell_json, '$.date') IS NOT 'null'
                    AND date(json_extract(cell_json, '$.date'))
                        IS NOT json_extract(cell_json, '$.date'))
                OR json_type(cell_json, '$.timeout') NOT IN ('integer', 'real')
                OR json_type(cell_json, '$.trials') NOT IN ('integer', 'null')
                OR json_type(cell_json, '$.version') IS NOT 'text'
                OR json_type(cell_json, '$.cuda') IS NOT 'text'
                OR json_type(cell_json, '$.python') IS NOT 'text'
                OR status NOT IN ('ok', 'infra_failure') LIMIT 1""",
    "bisections": "SELECT id FROM bisections WHERE NOT json_valid(result_json) LIMIT 1",
}


def inspect(path: Path, schema_version: int) -> None:
    """Raise ConfigError unless `path` is missing, empty, or a store this version can use.

    A link to a store is that store (its lock is the real file's: utils/runlock.py), but a link
    to nothing would have SQLite create a file, and its folders, wherever the link points."""
    if path.is_symlink() and not path.exists():
        raise ConfigError(
            f"the result store {path} is a symbolic link to {os.readlink(path)}, which does not "
            "exist; torchbisect does not create a store through a link: give the path of a "
            "file, or of the store the link should name"
        )
    try:
        with path.open("rb") as fh:
            head = fh.read(len(SQLITE_MAGIC))
    except FileNotFoundError:
        return
    except OSError as err:
        raise ConfigError(
            f"cannot read the result store {path} ({err.strerror}); check its "
            "permissions or pass --store with another file"
        ) from None
    if not head:
        return  # an empty file: SQLite makes it a new database
    if head != SQLITE_MAGIC:
        raise ConfigError(damaged(path, "it is not an SQLite database"))
    seen = _unchanged(path)
    if seen is not None and seen in _PASSED:
        return  # checked already in this process, and not written since
    try:
        _inspect_read_only(path, schema_version)
    except _HotJournal:
        _roll_back(path)
        _inspect_read_only(path, schema_version)
    if seen is not None and seen == _unchanged(path):
        _PASSED.add(seen)


# Stores this process found sound, by what identifies the file's state (`_unchanged`): the
# command's gate checks its --store before anything else (cli._gated), and opening it again
# then reads it no more.
_PASSED: set[tuple[str, int, int, int, int]] = set()


def _unchanged(path: Path) -> tuple[str, int, int, int, int] | None:
    """The file's state (its real path, device, inode, size, mtime); None while a -journal or
    -wal lies beside it (a writer's, or one to roll back: then it is read each time)."""
    if any(os.path.lexists(f"{path}{side}") for side in ("-journal", "-wal")):
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (os.path.realpath(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


class _HotJournal(Exception):
    """The read-only check met a `-journal` that only a writer may roll back."""


def _inspect_read_only(path: Path, schema_version: int) -> None:
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=30)
    except sqlite3.Error as err:
        raise not_damage(path, err) or ConfigError(damaged(path, str(err))) from None
    try:
        inspect_open(db, path, schema_version)
    finally:
        db.close()


def _roll_back(path: Path) -> None:
    """Let SQLite roll back the hot journal a writer killed mid-write left (`kill -9`, a power
    cut): any read-write connection does so on its first read, restoring the last committed
    state byte for byte.  That is SQLite's own recovery, not damage, and nothing else is
    written."""
    try:
        db = sqlite3.connect(path, timeout=30)
        try:
            db.execute("PRAGMA schema_version").fetchone()
        finally:
            db.close()
    except sqlite3.Error as err:
        raise not_damage(path, err) or ConfigError(damaged(path, str(err))) from None


def inspect_open(db: sqlite3.Connection, path: Path, schema_version: int) -> None:
    """`inspect` of an open connection to the store (or a copy of it) at `path`."""
    try:
        _check(db, path, schema_version)
    except sqlite3.DatabaseError as err:  # "file is not a database", "malformed", …
        if getattr(err, "sqlite_errorcode", None) == _READONLY_ROLLBACK:
            raise _HotJournal from None
        why = _READER_BOUNDS.get(getattr(err, "sqlite_errorname", ""), str(err))
        raise not_damage(path, err) or ConfigError(damaged(path, why)) from None


def not_damage(path: Path, err: sqlite3.Error) -> InfraError | None:
    """The error, when the disk under the store failed rather than the store: a full disk or
    quota (`files.DiskFull`, exit 3), or an I/O error or a file SQLite cannot open beside it
    (exit 3); or when another program holds the store locked (exit 3); None when it may be
    damage.  A full disk or a lock is never called damage."""
    code = getattr(err, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else None
    text = str(err)
    if primary in _BUSY_CODES or text.startswith(
        ("database is locked", "database table is locked")
    ):
        return InfraError(
            f"the result store {path} is in use by another program, which holds it locked "
            f"({text}); it was left as it was: run again once that program has let it go"
        )
    if primary not in _DISK_CODES and "disk is full" not in text and "disk I/O" not in text:
        return None
    folder = path.parent if str(path.parent) else Path(".")
    if primary == _FULL or "disk is full" in text or files.nearly_full(folder):
        return files.disk_full(folder, intact=f"the result store {path.name}")
    return InfraError(
        f"the result store {path} could not be used ({text}): the disk or the "
        f"folder {folder} failed, not the store, which is left as it was; check "
        "them (space, permissions, the device) and run again"
    )


def damaged(path: Path, why: str) -> str:
    return (
        f"the result store {path} is damaged or not a torchbisect store ({why}); it was "
        "left untouched: restore it from a backup (or a shard's JSON export with "
        "`torchbisect merge`), or move it away to start a new one"
    )


def _check(db: sqlite3.Connection, path: Path, schema_version: int) -> None:
    version = db.execute("PRAGMA user_version").fetchone()[0]
    if version > schema_version:
        raise ConfigError(
            f"{path} was written by a newer torchbisect (store schema "
            f"{version}); upgrade torchbisect or use another --store"
        )
    if version < 0:  # no torchbisect writes one; a writer would set it to ours over it
        raise ConfigError(damaged(path, f"its schema number is {version}, which no store has"))
    problems = [row[0] for row in db.execute("PRAGMA quick_check(3)")]
    if problems != ["ok"]:
        raise ConfigError(damaged(path, "; ".join(problems)[:200]))
    tables = _structure(db, path)
    if version == schema_version and "runs" not in tables:
        raise ConfigError(damaged(path, "it has no `runs` table"))
    foreign = sorted(tables - _OURS)
    if foreign and not tables & set(_TABLES):
        raise ConfigError(damaged(path, f"it holds other tables: {', '.join(foreign[:5])}"))
    for table, columns in _TABLES.items():
        if table in tables:
            have = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
            if not columns <= have:
                missing = ", ".join(sorted(columns - have)[:5])
                raise ConfigError(damaged(path, f"its `{table}` table lacks {missing}"))
            bad = db.execute(_BAD_ROWS[table]).fetchone()
            if bad:  # found now, before any write: later a reader would stop halfway
                raise ConfigError(damaged(path, f"row {bad[0]} of `{table}` does not decode"))


def _structure(db: sqlite3.Connection, path: Path) -> set[str]:
    """The store's table names, after refusing any schema entry that is code rather than data:
    views and triggers (torchbisect creates neither), virtual tables, generated columns, and a
    table of ours whose row id is not an integer (damage advice names rows by it)."""
    entries = db.execute("SELECT type, name, sql FROM sqlite_master").fetchall()
    for kind, name, sql in entries:
        if kind not in ("table", "index"):
            raise ConfigError(
                damaged(path, f"it holds a {kind} ({_shown(name)}), which torchbisect never writes")
            )
        if kind == "table" and not str(sql).lstrip().upper().startswith("CREATE TABLE"):
            raise ConfigError(damaged(path, f"its table {_shown(name)} is a virtual table"))
    tables = {name for kind, name, _ in entries if kind == "table"}
    for table in tables & {*_TABLES, "attendance"}:
        columns = db.execute(f"PRAGMA table_xinfo({table})").fetchall()
        generated = [c[1] for c in columns if c[6] != 0]
        if generated:
            raise ConfigError(
                damaged(
                    path, f"its `{table}` table has a generated column ({_shown(generated[0])})"
                )
            )
        key = [c for c in columns if c[1] == "id"]
        if key and (key[0][5] != 1 or str(key[0][2]).upper() != "INTEGER"):
            raise ConfigError(
                damaged(path, f"the `id` of its `{table}` table is not an INTEGER PRIMARY KEY")
            )
    return tables


def _shown(name: object) -> str:
    """A name from a foreign schema, shown quoted and cut: it is data, never a command."""
    return repr(str(name)[:60])
