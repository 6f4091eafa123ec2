"""`torchbisect plan`: resolve matrix.yaml into cells, update the lock, print and export it."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..errors import ConfigError
from ..index.fetch import sha256_of
from ..model import Cell, CellRun, Channel, Plan
from ..plan.cost import describe, estimate
from ..plan.planning import plan_and_lock
from ..words import count
from . import options as flags

_COLUMNS = ("id", "channel", "version", "cuda", "source", "stored")


def configure(parser: argparse.ArgumentParser) -> None:
    flags.add_matrix_option(parser, "the matrix file")
    parser.add_argument("--json", type=flags.Output("file"), metavar="OUT",
                        help="also write the plan as JSON")
    flags.add_lock_options(parser, writes=True)
    flags.add_store_option(parser, "result store, to show which cells already have a result")
    parser.add_argument("--hash", action="store_true",
                        help="download wheels whose index publishes no sha256 and lock their hash")
    parser.add_argument("--python", metavar="X.Y",
                        help="Python for entries that name none (default: this interpreter's)")
    parser.add_argument("--platform", metavar="TAG",
                        help="wheel platform, e.g. linux_x86_64 or linux_aarch64 (default: this "
                             "machine's)")
    parser.add_argument("--previous-lock", type=Path, metavar="PATH",
                        help="an older lock (e.g. from the last CI run) whose pins are kept for "
                             "cells the current lock lacks; a missing file is ignored")
    parser.add_argument("--shards", type=int, metavar="N",
                        help="with --github-output: list shards 1/N … N/N for a job matrix")
    parser.add_argument("--github-output", type=flags.Output("append"), metavar="FILE",
                        help="append `shards=[…]` and `cells=N` to this file ($GITHUB_OUTPUT)")


def run(args: argparse.Namespace) -> int:
    if args.shards is not None and args.shards < 1:
        raise ConfigError(f"--shards must be 1 or more, got {args.shards}")
    previous = args.previous_lock if args.previous_lock and args.previous_lock.is_file() else None
    notes: list[str] = []
    locked = plan_and_lock(args.matrix, lock=args.lock, previous=previous, offline=args.offline,
                           driver=args.driver, python=args.python, platform=args.platform,
                           hasher=sha256_of if args.hash else None, note=notes.append)
    plan, new_lock, lock_path, changed = locked.plan, locked.lock, locked.path, locked.changed
    stored = _stored(args.store, plan)
    _print_table(plan, stored)
    for m in plan.missing:
        print(f"missing {m.channel.value} {m.what}: {m.reason}")
    for note in notes:
        print(f"note: {note}")
    print(f"{count(len(plan.cells), 'cell')}, {count(len(plan.missing), 'requested build')} "
          "missing; "
          f"lock {'written to' if changed else 'unchanged:'} {lock_path}")
    print(describe(estimate(plan.cells, stored=[c for c, s in stored.items() if s == "yes"],
                            lock=new_lock, runs=_stored_runs(args.store), gpus=_gpu_count())))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(plan.to_json(), indent=2) + "\n", encoding="utf-8")
    if args.github_output:
        # never more shards than cells: a GPU runner with nothing to probe is a wasted job
        total = min(args.shards or 1, max(len(plan.cells), 1))
        shards = [f"{i}/{total}" for i in range(1, total + 1)]
        with args.github_output.open("a", encoding="utf-8") as out:
            out.write(f"shards={json.dumps(shards)}\ncells={len(plan.cells)}\n")
    return 0


def _stored(store: Path, plan: Plan) -> dict[str, str]:
    """"yes"/"no" per cell id."""
    if not store.is_file():
        return {c.id: "no" for c in plan.cells}
    from ..store.db import Store

    with Store(store) as opened:
        return {c.id: "yes" if opened.has_result(c.id) else "no" for c in plan.cells}


def _stored_runs(store: Path) -> list[CellRun]:
    """The runs whose timings estimate the time; none without a store."""
    if not store.is_file():
        return []
    from ..store.db import Store

    with Store(store) as opened:
        return opened.runs()


def _gpu_count() -> int:
    from ..gpus import list_gpus

    return len(list_gpus()) or 1


def _rows(plan: Plan, stored: dict[str, str]) -> list[tuple[str, ...]]:
    return [(c.id, c.channel.value, c.version or "-", c.cuda or "-", source_of(c), stored[c.id])
            for c in plan.cells]


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
            table.add_column(name, no_wrap=name != "source", overflow="fold",
                             min_width=40 if name == "source" else None)
        for row in rows:
            table.add_row(*row)
        Console().print(table)
        return
    widths = [max(len(r[i]) for r in [_COLUMNS, *rows]) for i in range(len(_COLUMNS))]
    for row in [_COLUMNS, *rows]:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
