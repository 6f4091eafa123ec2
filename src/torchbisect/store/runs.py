"""One stored run as a row of the `runs` table and as a JSON object (exports, reports).

Reading is where a store written by an older version, or edited by hand, meets today's code: a
probe document is checked again (`probe.document.check`) and one that fails becomes an
infrastructure failure with the reason, so nothing stored can stop a page from rendering; a row
that does not decode at all is `damaged_row`'s one sentence.

A run's texts are bounded when stored and again when read (`_capped`): a log excerpt keeps its
last `EXCERPT_CHARS`, a reason its first `REASON_CHARS`, so a store from elsewhere holding a
120 MB excerpt draws a page of ordinary size.
"""

from __future__ import annotations

import json
import shlex
import sqlite3
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..masking import mask
from ..model import Attendance, Cell, CellRun, ProbeResult, RunStatus
from ..outcome import BisectResult
from ..probe import document
from . import export
from .columns import RUN_FIELDS

EXCERPT_CHARS = 64 * 1024  # 40 log lines (execute.excerpt) of ordinary length, with room
REASON_CHARS = 4 * 1024


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
    probe, status = data.get("probe"), RunStatus(data["status"])
    reason = _capped(str(data.get("reason", "")), REASON_CHARS, keep="start")
    try:  # a store written before documents were checked may hold anything
        result = ProbeResult.from_json(document.check(probe)) if probe else None
    except document.Rejected as err:
        result, status = None, RunStatus.INFRA_FAILURE
        reason = f"stored probe document rejected: {err}"
    return CellRun(
        cell=_checked(Cell.from_json(data["cell"])),
        status=status,
        result=result,
        reason=reason,
        wheel_sha256=str(data.get("wheel_sha256", "")),
        probe_version=str(data.get("probe_version", "")),
        gpu=str(data.get("gpu", "")),
        driver=str(data.get("driver", "")),
        backend=str(data.get("backend", "")),
        started=str(data.get("started", "")),
        seconds_install=float(data.get("seconds_install", 0.0)),
        seconds_probe=float(data.get("seconds_probe", 0.0)),
        log_excerpt=_capped(str(data.get("log_excerpt", "")), EXCERPT_CHARS, keep="end"),
        run_id=run_id,
    )


def _capped(text: str, limit: int, *, keep: str) -> str:
    """`text` cut to `limit` characters, keeping its end (a log) or its start (a reason)."""
    if len(text) <= limit:
        return text
    note = f"[torchbisect: {len(text) - limit:,} characters cut]"
    return f"{note}\n{text[-limit:]}" if keep == "end" else f"{text[:limit]} {note}"


def _checked(cell: Cell) -> Cell:
    """The cell of a stored run, as the report reads it; ValueError for one it cannot draw."""
    texts = (
        cell.id,
        cell.version,
        cell.cuda,
        cell.python,
        cell.probe,
        *cell.cases,
        *(v for pair in cell.env for v in pair),
    )
    if not all(isinstance(t, str) for t in texts):
        raise ValueError("a text field of the cell is not text")
    if cell.date is not None:
        date.fromisoformat(cell.date)  # ValueError names what is wrong with it
    if type(cell.timeout) not in (int, float) or not 0 < cell.timeout < float("inf"):
        raise ValueError(f"timeout {cell.timeout!r} is not a positive number")
    if cell.trials is not None and type(cell.trials) is not int:
        raise ValueError(f"trials {cell.trials!r} is not a whole number")
    return cell


def run_to_row(run: CellRun) -> dict[str, Any]:
    """The row a run is stored as; its texts masked (`masking`), as every page drawn later is."""
    data = run_to_json(run)
    data.update(
        reason=mask(_capped(data["reason"], REASON_CHARS, keep="start")),
        log_excerpt=mask(_capped(data["log_excerpt"], EXCERPT_CHARS, keep="end")),
    )
    cases = {c.name: c.verdict.value for c in run.result.cases} if run.result else {}
    return {
        **{k: data[k] for k in RUN_FIELDS if k in data},
        "cell_id": run.cell.id,
        "cell_json": json.dumps(data["cell"], sort_keys=True),
        "cases_json": json.dumps(cases, sort_keys=True),
        "probe_json": json.dumps(data["probe"], sort_keys=True) if data["probe"] else None,
    }


def run_from_row(row: sqlite3.Row) -> CellRun:
    data = dict(row)
    data["cell"] = json.loads(data["cell_json"])
    text = data["probe_json"] or ""
    try:  # stored before the limits (size, depth): a document past them is not even parsed
        data["probe"] = document.parse(text) if text else None
    except document.Rejected as err:
        return run_from_json(
            {
                **data,
                "probe": None,
                "status": RunStatus.INFRA_FAILURE.value,
                "reason": f"stored probe document rejected: {err}",
            },
            run_id=int(data["id"]),
        )
    return run_from_json(data, run_id=int(data["id"]))


def damaged_row(path: Path, table: str, row_id: object, err: Exception) -> str:
    """The sentence for a row that does not decode.  Its advice pastes nothing from the store into
    a shell: the path is quoted, and a command is given only for a whole-number row id."""
    why = f"{type(err).__name__}: {str(err)[:120]!r}"
    if type(row_id) is not int:  # check.py refuses such a key; a row id is data here too
        return (
            f"the result store {path} has a damaged row in `{table}` ({why}); it was left "
            "untouched: restore it from a backup"
        )
    return (
        f"the result store {path} has a damaged row (`{table}` id {row_id}: {why}); it was "
        f"left untouched: restore it from a backup, or delete that row with `sqlite3 "
        f"{shlex.quote(str(path))} 'DELETE FROM {table} WHERE id = {row_id}'`"
    )


def read_export(path: Path, schema: int) -> Iterator[CellRun | BisectResult | Attendance]:
    """The runs and bisections of a JSON export (`Store.export_json`), one at a time (`export`
    bounds memory, entry size and depth); its schema is checked once it has been read, so the
    caller's transaction is rolled back by the ConfigError of a file that is no export."""
    found = None
    for kind, entry in export.entries(path):
        if kind == "schema":
            found = entry
            continue
        try:
            if kind == "runs":
                yield run_from_json(entry)
            elif kind == "attendance":
                yield Attendance.from_json(entry)
            else:
                yield BisectResult.from_json(document.check_bisection(entry))
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            raise ConfigError(
                f"the export {path} has a damaged entry ({type(err).__name__}: "
                f"{str(err)[:120]}); export the shard again"
            ) from None
    if found != schema:
        raise ConfigError(f'{path} is not a torchbisect export (expected "schema": {schema})')
