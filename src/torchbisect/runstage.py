"""The run stage between the plan and the store: which plan a run uses, the preinstalled cell,
the cells of a machine without a GPU, the backend's options, and the probing of the picked cells
with the verdicts already stored.

`torchbisect matrix`, `torchbisect probe` and the benchmarks call these; nothing here reads the
command line, so each takes what it needs as keyword arguments.
"""

from __future__ import annotations

import dataclasses
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from . import cells
from .errors import ConfigError, ResolveError
from .gpus import Gpu
from .model import Cell, CellRun, Channel, Plan

if TYPE_CHECKING:  # annotations only: the CLI imports this module before it needs these
    from .backends.base import Backend
    from .plan.lock import Lock
    from .progress import Handler
    from .schedule import Selection
    from .store.db import Store

PREINSTALLED_ID = cells.PREINSTALLED

Say = Callable[[str], None]


def lock_path(matrix: Path, lock: Path | None = None) -> Path:
    """`--lock`, else `<matrix>.lock.json` next to the matrix file."""
    from .plan.lock import Lock

    return lock or Lock.default_path(matrix)


@dataclass(frozen=True, kw_only=True)
class Locked:
    """A resolved plan and the lock written for it."""

    plan: Plan
    lock: Lock  # as saved: the plan's wheels, with their sizes
    path: Path
    changed: bool  # whether the file's bytes changed


def plan_and_lock(matrix: Path, *, lock: Path | None = None, previous: Path | None = None,
                  offline: bool = False, driver: str | None = None, python: str | None = None,
                  platform: str | None = None, hasher: Callable[[str], str] | None = None,
                  note: Say) -> Locked:
    """Resolve `matrix` (for this interpreter, host and driver unless told) and save its lock;
    `previous`, an older lock, supplies pins the lock lacks (and allows --offline without one)."""
    from .config.matrix import load_matrix
    from .gpus import driver_version
    from .index.tags import host_platform
    from .plan.cost import with_sizes
    from .plan.lock import Lock
    from .plan.resolve import build_plan

    config = load_matrix(matrix)
    path = lock_path(matrix, lock)
    locked = Lock.load(path)
    if previous:
        locked = locked.over(Lock.load(previous))
    with lock_needed_offline(offline and previous is None, path):
        plan = build_plan(config, lock=locked, python=python or _this_python(),
                          platform=platform or host_platform(),
                          driver=driver or driver_version(),
                          today=datetime.now(timezone.utc).date(), offline=offline, note=note,
                          hasher=hasher)
    saved = with_sizes(Lock.from_plan(plan), known=locked, offline=offline)
    return Locked(plan=plan, lock=saved, path=path, changed=saved.save(path))


def resolve_plan(matrix: Path, *, lock: Path | None = None, offline: bool = False,
                 driver: str | None = None, say: Say = print,
                 preinstalled_only: bool = False) -> Plan:
    """The plan of `matrix` for this interpreter and host, the lock kept up to date, notes and
    missing builds said as they are found; with `preinstalled_only`, only the interpreter's own
    torch (no index, no lock)."""
    if preinstalled_only:
        from .config.matrix import load_matrix
        from .index.tags import host_platform
        from .plan.resolve import preinstalled_plan

        return preinstalled_plan(load_matrix(matrix), python=_this_python(),
                                 platform=host_platform(),
                                 today=datetime.now(timezone.utc).date())
    plan = plan_and_lock(matrix, lock=lock, offline=offline, driver=driver,
                         note=lambda text: say(f"note: {text}")).plan
    for missing in plan.missing:
        say(f"missing {missing.channel.value} {missing.what}: {missing.reason}")
    return plan


def _this_python() -> str:
    return f"{sys.version_info.major}.{sys.version_info.minor}"


@contextmanager
def lock_needed_offline(offline: bool, lock_file: Path) -> Iterator[None]:
    """--offline resolves index builds from the lock alone (dev wheels and the preinstalled torch
    need none): when that fails for want of a lock file, say that instead of "no such release"."""
    try:
        yield
    except ResolveError:
        if offline and not lock_file.is_file():
            raise ConfigError(f"--offline plans from the lock file alone, and there is none at "
                              f"{lock_file}: run `torchbisect plan` once with network access to "
                              f"write it, or pass --lock PATH") from None
        raise


def preinstalled_cell(**fields) -> Cell:
    """The interpreter's own torch, for when the plan has no `preinstalled` entry."""
    return Cell(id=PREINSTALLED_ID, channel=Channel.PREINSTALLED, version="", cuda="", python="",
                **fields)


def with_torch_version(cell: Cell, *, python: str) -> Cell:
    """A preinstalled cell with the version (and CUDA tag) of the torch it names, read without
    importing torch, so the store and the report can say which torch it was."""
    if cell.channel is not Channel.PREINSTALLED or cell.version:
        return cell
    from .backends.preinstalled import interpreter_of, torch_version

    version = torch_version(interpreter_of(cell, python)) or ""
    cuda = cells.build_tag(version) or cell.cuda
    return dataclasses.replace(cell, version=version, cuda=cuda)


def no_gpu_cells(cells: tuple[Cell, ...], *, python: str, backend: str | None,
                 say: Say) -> tuple[tuple[Cell, ...], str | None]:
    """Without a GPU: only the preinstalled torch (the interpreter's, or an image's under the
    docker backend), with one sentence saying so; and the backend that runs it."""
    from .backends.preinstalled import interpreter_of, torch_version

    mine = ([c for c in cells if c.channel is Channel.PREINSTALLED] or [preinstalled_cell()])[0]
    again = "pass --allow-no-gpu to run every cell anyway."
    if mine.base_image and backend in (None, "docker"):
        say(f"No GPU is visible (nvidia-smi lists none), so only the torch in image "
            f"{mine.base_image} is probed; {again}")
        return (mine,), backend
    interpreter = interpreter_of(mine, python)
    if torch_version(interpreter) is None:
        say(f"No GPU is visible (nvidia-smi lists none) and {interpreter} has no torch, so "
            f"nothing is probed; {again}")
        return (), "current"
    say(f"No GPU is visible (nvidia-smi lists none), so only the torch of {interpreter} is "
        f"probed; {again}")
    return (dataclasses.replace(mine, base_image=None),), "current"


def backend_options(*, interpreter: str | None, workdir: Path | None, **options) -> dict:
    """The backend's constructor options: those given, plus the interpreter and workdir when
    set (left out otherwise, so the backend's own defaults hold)."""
    if interpreter:
        options["python"] = interpreter
    if workdir:
        options["workdir"] = workdir
    return options


def probe_cells(cells: Sequence[Cell], *, backend: Backend, store: Store,
                slots: Sequence[Gpu | None], force: bool, logs: Path, lookahead: int | None,
                handler: Handler, lock_file: Path,
                python: str) -> tuple[list[CellRun], list[CellRun]]:
    """Probe the cells without a stored verdict (all with `force`) and store them; the new runs
    and the stored ones standing in for the rest."""
    from .schedule import keep_reused, run_cells, select

    cells = tuple(with_torch_version(c, python=python) for c in cells)
    picked = select(cells, store, backend=backend, gpu=slots[0], force=force)
    picked = keep_reused(picked, store)
    with handler:
        handler.start(to_run=len(picked.to_run), reused=len(picked.reused),
                      cost=_cost(picked, store, lock_file, gpus=sum(s is not None for s in slots)))
        new = run_cells(picked.to_run, backend, store=store, gpus=slots, logs_dir=logs,
                        lookahead=lookahead, handler=handler)
    return new, list(picked.reused)


def _cost(picked: Selection, store: Store, lock_file: Path, *, gpus: int):
    """What the cells about to run will cost, for the first line the user reads."""
    from .plan.cost import estimate
    from .plan.lock import Lock

    reused = [r.cell for r in picked.reused]
    return estimate([*picked.to_run, *reused], stored=[c.id for c in reused],
                    lock=Lock.load(lock_file), runs=store.runs(), gpus=gpus or 1)


def pin_hashes(runs: list[CellRun], lock_file: Path) -> None:
    """Record in the lock the sha256 of wheels the plan did not know and the installer hashed."""
    from .plan.lock import pin_sha256

    for run in runs:
        if run.cell.url and not run.cell.sha256 and re.fullmatch(r"[0-9a-f]{64}",
                                                                 run.wheel_sha256):
            pin_sha256(lock_file, run.cell.id, run.wheel_sha256)
