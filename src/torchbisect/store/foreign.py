"""A store read as an input (`merge`'s shards, the previous store) is data, never code.

It is never opened where it lies: the file and its `-wal` or `-journal` (never its `-shm`) are
copied into a private folder first, and SQLite recovers every transaction the `-wal` committed
into that copy, or rolls back there the one a hot `-journal` says was under way.
So a store left by `kill -9` (its runs still in the `-wal`) reads whole, nothing is ever created
beside an input, and a writer still at work cannot change it halfway through the read.  A store
whose header says its writes went to a `-wal` that did not come with it is refused in one
sentence, unless it is provably whole: a store this torchbisect wrote carries its application id
and is in rollback mode after every committed write, so one of its own still in WAL mode was
copied mid-write, and any other's runs since its last checkpoint may be in the `-wal` left
behind — whether it holds runs or not.

The copy is opened with SQLite's defensive settings (`_defend`): on Python 3.12+ through
`Connection.setconfig` (defensive mode, trusted schema off, triggers and views disabled), on
3.11 through `PRAGMA trusted_schema = OFF` and `query_only` — and on both, views, triggers,
virtual tables and generated columns are refused by the schema check (`check._structure`) before
any row is read, so none of them can run.  A string or row over `MAX_ROW_BYTES` (the bound of an
export entry) is refused by SQLite itself rather than loaded; text that is not UTF-8 reads with
replacement characters; a read that runs past `MAX_SECONDS` is stopped.
"""

from __future__ import annotations

import shutil
import sqlite3
import sys
import tempfile
import time
from contextlib import suppress
from pathlib import Path

from ..errors import ConfigError
from ..utils import files
from . import check
from .export import MAX_ENTRY_BYTES

APPLICATION_ID = 0x74627374  # store/db.py writes it: "tbst"

MAX_ROW_BYTES = MAX_ENTRY_BYTES
MAX_SECONDS = 15 * 60  # a 200 MB store merges in well under a minute
_HEADER_WAL = 2  # bytes 18-19 of the header: 2 when the database is in WAL mode


class Copy:
    """A private, defended, read-only copy of the store at `path` (`db`, then `close()`)."""

    def __init__(self, path: Path, *, schema_version: int) -> None:
        self.path = path
        self._folder = tempfile.TemporaryDirectory(prefix="torchbisect-input-")
        try:
            copy = _copy(path, Path(self._folder.name))
            self.db = _connect(copy, path)
            check.inspect_open(self.db, path, schema_version)
            self._refuse_lost_wal()
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        with suppress(AttributeError):
            self.db.close()
        self._folder.cleanup()

    def _refuse_lost_wal(self) -> None:
        has_runs = self.db.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'runs'"
        ).fetchone()
        with self.path.open("rb") as fh:
            header = fh.read(72)
        wal = Path(f"{self.path}-wal")
        if len(header) < 72 or header[18] != _HEADER_WAL or wal.exists():
            return
        if has_runs and int.from_bytes(header[68:72], "big") == APPLICATION_ID:
            # this torchbisect leaves a store at rest in rollback mode after every committed
            # write: in WAL mode, it was copied while a write was under way, without its -wal
            raise ConfigError(
                f"{self.path} was copied without its {wal.name} while a run was being written "
                "to it, so runs it committed may be missing and nothing was merged; put "
                f"{wal.name} beside it, or upload the single-file copy that `torchbisect merge "
                "COPY STORE` makes"
            )
        if has_runs:
            # another program's store (or one whose id was cleared) in WAL mode: its runs since
            # the last checkpoint may be in the -wal, so whether it is whole cannot be told
            raise ConfigError(
                f"{self.path} is in WAL mode without its {wal.name} and was not written by "
                "this torchbisect (it lacks its application id), so runs committed to that "
                "-wal may be missing and nothing was merged; put "
                f"{wal.name} beside it, or make it one file where it was written (sqlite3 "
                f"{self.path.name} 'PRAGMA journal_mode=DELETE')"
            )
        raise ConfigError(
            f"{self.path} holds no tables: its runs were written to {wal.name}, which is "
            "not beside it (a copy of a live store, or of one whose run was killed); put "
            f"{wal.name} beside it, or upload the single-file copy that `torchbisect merge "
            "COPY STORE` makes"
        )


def _copy(path: Path, folder: Path) -> Path:
    copy = folder / "input.sqlite"
    try:
        shutil.copyfile(path, copy)
        for side in ("-wal", "-journal"):  # -shm is not copied: SQLite rebuilds it from the -wal
            if Path(f"{path}{side}").is_file():  # a hot -journal is rolled back in the copy
                shutil.copyfile(f"{path}{side}", folder / f"input.sqlite{side}")
    except OSError as err:
        if files.is_full(err):
            raise files.disk_full(folder, intact=f"the store {path.name}") from None
        raise ConfigError(
            f"{path}: cannot be read ({err.strerror}), so nothing was merged"
        ) from None
    return copy


def _connect(copy: Path, shown: Path) -> sqlite3.Connection:
    db = sqlite3.connect(copy, isolation_level=None)
    try:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the -wal's committed runs, into the copy
        _defend(db)
    except sqlite3.DatabaseError as err:
        db.close()
        raise check.not_damage(shown, err) or ConfigError(check.damaged(shown, str(err))) from None
    db.row_factory = sqlite3.Row
    db.text_factory = lenient_text
    return db


def lenient_text(raw: bytes) -> str:
    """A stored text as str: bytes that are not UTF-8 become U+FFFD, never an error."""
    return raw.decode("utf-8", errors="replace")


def _defend(db: sqlite3.Connection) -> None:
    """What a foreign schema could make SQLite run, switched off; and the read bounded."""
    # The version, not hasattr(), so that mypy (python_version 3.10) knows what each block has.
    if sys.version_info >= (3, 12):
        db.setconfig(sqlite3.SQLITE_DBCONFIG_DEFENSIVE, True)
        db.setconfig(sqlite3.SQLITE_DBCONFIG_TRUSTED_SCHEMA, False)
        db.setconfig(sqlite3.SQLITE_DBCONFIG_ENABLE_TRIGGER, False)
        db.setconfig(sqlite3.SQLITE_DBCONFIG_ENABLE_VIEW, False)
    db.execute("PRAGMA trusted_schema = OFF")  # on 3.11 the only switch there is
    db.execute("PRAGMA query_only = ON")
    db.execute("PRAGMA temp_store = MEMORY")  # no temporary files; a read by row id needs none
    if sys.version_info >= (3, 11):  # setlimit; on 3.10 the time bound below still holds
        db.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_ROW_BYTES)
    deadline = time.monotonic() + MAX_SECONDS
    db.set_progress_handler(lambda: time.monotonic() > deadline, 100_000)


def too_big(path: Path, table: str, row_id: object) -> ConfigError:
    return ConfigError(
        f"{path}: row {row_id} of `{table}` is larger than "
        f"{MAX_ROW_BYTES // 1048576} MiB, which no run or bisection is; nothing "
        "was merged: leave this store out, or delete that row"
    )


def stopped(path: Path) -> ConfigError:
    return ConfigError(
        f"{path}: reading it ran past {MAX_SECONDS // 60} minutes and was "
        "stopped; nothing was merged: leave this store out"
    )
