"""`torchbisect matrix`: plan → install and probe each cell on the GPUs → store → report.

The steps, each a small function: resolve the plan (plan/planning.py; only the entries `--cells`
can match), pick this shard's cells, choose the backend, skip the cells whose verdict is already
stored, run the rest (run/stage.py), let the backend tidy up (docker: prune uv's cache volume),
print the summary table, render the report.  Without a GPU only a preinstalled torch is probed,
unless `--allow-no-gpu`.

Exit status (`--fail-on`, see cli/options.py): by default 3 when some cell ended as an
infrastructure failure (it is retried on the next run), else 0; 1 with `--fail-on affected` when a
cell is affected.  2 for configuration errors, 5 when the backend cannot run.

With `--runners runners.yaml --kind NAME` the runner is first checked against its declared
kind (platform, and GPU model unless `--allow-no-gpu`; exit 3 on a mismatch, nothing probed:
run/kind.py), the kind's own lock is used (plan_kinds.kind_lock), and the shard's attendance is
written to the store at its end, also after a failure or an interrupt.
"""

from __future__ import annotations

import argparse
import dataclasses
import signal
import threading
from pathlib import Path

from rich.console import Console

from .. import defaults
from ..backends.base import BackendOptions, finishing, host_python
from ..errors import ConfigError
from ..model import Cell, CellRun, Plan, RunStatus
from ..plan import planning
from ..run import stage as runstage
from ..utils.clock import now
from ..utils.console import make_console
from ..utils.words import count
from . import options as flags


def configure(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    flags.add_matrix_option(parser)
    flags.add_lock_options(parser, writes=True)
    flags.add_backend_option(parser, "where cells are installed (default: docker when an "
                                     "engine answers, else venv)")
    add("--overlay", action="store_true",
        help="install only the torch wheel (--no-deps) over an environment that has the CUDA "
             "libraries, for every cell")
    flags.add_store_option(parser, writes=True)
    add("--shard", metavar="I/N", type=flags.shard_spec,
        help="run only shard I of N (cells split by a hash of their id)")
    add("--cells", metavar="GLOB,…", help="only the cells whose id matches a pattern "
                                         "(e.g. 'stable-*,nightly-202610*')")
    add("--skip", metavar="GLOB,…", help="leave out the cells whose id matches a pattern")
    add("--force", action="store_true", help="probe cells even when a verdict is stored")
    add("--allow-no-gpu", action="store_true",
        help="without a GPU, still install and probe every cell (the probe reports `skipped`)")
    flags.add_interpreter_option(parser, "interpreter that has the CUDA libraries: overlays "
                                         "install over it and the preinstalled cell tests its "
                                         "torch (default: the one running torchbisect)")
    flags.add_workdir_option(parser, "venvs, downloads and probe output")
    flags.add_out_option(parser, "report folder; cell logs go to OUT/logs/")
    add("--no-report", action="store_true", help="store results but render no report")
    add("--jobs", type=flags.positive, metavar="N",
        help="cells installed ahead of the probes (default: two per GPU)")
    flags.add_fail_on_option(parser)
    flags.add_json_option(parser)
    kinds = parser.add_argument_group("runner kinds (runners.yaml)")
    kinds.add_argument("--runners", type=Path, metavar="PATH",
                       help="the declared runner kinds; with --kind, this runner is checked "
                            "against its kind first and the shard's attendance is stored")
    kinds.add_argument("--kind", metavar="NAME", help="which declared kind this runner is")
    kinds.add_argument("--lock-dir", type=Path, metavar="DIR",
                       help="with --kind: the kind's lock is DIR/<name>.lock.json (default: "
                            "<matrix>.locks/ next to the matrix file, as `plan --runners`)")


def run(args: argparse.Namespace) -> int:
    _sigterm_stops_like_ctrl_c()
    flags.check_patterns(args.matrix, cells=args.cells, skip=args.skip)
    started = now()
    console = make_console(stderr=args.json == "-")
    from ..utils.gpus import list_gpus

    gpus = list_gpus()
    roll = _roll_call(args, gpus, started)
    backend_name = args.backend
    why_nothing = ""
    if not gpus and not args.allow_no_gpu:
        # Nothing but a preinstalled torch will run: no index to ask, no wheel to fetch (unless
        # --cells/--skip/--shard select cells: the plan names them, and says which are not run).
        picked = bool(args.cells or args.shard or args.skip)
        plan = _plan(args, console, preinstalled_only=not picked)
        cells = _pick(plan.cells, args) if picked else plan.cells
        cells, backend_name = runstage.no_gpu_cells(cells, python=_python(args),
                                                    backend=backend_name, say=_say(console),
                                                    selected=picked)
        if not cells:
            why_nothing = (
                "No GPU is visible on the machine that ran `torchbisect matrix`, so none of the "
                "selected cells was probed." if picked else
                "No GPU is visible on the machine that ran `torchbisect matrix`, and its "
                "interpreter has no torch, so nothing was probed.")
    else:
        cells = _pick(_plan(args, console).cells, args)
    slots = list(gpus) or [None]
    from ..store.db import Store

    with Store(args.store) as store:
        if roll is not None:
            roll.begin(cells, store)
        try:
            new, reused = _probe(cells, backend_name, store, slots, args, console,
                                 roll) if cells else ([], [])
        finally:
            if roll is not None:
                _said_attendance(roll.end(store), console)
        runstage.pin_hashes(new, _lock_path(args))
        _summary(new, reused, console, logs=args.out / "logs")
        if not args.no_report:
            _render(store, args, console, empty_reason=why_nothing)
    flags.write_json(args.json, [*new, *reused])
    failed = [r for r in new if r.status is RunStatus.INFRA_FAILURE]
    if failed:
        console.print(f"{count(len(failed), 'cell')} failed for infrastructure reasons (see the "
                      f"note column and {args.out / 'logs'}/); they are retried on the next run")
    return flags.exit_status([*new, *reused], args.fail_on)


def _say(console: Console):
    return lambda text: console.print(text, highlight=False)


def _roll_call(args: argparse.Namespace, gpus, started: str):
    """With --kind: the runner checked against its kind (before anything else) and the
    attendance to take; None without."""
    for flag, given in (("--kind", args.kind), ("--lock-dir", args.lock_dir)):
        if given is not None and args.runners is None:
            raise ConfigError(f"{flag} names a kind of runners.yaml: add --runners PATH")
    if args.runners is None:
        return None
    if args.kind is None:
        raise ConfigError("--runners needs --kind NAME: which declared kind this runner is")
    if args.lock is not None and args.lock_dir is not None:
        raise ConfigError("--lock and --lock-dir both name the lock: give one of them")
    from ..config.runners import load_runners
    from ..index.tags import host_platform
    from ..run import kind as runkind

    kind = load_runners(args.runners).kind(args.kind)
    runkind.check_runner(kind, args.runners, platform=host_platform(), gpus=gpus,
                         check_gpus=not args.allow_no_gpu)
    if args.driver is None and kind.driver:  # the cells the plan job chose for this kind
        args.driver = kind.driver
    if args.lock is None:
        from .plan_kinds import kind_lock

        args.lock = kind_lock(kind.name, matrix=args.matrix, lock_dir=args.lock_dir)
    return runkind.Roll(kind=kind, shard=args.shard or "1/1", started=started,
                        gpus=runkind.gpu_names(gpus))


def _said_attendance(attendance, console: Console) -> None:
    console.print(f"attendance: {attendance.kind} shard {attendance.shard} of run "
                  f"{attendance.run}: {count(attendance.cells, 'cell')}, {attendance.probed} "
                  f"probed now, {attendance.reused} from the store, {attendance.failed} without "
                  "a verdict", highlight=False)


def _plan(args: argparse.Namespace, console: Console, *, preinstalled_only: bool = False) -> Plan:
    return planning.resolve_plan(args.matrix, lock=args.lock, offline=args.offline,
                                 driver=args.driver, say=_say(console),
                                 select=flags.globs(args.cells),
                                 preinstalled_only=preinstalled_only)


def _pick(cells: tuple[Cell, ...], args: argparse.Namespace) -> tuple[Cell, ...]:
    """--cells and --skip, then --shard, then --overlay."""
    from ..run.schedule import shard

    cells = flags.by_patterns(cells, keep=args.cells, skip=args.skip, matrix=args.matrix)
    cells = shard(cells, args.shard)
    if args.overlay:
        cells = tuple(dataclasses.replace(c, overlay=True) if c.url else c for c in cells)
    return cells


def _python(args: argparse.Namespace) -> str:
    return args.interpreter or host_python()


def _probe(cells, backend_name, store, slots, args, console, roll) -> tuple[list[CellRun],
                                                                            list[CellRun]]:
    from ..backends import choose_backend
    from ..run.progress import RichHandler

    handler = RichHandler()
    options = BackendOptions(python=args.interpreter, workdir=args.workdir or defaults.WORKDIR,
                             watcher=handler)
    backend = choose_backend(backend_name, options, say=console.print)
    with finishing(backend, say=_say(console)):  # docker: prunes uv's cache volume
        return runstage.probe_cells(cells, backend=backend, store=store, slots=slots,
                                    force=args.force, logs=args.out / "logs",
                                    lookahead=args.jobs, handler=handler,
                                    lock_file=_lock_path(args), python=_python(args),
                                    on_picked=roll.picked if roll is not None else None)


def _lock_path(args: argparse.Namespace) -> Path:
    return planning.lock_path(args.matrix, args.lock)


def _summary(new: list[CellRun], reused: list[CellRun], console: Console, *, logs: Path) -> None:
    from ..run.progress import print_summary

    if not new and not reused:
        return
    title = (f"{count(len(new) + len(reused), 'cell')}: {len(new)} probed now, "
             f"{len(reused)} from the store")
    print_summary([*new, *reused], stored=[r.cell.id for r in reused], console=console,
                  title=title)
    if new:
        console.print(f"cell logs: {logs}/<cell id>.log", highlight=False)


def _render(store, args: argparse.Namespace, console: Console, *, empty_reason: str = "") -> None:
    from ..report import render
    from .report import links_from

    # With --kind the shard's attendance is already in the store: the local page says which
    # declared kinds reported, as the published one does.
    runners = None
    if args.runners is not None:
        from ..config.runners import load_runners

        runners = load_runners(args.runners)
    for path in render(store, args.out, empty_reason=empty_reason, links=links_from(args.matrix),
                       runners=runners):
        console.print(f"wrote {path}", highlight=False)


def _sigterm_stops_like_ctrl_c() -> None:
    """A cancelled CI job sends SIGTERM: stop as cleanly as on Ctrl-C, releasing everything."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _interrupt)


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt
