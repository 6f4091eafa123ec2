"""`torchbisect matrix`: plan → install and probe each cell on the GPUs → store → report.

This module reads the flags and prints: the flags become one `MatrixOptions` (run/options.py),
once, with what they imply worked out (a kind's driver and lock); `run_matrix` (run/matrix_run.py)
does the run, its progress drawn by `RichHandler`; then the summary table, the report and the
exit status are this module's.  Without a GPU only a preinstalled torch is probed, unless
`--allow-no-gpu`.

Exit status (`--fail-on`, see cli/options.py): by default 3 when some cell ended as an
infrastructure failure (it is retried on the next run), else 0; 1 with `--fail-on affected` when a
cell is affected.  2 for configuration errors, 5 when the backend cannot run.

With `--runners runners.yaml --kind NAME` the runner is first checked against its declared
kind (platform, and GPU model unless `--allow-no-gpu`; exit 3 on a mismatch, nothing probed:
run/kind.py), the kind's own lock is used (plan/lock.py's `lock_path`), and the shard's attendance
is written to the store at its end, also after a failure or an interrupt.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from .. import defaults
from ..cli import options as flags
from ..config.runners import Kind, Runners
from ..errors import ConfigError
from ..model import CellRun, RunStatus
from ..plan.lock import lock_path
from ..run.options import MatrixOptions
from ..utils.console import make_console
from ..utils.words import count

# It probes on the GPUs, writes the store and the work folder, and plans from --matrix.
NEEDS = flags.Needs(gpu=flags.ALWAYS, holds=("store", "workdir"), plans=flags.ALWAYS)


def configure(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    flags.add_matrix_option(parser)
    flags.add_lock_options(parser, writes=True)
    flags.add_backend_option(
        parser, "where cells are installed (default: docker when an engine answers, else venv)"
    )
    add(
        "--overlay",
        action="store_true",
        help="install only the torch wheel (--no-deps) over an environment that has the CUDA "
        "libraries, for every cell",
    )
    flags.add_store_option(parser, writes=True)
    add(
        "--shard",
        metavar="I/N",
        type=flags.shard_spec,
        help="run only shard I of N (cells split by a hash of their id)",
    )
    add(
        "--cells",
        metavar="GLOB,…",
        type=flags.patterns,
        help="only the cells whose id matches a pattern (e.g. 'stable-*,nightly-202610*')",
    )
    add(
        "--skip",
        metavar="GLOB,…",
        type=flags.patterns,
        help="leave out the cells whose id matches a pattern",
    )
    add("--force", action="store_true", help="probe cells even when a verdict is stored")
    add(
        "--allow-no-gpu",
        action="store_true",
        help="without a GPU, still install and probe every cell (the probe reports `skipped`)",
    )
    flags.add_interpreter_option(
        parser,
        "interpreter that has the CUDA libraries: overlays "
        "install over it and the preinstalled cell tests its "
        "torch (default: the one running torchbisect)",
    )
    flags.add_workdir_option(parser, "venvs, downloads and probe output")
    flags.add_out_option(parser, "report folder; cell logs go to OUT/logs/")
    add("--no-report", action="store_true", help="store results but render no report")
    add(
        "--jobs",
        type=flags.positive,
        metavar="N",
        help="cells installed ahead of the probes (default: two per GPU)",
    )
    flags.add_fail_on_option(parser)
    flags.add_json_option(parser)
    kinds = parser.add_argument_group("runner kinds (runners.yaml)")
    kinds.add_argument(
        "--runners",
        type=Path,
        metavar="PATH",
        help="the declared runner kinds; with --kind, this runner is checked "
        "against its kind first and the shard's attendance is stored",
    )
    kinds.add_argument("--kind", metavar="NAME", help="which declared kind this runner is")
    kinds.add_argument(
        "--lock-dir",
        type=Path,
        metavar="DIR",
        help="with --kind: the kind's lock is DIR/<name>.lock.json (default: "
        "<matrix>.locks/ next to the matrix file, as `plan --runners`)",
    )


def run(args: argparse.Namespace) -> int:
    options = matrix_options(args)
    from ..run.matrix_run import run_matrix
    from ..run.progress import RichHandler

    console = make_console(stderr=args.json == "-")
    done = run_matrix(options, RichHandler(notes=console))
    _summary(list(done.new), list(done.reused), console, logs=options.logs)
    if not args.no_report:
        _render(options, args.out, console, empty_reason=done.empty_reason)
    flags.write_json(args.json, done.runs)
    failed = [r for r in done.new if r.status is RunStatus.INFRA_FAILURE]
    if failed:
        console.print(
            f"{count(len(failed), 'cell')} failed for infrastructure reasons (see the "
            f"note column and {options.logs}/); they are retried on the next run"
        )
    return flags.exit_status(_as_drawn(done.runs, options.store), args.fail_on)


def _as_drawn(runs: list[CellRun], store: Path) -> list[CellRun]:
    """The runs as the page draws them, for --fail-on: a plain script's build that answered both
    ways over its stored runs is affected (flaky), whatever it answered last."""
    from ..store.db import Store
    from ..store.repeats import latest_with_repeats

    if not runs or not store.is_file():
        return runs
    with Store(store) as stored:
        return latest_with_repeats(runs, stored.iter_runs())


def matrix_options(args: argparse.Namespace) -> MatrixOptions:
    """The flags as the run's options, once: matrix.yaml loaded (the one time it is read), with
    --kind the kind's driver and lock too."""
    config = None
    if args.cells or args.skip:  # their patterns are checked against its entries first
        config = flags.load_matrix_file(args.matrix)
        flags.check_patterns(config, args.matrix, cells=args.cells, skip=args.skip)
    runners, kind = _kind(args)
    if config is None:
        config = flags.load_matrix_file(args.matrix)
    driver = args.driver
    if driver is None and kind is not None and kind.driver:  # the cells the plan job chose
        driver = kind.driver
    return MatrixOptions(
        matrix=args.matrix,
        config=config,
        offline=args.offline,
        driver=driver,
        lock=lock_path(
            args.matrix,
            lock=args.lock,
            lock_dir=args.lock_dir,
            kind=kind.name if kind is not None else None,
        ),
        backend=args.backend,
        overlay=args.overlay,
        store=args.store,
        cells=args.cells,
        skip=args.skip,
        shard=args.shard,
        force=args.force,
        allow_no_gpu=args.allow_no_gpu,
        interpreter=args.interpreter,
        workdir=args.workdir or defaults.WORKDIR,
        logs=args.out / "logs",
        jobs=args.jobs,
        runners=runners,
        kind=kind,
    )


def _kind(args: argparse.Namespace) -> tuple[Runners | None, Kind | None]:
    """--runners and --kind: the declared kinds, and the one this runner claims to be."""
    for flag, given in (("--kind", args.kind), ("--lock-dir", args.lock_dir)):
        if given is not None and args.runners is None:
            raise ConfigError(f"{flag} names a kind of runners.yaml: add --runners PATH")
    if args.runners is None:
        return None, None
    if args.kind is None:
        raise ConfigError("--runners needs --kind NAME: which declared kind this runner is")
    if args.lock is not None and args.lock_dir is not None:
        raise ConfigError("--lock and --lock-dir both name the lock: give one of them")
    from ..config.runners import load_runners

    runners = load_runners(args.runners)
    return runners, runners.kind(args.kind)


def _summary(new: list[CellRun], reused: list[CellRun], console: Console, *, logs: Path) -> None:
    from ..run.progress import print_summary

    if not new and not reused:
        return
    title = (
        f"{count(len(new) + len(reused), 'cell')}: {len(new)} probed now, "
        f"{len(reused)} from the store"
    )
    print_summary(
        [*new, *reused], stored=[r.cell.run_name for r in reused], console=console, title=title
    )
    if new:
        console.print(
            f"cell logs: {logs}/<cell id>.log (<cell id>.<probe>.log for a probe "
            "other than stale_replay)"
            if any(r.cell.run_name != r.cell.id for r in new)
            else f"cell logs: {logs}/<cell id>.log",
            highlight=False,
        )


def _render(options: MatrixOptions, out: Path, console: Console, *, empty_reason: str = "") -> None:
    from ..report import render
    from ..store.db import Store

    # With --kind the shard's attendance is already in the store: the local page says which
    # declared kinds reported, as the published one does.
    page = flags.page_inputs(options.config, options.matrix, options.runners)
    with Store(options.store) as store:
        for path in render(
            store,
            out,
            empty_reason=empty_reason,
            links=page.links,
            runners=page.runners,
            probes=page.probes,
        ):
            console.print(f"wrote {path}", highlight=False)
