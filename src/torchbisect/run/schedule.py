"""Which cells run, on which GPU, in what order: shards, the skip key, and install lookahead.

* `shard(cells, "i/n")` keeps the cells whose stable hash (sha256 of the id) falls in shard i: a
  cell's shard depends on nothing but its id, so hosts that resolved slightly different plans still
  never probe one cell twice, and shards 1/n … n/n together hold every cell exactly once.
* `select` drops the cells that already have a verdict in the store for the same wheel sha256, probe
  version, GPU model and driver, probed with the same cases, trials, timeout and env (the skip
  key; `--force` keeps them).  Infrastructure failures do not count, so they are retried.  It only
  reads: `keep_reused` then stores a verdict found under another cell id under this one too.
* `run_cells` probes one cell per GPU at a time.  While probes run, the next cells' installs run in
  a thread pool, at most `lookahead` cells ahead (default: two per GPU), so a GPU rarely waits
  for a download.  Results are stored by the calling thread as each cell finishes, so a killed run
  loses only the cells in flight.  Ctrl-C stops the installs and probes, releases what was
  prepared, stores nothing half-done, and re-raises.

A host is taken to have one GPU model: the skip key and install failures use the first GPU's.
"""

from __future__ import annotations

import hashlib
import signal
import time
from collections import deque
from collections.abc import Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, replace
from pathlib import Path

from ..backends.base import Backend
from ..errors import ConfigError, TorchbisectError
from ..model import Cell, CellRun
from ..plan.cost import Cost, estimate
from ..plan.lock import Lock
from ..probe.scripts import probe_version
from ..store.db import Store
from ..utils import proc
from ..utils.gpus import Gpu
from . import execute
from .progress import Handler

_STOP_GRACE = 5.0  # seconds children get to exit after SIGINT before SIGKILL: a stop is prompt


def parse_shard(spec: str) -> tuple[int, int]:
    """`"2/3"` → (2, 3); ConfigError for anything else."""
    try:
        i, n = (int(part) for part in spec.split("/"))
    except ValueError:
        i = n = 0
    if not 1 <= i <= n:
        raise ConfigError(f"--shard {spec!r}: expected i/n with 1 <= i <= n, e.g. --shard 2/3")
    return i, n


def shard_of(cell_id: str, n: int) -> int:
    """The shard (1-based) a cell belongs to among n: a stable hash of its id, never Python's."""
    return int.from_bytes(hashlib.sha256(cell_id.encode()).digest()[:8], "big") % n + 1


def shard(cells: Iterable[Cell], spec: str | None) -> tuple[Cell, ...]:
    cells = tuple(cells)
    if not spec:
        return cells
    i, n = parse_shard(spec)
    return tuple(c for c in cells if shard_of(c.id, n) == i)


@dataclass(frozen=True, kw_only=True)
class Selection:
    to_run: tuple[Cell, ...]
    reused: tuple[CellRun, ...]  # stored verdicts standing in for the cells not run
    cost: Cost  # what running `to_run` will cost, said before it starts


def select(cells: Iterable[Cell], store: Store, *, backend: Backend, gpu: Gpu | None,
           force: bool = False, lock: Lock | None = None, gpus: int = 1) -> Selection:
    """Split cells into those to run and those whose skip key already has a verdict, with the
    cost of the run (wheel sizes from `lock`, times from the store's runs, over `gpus`); reads
    the store and writes nothing (see `keep_reused`)."""
    to_run, reused = [], []
    for cell in cells:
        found = None if force else _stored_verdict(cell, store, backend, gpu)
        if found is None:
            to_run.append(cell)
        else:
            reused.append(found)
    cost = estimate([*to_run, *(r.cell for r in reused)], stored=[r.cell.id for r in reused],
                    lock=lock or Lock(), runs=store.runs(), gpus=max(gpus, 1))
    return Selection(to_run=tuple(to_run), reused=tuple(reused), cost=cost)


def _stored_verdict(cell: Cell, store: Store, backend: Backend, gpu: Gpu | None) -> CellRun | None:
    try:
        sha = fingerprint(backend, cell)
        version = probe_version(cell.probe)
    except TorchbisectError:
        return None  # cannot tell what would run: run it, and let execute report the failure
    found = store.find_ok(cell, wheel_sha256=sha or None, probe_version=version,
                          gpu=execute.gpu_name(gpu), driver=gpu.driver if gpu else "")
    if found is None or found.cell.id == cell.id:
        return found
    # The same wheel under another id (a bisected nightly, a dev entry of a release): the verdict
    # stands for this cell too, unsaved (run_id None) until `keep_reused` stores it.
    return replace(found, cell=cell, run_id=None)


def keep_reused(selection: Selection, store: Store) -> Selection:
    """Store the reused verdicts that `select` found under another cell id under this plan's id,
    so every cell of the plan shows in the report; the selection with their new run ids."""
    reused = tuple(run if run.run_id is not None else replace(run, run_id=store.add(run))
                   for run in selection.reused)
    return replace(selection, reused=reused)


def fingerprint(backend: Backend, cell: Cell) -> str | None:
    """The wheel sha256 (or preinstalled fingerprint) a run of `cell` would record, if known now."""
    known = getattr(backend, "fingerprint", None)  # optional: venv/current know it before install
    return known(cell) if known else cell.sha256


def run_cells(cells: Sequence[Cell], backend: Backend, *, store: Store,
              gpus: Sequence[Gpu | None], logs_dir: Path, lookahead: int | None = None,
              handler: Handler | None = None) -> list[CellRun]:
    """Install and probe `cells` on `gpus` (`[None]`: no GPU); store and return each run."""
    if not gpus:
        raise ValueError("run_cells needs at least one slot (None for no GPU)")
    runner = _Runner(backend, store=store, gpus=gpus, logs_dir=Path(logs_dir),
                     lookahead=lookahead or 2 * len(gpus), handler=handler or Handler())
    return runner.run(cells)


class _Runner:
    def __init__(self, backend: Backend, *, store: Store, gpus: Sequence[Gpu | None],
                 logs_dir: Path, lookahead: int, handler: Handler):
        self.backend, self.store, self.logs_dir, self.handler = backend, store, logs_dir, handler
        self.gpus = tuple(gpus)
        self.lookahead = max(1, lookahead)
        self.free: deque[Gpu | None] = deque(self.gpus)
        self.ready: deque[execute.Staged] = deque()
        self.preparing: dict[Future, Cell] = {}
        self.probing: dict[Future, tuple[execute.Staged, Gpu | None]] = {}
        self.results: list[CellRun] = []

    def run(self, cells: Sequence[Cell]) -> list[CellRun]:
        pending = deque(cells)
        installs = ThreadPoolExecutor(self.lookahead, thread_name_prefix="install")
        probes = ThreadPoolExecutor(len(self.gpus), thread_name_prefix="probe")
        try:
            while pending or self.preparing or self.ready or self.probing:
                while pending and len(self.preparing) + len(self.ready) < self.lookahead:
                    self._submit_install(installs, pending.popleft())
                while self.free and self.ready:
                    self._submit_probe(probes, self.ready.popleft(), self.free.popleft())
                done, _ = wait([*self.preparing, *self.probing], return_when=FIRST_COMPLETED)
                for future in done:
                    self._collect(future)
        except BaseException:
            self._stop(installs, probes)
            raise
        installs.shutdown()
        probes.shutdown()
        return self.results

    def _log(self, cell: Cell) -> Path:
        return execute.log_path(self.logs_dir, cell)

    def _submit_install(self, pool: ThreadPoolExecutor, cell: Cell) -> None:
        future = pool.submit(execute.prepare, self.backend, cell, log=self._log(cell),
                             gpu=self.gpus[0])
        self.preparing[future] = cell

    def _submit_probe(self, pool: ThreadPoolExecutor, staged: execute.Staged,
                      gpu: Gpu | None) -> None:
        future = pool.submit(execute.probe, self.backend, staged, gpu=gpu,
                             log=self._log(staged.cell))
        self.probing[future] = (staged, gpu)

    def _collect(self, future: Future) -> None:
        if future in self.preparing:
            del self.preparing[future]
            outcome = future.result()
            if isinstance(outcome, CellRun):
                self._finish(outcome)
            else:
                self.ready.append(outcome)
            return
        staged, gpu = self.probing.pop(future)
        self.free.append(gpu)
        execute.release(self.backend, staged.prepared, log=self._log(staged.cell))
        self._finish(future.result())

    def _finish(self, run: CellRun) -> None:
        run = replace(run, run_id=self.store.add(run))
        self.results.append(run)
        self.handler.finished(run)

    def _stop(self, installs: ThreadPoolExecutor, probes: ThreadPoolExecutor) -> None:
        """Ctrl-C (or any error): cancel what has not started, stop what has, release it all."""
        for pool in (installs, probes):
            pool.shutdown(wait=False, cancel_futures=True)
        for staged, _gpu in self.probing.values():  # docker kills its container here
            execute.release(self.backend, staged.prepared, log=self._log(staged.cell))
        running = [f for f in (*self.preparing, *self.probing) if not f.done()]
        _interrupt_children(running)
        for future in self.preparing:
            if future.done() and not future.cancelled() and future.exception() is None:
                outcome = future.result()
                if isinstance(outcome, execute.Staged):
                    self.ready.append(outcome)
        for staged in self.ready:
            execute.release(self.backend, staged.prepared, log=self._log(staged.cell))


def _interrupt_children(running: Sequence[Future], grace: float = _STOP_GRACE) -> None:
    """SIGINT to every running command's process group (uv, probes), then SIGKILL.

    Commands run in their own process groups, so a Ctrl-C at the terminal does not reach them:
    this does, and the worker threads cannot return before their subprocess does.
    """
    if not running:
        return
    proc.signal_all(signal.SIGINT)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and not all(f.done() for f in running):
        time.sleep(0.1)
    if not all(f.done() for f in running):
        proc.signal_all(signal.SIGKILL)
        wait(running, timeout=grace)
