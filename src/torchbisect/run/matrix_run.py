"""`run_matrix`: a matrix run from its options to its stored runs, the one entry point of the run
stage (`torchbisect matrix` and the benchmarks call it; nothing here reads the command line).

The steps, each a small function: with `--kind`, check the runner against its kind first (exit 3
on a mismatch, nothing probed: kind.py); resolve the plan (plan/planning.py; only the entries
`--cells` can match); pick this run's cells (selection.py); choose the backend; split the cells
into those to probe and the verdicts already stored; probe the rest (schedule.py); let the
backend tidy up (docker: prunes uv's cache volume); store the shard's attendance, also after a
failure or an interrupt; hand the hashes the installer found to the plan stage, which
pins them in the lock (plan/planning.py).  Without a GPU only a preinstalled
torch is probed, unless `allow_no_gpu` (no_gpu.py).  What the user sees goes through the
`Handler` (progress.py); printing the summary and drawing the report are the command's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..backends.base import Backend, BackendOptions, finishing
from ..backends.preinstalled import with_torch_version
from ..model import Attendance, Cell, CellRun, Plan
from ..plan import planning
from ..plan.lock import Lock
from ..store.db import Store
from ..utils.clock import now
from ..utils.gpus import Gpu
from .kind import Roll, check_runner, gpu_names
from .no_gpu import no_gpu_cells, own_interpreter
from .options import MatrixOptions
from .progress import Handler
from .schedule import run_cells
from .selection import Selection, globs, keep_reused, pick, select

_NO_GPU_PICKED = (
    "No GPU is visible on the machine that ran `torchbisect matrix`, so none of the "
    "selected cells was probed."
)
_NO_GPU_NO_TORCH = (
    "No GPU is visible on the machine that ran `torchbisect matrix`, and its "
    "interpreter has no torch, so nothing was probed."
)


@dataclass(frozen=True, kw_only=True)
class MatrixRun:
    """What a matrix run did."""

    new: tuple[CellRun, ...]  # probed now, and stored
    reused: tuple[CellRun, ...]  # stored verdicts standing in for the other cells
    attendance: Attendance | None = None  # the shard's, with a runner kind
    empty_reason: str = ""  # why nothing was probed, for a page without runs ("" otherwise)

    @property
    def runs(self) -> list[CellRun]:
        return [*self.new, *self.reused]


def run_matrix(options: MatrixOptions, handler: Handler) -> MatrixRun:
    started = now()
    from ..utils.gpus import list_gpus  # looked up now: the tests stand a machine in for it

    gpus = list_gpus()
    roll = _roll_call(options, gpus, started)
    cells, backend_name, empty_reason = _cells(options, gpus, handler)
    slots: list[Gpu | None] = [*gpus] or [None]
    attendance = None
    with Store(options.store) as store:
        if roll is not None:
            roll.begin(cells, store)
        try:
            new, reused = (
                _probe(cells, backend_name, store, slots, options, handler, roll)
                if cells
                else ([], ())
            )
        finally:
            if roll is not None:
                attendance = roll.end(store)
                handler.attended(attendance)
        planning.pin_found_hashes(new, options.lock)
    return MatrixRun(
        new=tuple(new), reused=tuple(reused), attendance=attendance, empty_reason=empty_reason
    )


def _roll_call(options: MatrixOptions, gpus: Sequence[Gpu], started: str) -> Roll | None:
    """With a kind: the runner checked against it (before anything else) and the attendance to
    take; None without."""
    if options.kind is None or options.runners is None:
        return None
    from ..index.tags import host_platform

    check_runner(
        options.kind,
        options.runners.path,
        platform=host_platform(),
        gpus=gpus,
        check_gpus=not options.allow_no_gpu,
    )
    return Roll(
        kind=options.kind, shard=options.shard or "1/1", started=started, gpus=gpu_names(gpus)
    )


def _cells(
    options: MatrixOptions,
    gpus: Sequence[Gpu],
    handler: Handler,
) -> tuple[tuple[Cell, ...], str | None, str]:
    """The cells this run probes, the backend asked for, and why there are none (if so)."""
    if gpus or options.allow_no_gpu:
        return _pick(_plan(options, handler).cells, options), options.backend, ""
    # Nothing but a preinstalled torch will run: no index to ask, no wheel to fetch (unless
    # --cells/--skip/--shard select cells: the plan names them, and says which are not run).
    picked = bool(options.cells or options.shard or options.skip)
    plan = _plan(options, handler, preinstalled_only=not picked)
    cells = _pick(plan.cells, options) if picked else plan.cells
    cells, backend_name = no_gpu_cells(
        cells,
        python=options.python,
        backend=options.backend,
        say=handler.note,
        selected=picked,
        probes=options.config.probe_names(options.config.defaults),
    )
    why = "" if cells else _NO_GPU_PICKED if picked else _NO_GPU_NO_TORCH
    return cells, backend_name, why


def _plan(options: MatrixOptions, handler: Handler, *, preinstalled_only: bool = False) -> Plan:
    return planning.resolve_plan(
        options.config,
        matrix=options.matrix,
        lock=options.lock,
        offline=options.offline,
        driver=options.driver,
        say=handler.note,
        select=globs(options.cells),
        preinstalled_only=preinstalled_only,
    )


def _pick(cells: tuple[Cell, ...], options: MatrixOptions) -> tuple[Cell, ...]:
    return pick(
        cells,
        keep=options.cells,
        skip=options.skip,
        shard_spec=options.shard,
        overlay=options.overlay,
        matrix=options.matrix,
    )


def _probe(
    cells: Sequence[Cell],
    backend_name: str | None,
    store: Store,
    slots: Sequence[Gpu | None],
    options: MatrixOptions,
    handler: Handler,
    roll: Roll | None,
) -> tuple[list[CellRun], tuple[CellRun, ...]]:
    from ..backends import choose_backend  # imported late: the docker SDK is slow to import

    # --interpreter, else matrix.yaml's `preinstalled.interpreter` when only it is probed
    backend_options = BackendOptions(
        python=options.interpreter or own_interpreter(cells),
        workdir=options.workdir,
        watcher=handler,
    )
    backend = choose_backend(backend_name, backend_options, say=handler.backend_chosen)
    with finishing(backend, say=handler.note):  # docker: prunes uv's cache volume
        picked = _select(
            cells,
            backend,
            store,
            slots,
            options,
            on_picked=roll.picked if roll is not None else None,
        )
        new = run_picked(
            picked,
            backend=backend,
            store=store,
            slots=slots,
            logs=options.logs,
            lookahead=options.jobs,
            handler=handler,
        )
    return new, picked.reused


def _select(
    cells: Sequence[Cell],
    backend: Backend,
    store: Store,
    slots: Sequence[Gpu | None],
    options: MatrixOptions,
    *,
    on_picked: Callable[[int, int], None] | None,
) -> Selection:
    """The cells without a stored verdict (all with `force`), and the stored ones standing in
    for the rest, kept under this plan's ids.  `on_picked(to_run, reused)` is told the split
    before any probe starts (a shard's attendance needs it even if none finishes)."""
    cells = tuple(with_torch_version(c, python=options.python) for c in cells)
    picked = select(
        cells,
        store,
        backend=backend,
        gpu=slots[0],
        force=options.force,
        lock=Lock.load(options.lock),
        gpus=sum(s is not None for s in slots),
    )
    picked = keep_reused(picked, store)
    if on_picked is not None:
        on_picked(len(picked.to_run), len(picked.reused))
    return picked


def run_picked(
    picked: Selection,
    *,
    backend: Backend,
    store: Store,
    slots: Sequence[Gpu | None],
    logs: Path,
    lookahead: int | None = None,
    handler: Handler | None = None,
) -> list[CellRun]:
    """Install and probe the picked cells now on `slots` (`[None]`: no GPU), storing each run as
    it ends: the probing step of `run_matrix`, which the benchmarks time on their own."""
    handler = handler or Handler()
    with handler:
        handler.start(to_run=len(picked.to_run), reused=len(picked.reused), cost=picked.cost)
        return run_cells(
            picked.to_run,
            backend,
            store=store,
            gpus=slots,
            logs_dir=logs,
            lookahead=lookahead,
            handler=handler,
        )
