"""What `torchbisect plan` prints for one machine or one runner kind: the plan's table (which
cells, from where, whether a verdict is stored), what is missing, the notes and the lock."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ..index.fetch import sha256_of
from ..model import Cell, CellRun, Channel, Plan, RunStatus
from ..plan.planning import Locked, plan_and_lock
from ..utils.words import count

if TYPE_CHECKING:
    from ..config.runners import Kind
    from .plan_options import PlanOptions

_COLUMNS = ("id", "channel", "version", "cuda", "source", "stored")


def plan_one(
    options: PlanOptions,
    *,
    lock: Path | None,
    previous: Path | None,
    driver: str | None,
    platform: str | None,
    host_driver: bool = True,
    kind: Kind | None = None,
) -> Locked:
    """Plan and lock for one machine (or kind), and print its table, what is missing, the notes
    and where the lock went; with `kind`, only its GPU's verdicts count as stored."""
    notes: list[str] = []
    locked = plan_and_lock(
        options.planned,
        matrix=options.matrix,
        lock=lock,
        previous=previous,
        offline=options.offline,
        driver=driver,
        python=options.python,
        platform=platform,
        hasher=sha256_of if options.hash else None,
        host_driver=host_driver,
        note=notes.append,
    )
    plan = locked.plan
    _print_table(plan, stored_cells(options.store, plan, kind=kind))
    for m in plan.missing:
        print(f"missing {m.channel.value} {m.what}: {m.reason}")
    for note in notes:
        print(f"note: {note}")
    print(
        f"{count(len(plan.cells), 'cell')}, {count(len(plan.missing), 'requested build')} "
        "missing; "
        + (
            f"lock {'written to' if locked.changed else 'unchanged:'} {locked.path}"
            if locked.lock.builds
            else "no wheel to pin, so no lock is written"
        )
    )
    return locked


def stored_cells(store: Path, plan: Plan, *, kind: Kind | None = None) -> dict[str, str]:
    """ "yes"/"no" per cell run name (`Cell.run_name`: a build's cell once per probe); with
    `kind`, yes only for a verdict measured on its GPU model: one kind's verdict says nothing
    about another's, nor one probe's about another's."""
    if not store.is_file():
        return {c.run_name: "no" for c in plan.cells}
    from ..store.db import Store

    with Store(store) as opened:
        measured = {
            r.cell.key
            for r in opened.iter_runs()
            if r.status is RunStatus.OK and (kind is None or kind.matches(r.gpu))
        }
    return {c.run_name: "yes" if c.key in measured else "no" for c in plan.cells}


def stored_runs(store: Path, kind: Kind | None = None) -> list[CellRun]:
    """The runs whose timings estimate the time (on `kind`'s GPU only, when given); none without
    a store."""
    if not store.is_file():
        return []
    from ..store.db import Store

    with Store(store) as opened:
        return [r for r in opened.runs() if kind is None or kind.matches(r.gpu)]


def _rows(plan: Plan, stored: dict[str, str]) -> list[tuple[str, ...]]:
    return [
        (
            c.run_name,
            c.channel.value,
            c.version or "-",
            c.cuda or "-",
            source_of(c),
            stored[c.run_name],
        )
        for c in plan.cells
    ]


def source_of(cell: Cell) -> str:
    """Where a cell's torch comes from, in the words a user would look for."""
    if cell.url:
        return cell.url
    if cell.channel is Channel.PREINSTALLED and cell.base_image:
        return f"the torch in image {cell.base_image}"
    if cell.interpreter:
        return f"the torch of {cell.interpreter}"
    return "the torch of the interpreter running torchbisect"


def _print_table(plan: Plan, stored: dict[str, str]) -> None:
    rows = _rows(plan, stored)
    if sys.stdout.isatty():
        from rich.console import Console
        from rich.table import Table

        table = Table()
        for name in _COLUMNS:  # ids stay whole; long URLs wrap
            table.add_column(
                name,
                no_wrap=name != "source",
                overflow="fold",
                min_width=40 if name == "source" else None,
            )
        for row in rows:
            table.add_row(*row)
        Console().print(table)
        return
    widths = [max(len(r[i]) for r in [_COLUMNS, *rows]) for i in range(len(_COLUMNS))]
    for row in [_COLUMNS, *rows]:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
