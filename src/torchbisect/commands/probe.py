"""`torchbisect probe [CELL]`: install and probe one cell of the plan, print its cases, store it.

The default cell, `preinstalled`, is this interpreter's torch on the `current` backend: it needs
no matrix.yaml and installs nothing.  Any other identifier comes from the plan of `--matrix`.
`--probe NAME` (or the id `CELL.NAME` that `plan` and `matrix` print) runs the probe NAME.py
found in the probes folders (probe/scripts.py: `probes/` beside matrix.yaml, TORCHBISECT_PROBES,
then the shipped ones), a document probe or a plain `git bisect run` script (default: the one
matrix.yaml names for the cell, else the shipped `stale_replay`).
The cell is always probed (no skip key): asking for one cell means asking for a fresh verdict.
A one-off probe writes nothing unless asked: the run is stored with `--store`, its log kept with
`--out`, the document written with `--json`; the preinstalled cell works in a temporary folder
(`--workdir` names one to keep), a cell that installs a wheel in the usual work folder, where its
venv is reused (defaults.py says where that is).

Exit status: the probe's own, as `git bisect run` reads it: 0 not affected, 1 affected, 125 cannot
tell (no GPU, no torch in the interpreter, a control misbehaved, a crash, a script's 125 or its
status above 127, an API the probe requires absent); 3 for an infrastructure failure.
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from .. import defaults
from ..backends.base import BackendOptions, host_python
from ..backends.preinstalled import with_torch_version
from ..cells import PREINSTALLED as PREINSTALLED_ID
from ..cells import preinstalled_cell
from ..cli import options as flags
from ..cli.options import add_backend_option, add_interpreter_option, add_json_option, write_json
from ..errors import ConfigError, NoTorch
from ..exits import Exit
from ..model import Cell, CellRun, Channel, RunStatus
from ..probe.scripts import available, default_probe, probe_info
from ..utils.console import make_console, print_table

if TYPE_CHECKING:
    from ..config.matrix import MatrixConfig
    from ..utils.gpus import Gpu


# It probes on a GPU, and holds only what it is told to write (a one-off probe writes nothing of
# its own); it plans from --matrix unless asked for the interpreter's own torch.
NEEDS = flags.Needs(
    gpu=flags.ALWAYS,
    holds=("store", "workdir"),
    default_workdir=False,
    plans=lambda args: args.cell != PREINSTALLED_ID,
)


def configure(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add(
        "cell",
        nargs="?",
        default=PREINSTALLED_ID,
        help="cell identifier from `torchbisect plan`, or CELL.PROBE as plan prints it "
        "(default: %(default)s, this interpreter's torch)",
    )
    flags.add_matrix_option(parser, "matrix file the cell comes from")
    flags.add_lock_options(parser)
    add_backend_option(
        parser, "default: current for preinstalled; else docker when an engine answers, else venv"
    )
    add("--overlay", action="store_true", help="install only the torch wheel (--no-deps)")
    add("--gpu", type=int, metavar="INDEX", help="GPU to use (default: the first visible one)")
    add(
        "--probe",
        type=flags.nonempty,
        metavar="NAME",
        help="the probe to run: NAME.py found in probes/ beside matrix.yaml, in the folders "
        "TORCHBISECT_PROBES names, or among the shipped ones; a JSON-document probe or a "
        "plain `git bisect run` script (default: the matrix's for this cell, else "
        "stale_replay)",
    )
    add("--cases", metavar="A,B", help="only these cases (the controls always run)")
    add("--trials", type=int, metavar="N", help="trials of the timing-dependent cases")
    add(
        "--store",
        type=flags.Output("file"),
        metavar="PATH",
        help=f"store the run in this result store, e.g. {flags.shown(defaults.STORE)} (default: "
        "not stored)",
    )
    add_interpreter_option(
        parser, "interpreter whose torch `preinstalled` tests and over which overlays install"
    )
    add(
        "--workdir",
        type=flags.Output("dir"),
        metavar="DIR",
        help="venvs and downloads (default: a temporary folder for preinstalled; else "
        f"{flags.shown(defaults.WORKDIR)}/)",
    )
    add(
        "--out",
        type=flags.Output("pages"),
        metavar="OUT",
        help="keep the log as OUT/logs/<cell>.log (default: no log is kept)",
    )
    add_json_option(parser)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ProbeOptions:
    """What `probe` is asked to do, built once from the flags: the cell and probe asked for
    (`CELL.NAME` split), and matrix.yaml loaded (None for the preinstalled cell without one)."""

    cell: str  # the cell's id, without a `.NAME` of its probe
    probe: str | None = None  # --probe, or the NAME of CELL.NAME
    matrix: Path  # where matrix.yaml is: the lock beside it, the sentences that name it
    config: MatrixConfig | None  # matrix.yaml, loaded once
    lock: Path | None = None
    offline: bool = False
    driver: str | None = None
    backend: str | None = None
    overlay: bool = False
    gpu: int | None = None
    cases: str | None = None
    trials: int | None = None
    store: Path | None = None
    interpreter: str | None = None
    workdir: Path | None = None
    out: Path | None = None
    json: str | Path | None = None


def probe_options(args: argparse.Namespace) -> ProbeOptions:
    """The flags as `probe`'s options, each input read once, its mistakes said in one
    sentence."""
    asked = _asked(args.cell, args.probe)
    if asked.probe is not None:
        probe_info(asked.probe)  # a probe that is not there, or not readable: one sentence
    return ProbeOptions(
        cell=asked.cell,
        probe=asked.probe,
        matrix=args.matrix,
        config=_matrix(args.matrix, asked.cell),
        lock=args.lock,
        offline=args.offline,
        driver=args.driver,
        backend=args.backend,
        overlay=args.overlay,
        gpu=args.gpu,
        cases=args.cases,
        trials=args.trials,
        store=args.store,
        interpreter=args.interpreter,
        workdir=args.workdir,
        out=args.out,
        json=args.json,
    )


def _matrix(matrix: Path, cell: str) -> MatrixConfig | None:
    """matrix.yaml for the cell asked: none for the preinstalled cell without the file; a
    mistake in it is said as it is where the cell's id is checked against its entries, else as
    what keeps the cell from being looked up."""
    if cell == PREINSTALLED_ID and not matrix.is_file():
        return None
    if cell != PREINSTALLED_ID and matrix.is_file():
        return flags.load_matrix_file(matrix)
    try:
        return flags.load_matrix_file(matrix)
    except ConfigError as err:
        raise ConfigError(f"cannot look up cell {cell!r}: {err}") from None


def run(args: argparse.Namespace) -> int:
    options = probe_options(args)
    console = make_console(stderr=options.json == "-")
    cell = with_torch_version(
        _overrides(_find(options), options), python=options.interpreter or host_python()
    )
    _require_torch(cell, options)
    with tempfile.TemporaryDirectory(prefix="torchbisect-probe-") as scratch:
        result = _probe(cell, options, console, scratch=Path(scratch))
    if options.store is not None:
        from ..store.db import Store

        with Store(options.store) as store:
            run_id = store.add(result)
        console.print(f"stored as run {run_id} in {options.store}", highlight=False)
    write_json(options.json, [result])
    if result.status is RunStatus.INFRA_FAILURE or result.verdict is None:
        return Exit.NO_VERDICT
    return result.verdict.exit_code


def _probe(cell: Cell, options: ProbeOptions, console: Console, *, scratch: Path) -> CellRun:
    from ..backends import Purpose, choose_backend
    from ..run import execute

    purpose = Purpose.OWN_TORCH if cell.channel is Channel.PREINSTALLED else Purpose.BUILDS
    workdir = options.workdir or (
        scratch if cell.channel is Channel.PREINSTALLED else defaults.WORKDIR
    )
    backend = choose_backend(
        options.backend,
        BackendOptions(python=options.interpreter, workdir=workdir),
        purpose=purpose,
        say=console.print,
    )
    gpu = _gpu(options.gpu)
    where = f"on {gpu.name}" if gpu else "without a GPU (a GPU probe can only say it cannot tell)"
    console.print(f"probing {cell.id} {where} with {backend.label}", highlight=False)
    logs = options.out / "logs" if options.out is not None else scratch / "logs"
    result = execute.run_cell(backend, cell, gpu=gpu, logs_dir=logs)
    _print(result, console)
    if options.out is not None:
        console.print(f"log: {execute.log_path(logs, cell)}", highlight=False)
    return result


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Asked:
    """The cell asked for and its probe: `CELL` with `--probe NAME`, or `CELL.NAME` (the id
    `plan` and `matrix` print for a build probed by several probes)."""

    cell: str
    probe: str | None


def _asked(text: str, probe: str | None) -> _Asked:
    """`CELL.NAME` is split where NAME is a probe found (probe/scripts.py); a `--probe` that
    names another one is one sentence."""
    head, dot, tail = text.rpartition(".")
    if not dot or not head or tail not in available():
        return _Asked(cell=text, probe=probe)
    if probe is not None and probe != tail:
        raise ConfigError(
            f"the cell {text!r} names the probe {tail} and --probe names {probe}: give one of them"
        )
    return _Asked(cell=head, probe=tail)


def _find(options: ProbeOptions) -> Cell:
    asked = _Asked(cell=options.cell, probe=options.probe)
    if options.config is None:
        return preinstalled_cell(probe=asked.probe or default_probe())
    from ..plan.planning import resolve_plan

    # The interpreter's own torch needs no index: only the matrix's settings for it.
    only_mine = asked.cell == PREINSTALLED_ID
    if not only_mine:  # an id no entry can give is said before any index is asked
        flags.check_patterns(options.config, options.matrix, cell=asked.cell)
    console = make_console(stderr=True)
    try:
        plan = resolve_plan(
            options.config,
            matrix=options.matrix,
            lock=options.lock,
            offline=options.offline,
            driver=options.driver,
            say=lambda text: console.print(text, highlight=False),
            preinstalled_only=only_mine,
        )
    except ConfigError as err:
        raise ConfigError(f"cannot look up cell {asked.cell!r}: {err}") from None
    cells: dict[str, list[Cell]] = {}
    for c in plan.cells:
        cells.setdefault(c.id, []).append(c)
    if asked.cell in cells:
        return _one_probe(cells[asked.cell], asked.probe, options.matrix)
    if asked.cell == PREINSTALLED_ID:
        return preinstalled_cell(probe=asked.probe or default_probe())
    import difflib

    close = difflib.get_close_matches(asked.cell, list(cells), n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else "; `torchbisect plan` lists them"
    raise ConfigError(f"no cell {asked.cell!r} in the plan of {options.matrix}{hint}")


def _one_probe(cells: list[Cell], probe: str | None, matrix: Path) -> Cell:
    """The plan's cell for `--probe` (its settings from matrix.yaml), else that build with the
    probe swapped in (its cases are the probe's own); without --probe, the one probe matrix.yaml
    names for it."""
    if probe is None:
        if len(cells) > 1:
            names = ", ".join(c.probe for c in cells)
            ids = ", ".join(f"{c.id}.{c.probe}" for c in cells)
            raise ConfigError(
                f"{matrix} probes {cells[0].id} with {names}: pick one with "
                f"--probe NAME, or name the cell with its probe ({ids})"
            )
        return cells[0]
    same = [c for c in cells if c.probe == probe]
    return same[0] if same else dataclasses.replace(cells[0], probe=probe, cases=())


def _require_torch(cell: Cell, options: ProbeOptions) -> None:
    """Probing an interpreter that has no torch cannot tell anything (125, as the probe script
    says there itself), and is no infrastructure failure: said before anything is run or stored."""
    if cell.channel is not Channel.PREINSTALLED or cell.base_image or cell.version:
        return
    from ..backends.preinstalled import interpreter_of, no_torch_message

    raise NoTorch(
        "cannot tell: "
        + no_torch_message(interpreter_of(cell, options.interpreter or host_python()))
    )


def _overrides(cell: Cell, options: ProbeOptions) -> Cell:
    changes: dict[str, Any] = {}
    if options.cases:
        changes["cases"] = tuple(c.strip() for c in options.cases.split(",") if c.strip())
        _known_cases(cell.probe, options.cases, changes["cases"])
    if options.trials is not None:
        changes["trials"] = options.trials
    if options.overlay and cell.url:
        changes["overlay"] = True
    return dataclasses.replace(cell, **changes) if changes else cell


def _known_cases(probe: str, given: str, cases: tuple[str, ...]) -> None:
    """A --cases name the probe's file does not declare is a typo to fix, refused before anything
    is installed: the probe would exit 128 on it, which reads as an infrastructure failure."""
    known = probe_info(probe).declared_cases
    unknown = [c for c in cases if c not in known]
    if known and unknown:
        raise ConfigError(
            f"--cases {given}: {', '.join(unknown)} is not a case of the probe {probe}; "
            f"choose from {', '.join(known)}"
        )


def _gpu(index: int | None) -> Gpu | None:
    from ..utils.gpus import list_gpus

    gpus = list_gpus()
    if index is None:
        return gpus[0] if gpus else None
    for gpu in gpus:
        if gpu.index == index:
            return gpu
    raise ConfigError(
        f"--gpu {index}: no such GPU here (visible: "
        f"{', '.join(str(g.index) for g in gpus) or 'none'})"
    )


def _print(run: CellRun, console: Console) -> None:
    if run.status is RunStatus.INFRA_FAILURE or run.result is None:
        console.print(f"[red]infrastructure failure[/]: {run.reason}", highlight=False)
        return
    table = Table(title=f"{run.cell.id}: {run.result.verdict.value}", title_justify="left")
    for column in ("case", "verdict", "detail", "seconds"):
        table.add_column(column, justify="right" if column == "seconds" else "left")
    rows = [(c.name, c.verdict.value, c.detail, f"{c.seconds:.1f}") for c in run.result.cases]
    for row in rows:
        table.add_row(*row)
    print_table(console, table, rows)
