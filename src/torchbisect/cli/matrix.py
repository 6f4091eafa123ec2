"""`torchbisect matrix`: plan → install and probe each cell on the GPUs → store → report.

The steps, each a small function: resolve the plan (and keep the lock up to date), pick this
shard's cells, choose the backend, skip the cells whose verdict is already stored, run the rest
(`schedule.run_cells`), print the summary table, render the report.  Without a GPU only this
interpreter's torch is probed, unless `--allow-no-gpu`.

Exit status (`--fail-on`, see cli/options.py): by default 3 when some cell ended as an
infrastructure failure (it is retried on the next run), else 0; 1 with `--fail-on affected` when a
cell is affected.  2 for configuration errors, 5 when the backend cannot run.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import signal
import sys
import threading
from datetime import datetime, timezone
from pathlib import Path

from rich.console import Console

from ..backends.base import host_python
from ..model import Cell, CellRun, Channel, Plan, RunStatus
from ..words import count
from . import options as flags
from .plan import add_driver_option, lock_needed_offline

DEFAULT_STORE = Path("reports/results.sqlite")
PREINSTALLED_ID = "preinstalled"


def configure(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--matrix", type=Path, default=Path("matrix.yaml"),
        help="matrix file (default: %(default)s)")
    add("--lock", type=Path, metavar="PATH",
        help="lock file (default: <matrix>.lock.json next to the matrix file)")
    add("--offline", action="store_true", help="plan from the lock alone; no index is contacted")
    add_driver_option(parser)
    flags.add_backend_option(parser, "where cells are installed (default: docker when an "
                                     "engine answers, else venv)")
    add("--overlay", action="store_true",
        help="install only the torch wheel (--no-deps) over an environment that has the CUDA "
             "libraries, for every cell")
    add("--store", type=Path, default=DEFAULT_STORE, help="result store (default: %(default)s)")
    add("--shard", metavar="I/N", help="run only shard I of N (cells split by a hash of their id)")
    add("--cells", metavar="GLOB,…", help="only the cells whose id matches a pattern "
                                         "(e.g. 'stable-*,nightly-202610*')")
    add("--skip", metavar="GLOB,…", help="leave out the cells whose id matches a pattern")
    add("--force", action="store_true", help="probe cells even when a verdict is stored")
    add("--allow-no-gpu", action="store_true",
        help="without a GPU, still install and probe every cell (the probe reports `skipped`)")
    flags.add_interpreter_option(parser, "interpreter that has the CUDA libraries: overlays "
                                         "install over it and the preinstalled cell tests its "
                                         "torch (default: the one running torchbisect)")
    add("--workdir", type=Path, metavar="DIR",
        help="venvs, downloads and probe output (default: .torchbisect/)")
    add("--out", type=Path, default=Path("reports"),
        help="report folder; cell logs go to OUT/logs/ (default: %(default)s/)")
    add("--no-report", action="store_true", help="store results but render no report")
    add("--jobs", type=int, metavar="N",
        help="cells installed ahead of the probes (default: two per GPU)")
    flags.add_fail_on_option(parser)
    flags.add_json_option(parser)


def run(args: argparse.Namespace) -> int:
    _sigterm_stops_like_ctrl_c()
    console = Console(stderr=args.json == "-")
    from ..gpus import list_gpus

    gpus = list_gpus()
    backend_name = args.backend
    why_nothing = ""
    if not gpus and not args.allow_no_gpu:
        # Nothing but the interpreter's torch will run: no index to ask, no wheel to fetch
        # (unless --cells/--shard name cells, which only the full plan can check).
        picked = args.cells or args.shard or args.skip
        plan = resolve_plan(args, console, preinstalled_only=not picked)
        cells = _pick(plan.cells, args) if picked else plan.cells
        cells, backend_name = _no_gpu_cells(cells, console, python=_python(args),
                                            backend=backend_name)
        if not cells:
            why_nothing = ("No GPU is visible on the machine that ran `nox -s matrix`, and its "
                           "interpreter has no torch, so nothing was probed.")
    else:
        cells = _pick(resolve_plan(args, console).cells, args)
    slots = list(gpus) or [None]
    from ..store import Store

    with Store(args.store) as store:
        new, reused = _probe(cells, backend_name, store, slots, args, console) if cells else (
            [], [])
        _pin_hashes(new, _lock_path(args))
        _summary(new, reused, console, logs=args.out / "logs")
        if not args.no_report:
            _render(store, args, console, empty_reason=why_nothing)
    flags.write_json(args.json, [*new, *reused])
    failed = [r for r in new if r.status is RunStatus.INFRA_FAILURE]
    if failed:
        console.print(f"{count(len(failed), 'cell')} failed for infrastructure reasons (see the "
                      f"note column and {args.out / 'logs'}/); they are retried on the next run")
    return flags.exit_status([*new, *reused], args.fail_on)


def resolve_plan(args: argparse.Namespace, console: Console, *,
                 preinstalled_only: bool = False) -> Plan:
    from ..config import load_matrix
    from ..cost import with_sizes
    from ..gpus import driver_version
    from ..index import host_platform
    from ..lock import Lock
    from ..resolve import build_plan, preinstalled_plan

    config = load_matrix(args.matrix)
    if preinstalled_only:
        return preinstalled_plan(
            config, python=f"{sys.version_info.major}.{sys.version_info.minor}",
            platform=host_platform(), today=datetime.now(timezone.utc).date())
    lock_path = _lock_path(args)
    lock = Lock.load(lock_path)
    with lock_needed_offline(args.offline, lock_path):
        plan = build_plan(
            config, lock=lock,
            python=f"{sys.version_info.major}.{sys.version_info.minor}", platform=host_platform(),
            driver=args.driver or driver_version(), today=datetime.now(timezone.utc).date(),
            offline=args.offline,
            note=lambda text: console.print(f"note: {text}", highlight=False))
    for missing in plan.missing:
        console.print(f"missing {missing.channel.value} {missing.what}: {missing.reason}",
                      highlight=False)
    with_sizes(Lock.from_plan(plan), known=lock, offline=args.offline).save(lock_path)
    return plan


def _lock_path(args: argparse.Namespace) -> Path:
    from ..lock import Lock

    return args.lock or Lock.default_path(args.matrix)


def _pick(cells: tuple[Cell, ...], args: argparse.Namespace) -> tuple[Cell, ...]:
    """--cells and --skip, then --shard, then --overlay."""
    from ..schedule import shard

    cells = flags.by_patterns(cells, keep=args.cells, skip=args.skip, matrix=args.matrix)
    cells = shard(cells, args.shard)
    if args.overlay:
        cells = tuple(dataclasses.replace(c, overlay=True) if c.url else c for c in cells)
    return cells


def _python(args: argparse.Namespace) -> str:
    return args.interpreter or host_python()


def _no_gpu_cells(cells: tuple[Cell, ...], console: Console, *, python: str,
                  backend: str | None) -> tuple[tuple[Cell, ...], str | None]:
    """Without a GPU: only the preinstalled torch (the interpreter's, or an image's under the
    docker backend), with one sentence saying so; and the backend that runs it."""
    from ..backends.current import torch_version
    from ..backends.venv import interpreter_of

    mine = ([c for c in cells if c.channel is Channel.PREINSTALLED] or [preinstalled_cell()])[0]
    again = "pass --allow-no-gpu to run every cell anyway."
    if mine.base_image and backend in (None, "docker"):
        console.print(f"No GPU is visible (nvidia-smi lists none), so only the torch in image "
                      f"{mine.base_image} is probed; {again}", highlight=False)
        return (mine,), backend
    interpreter = interpreter_of(mine, python)
    if torch_version(interpreter) is None:
        console.print(f"No GPU is visible (nvidia-smi lists none) and {interpreter} has no "
                      f"torch, so nothing is probed; {again}", highlight=False)
        return (), "current"
    console.print(f"No GPU is visible (nvidia-smi lists none), so only the torch of {interpreter} "
                  f"is probed; {again}", highlight=False)
    return (dataclasses.replace(mine, base_image=None),), "current"


def preinstalled_cell(**fields) -> Cell:
    """The interpreter's own torch, for when the plan has no `preinstalled` entry."""
    return Cell(id=PREINSTALLED_ID, channel=Channel.PREINSTALLED, version="", cuda="", python="",
                **fields)


def with_torch_version(cell: Cell, *, python: str) -> Cell:
    """A preinstalled cell with the version (and CUDA tag) of the torch it names, read without
    importing torch, so the store and the report can say which torch it was."""
    if cell.channel is not Channel.PREINSTALLED or cell.version:
        return cell
    from ..backends.current import torch_version
    from ..backends.venv import interpreter_of

    version = torch_version(interpreter_of(cell, python)) or ""
    local = version.partition("+")[2]
    cuda = local if re.fullmatch(r"cu\d{3}|cpu|rocm[\d.]+", local) else cell.cuda
    return dataclasses.replace(cell, version=version, cuda=cuda)


def _probe(cells, backend_name, store, slots, args, console) -> tuple[list[CellRun],
                                                                      list[CellRun]]:
    from ..backends import choose_backend
    from ..progress import RichHandler
    from ..schedule import run_cells, select

    handler = RichHandler()
    options = backend_options(args, on_phase=handler.phase, on_download=handler.download)
    backend = choose_backend(backend_name, say=console.print, **options)
    cells = tuple(with_torch_version(c, python=_python(args)) for c in cells)
    picked = select(cells, store, backend=backend, gpu=slots[0], force=args.force)
    with handler:
        handler.start(to_run=len(picked.to_run), reused=len(picked.reused),
                      cost=_cost(picked, store, args, gpus=sum(s is not None for s in slots)))
        new = run_cells(picked.to_run, backend, store=store, gpus=slots,
                        logs_dir=args.out / "logs", lookahead=args.jobs, handler=handler)
    return new, list(picked.reused)


def _cost(picked, store, args: argparse.Namespace, *, gpus: int):
    """What the cells about to run will cost, for the first line the user reads."""
    from ..cost import estimate
    from ..lock import Lock

    reused = [r.cell for r in picked.reused]
    return estimate([*picked.to_run, *reused], stored=[c.id for c in reused],
                    lock=Lock.load(_lock_path(args)), runs=store.runs(), gpus=gpus or 1)


def backend_options(args: argparse.Namespace, **options) -> dict:
    """Constructor options from the command line (choose_backend drops those a class lacks)."""
    if args.interpreter:
        options["python"] = args.interpreter
    if args.workdir:
        options.update(workdir=args.workdir, work_root=args.workdir / "docker")
    return options


def _pin_hashes(runs: list[CellRun], lock_path: Path) -> None:
    """Record in the lock the sha256 of wheels the plan did not know and the installer hashed."""
    from ..lock import pin_sha256

    for run in runs:
        if run.cell.url and not run.cell.sha256 and re.fullmatch(r"[0-9a-f]{64}",
                                                                 run.wheel_sha256):
            pin_sha256(lock_path, run.cell.id, run.wheel_sha256)


def _summary(new: list[CellRun], reused: list[CellRun], console: Console, *, logs: Path) -> None:
    from ..progress import print_summary

    if not new and not reused:
        return
    title = (f"{count(len(new) + len(reused), 'cell')}: {len(new)} probed now, "
             f"{len(reused)} from the store")
    print_summary([*new, *reused], stored=[r.cell.id for r in reused], console=console,
                  title=title)
    if new:
        console.print(f"cell logs: {logs}/<cell id>.log", highlight=False)


def _render(store, args: argparse.Namespace, console: Console, *, empty_reason: str = "") -> None:
    try:
        from ..report import render
    except ImportError:
        return  # a build without the report stage: the summary table above is the output
    from .report import links_from

    for path in render(store, args.out, empty_reason=empty_reason, links=links_from(args.matrix)):
        console.print(f"wrote {path}", highlight=False)


def _sigterm_stops_like_ctrl_c() -> None:
    """A cancelled CI job sends SIGTERM: stop as cleanly as on Ctrl-C, releasing everything."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _interrupt)


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt
