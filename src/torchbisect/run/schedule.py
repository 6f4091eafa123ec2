"""Which cell runs on which GPU, and when: one probe per GPU, installs looked ahead.

* `run_cells` probes one cell per GPU at a time.  While probes run, the next cells' installs run in
  a thread pool, at most `lookahead` cells ahead (default: two per GPU), so a GPU rarely waits
  for a download.  Results are stored by the calling thread as each cell finishes, so a killed run
  loses only the cells in flight.  Ctrl-C stops the installs and probes, releases what was
  prepared, stores nothing half-done, and re-raises.

Which cells run at all (`--cells`, shards, what is stored already) is selection.py's.  A host is
taken to have one GPU model: install failures use the first GPU's.
"""

from __future__ import annotations

import signal
import time
from collections import deque
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..backends.base import Backend
from ..model import Cell, CellRun
from ..store.db import Store
from ..utils import proc
from ..utils.gpus import Gpu
from . import execute
from .progress import Handler

_STOP_GRACE = 5.0  # seconds children get to exit after SIGINT before SIGKILL: a stop is prompt


def run_cells(
    cells: Sequence[Cell],
    backend: Backend,
    *,
    store: Store,
    gpus: Sequence[Gpu | None],
    logs_dir: Path,
    lookahead: int | None = None,
    handler: Handler | None = None,
) -> list[CellRun]:
    """Install and probe `cells` on `gpus` (`[None]`: no GPU); store and return each run."""
    if not gpus:
        raise ValueError("run_cells needs at least one slot (None for no GPU)")
    runner = _Runner(
        backend,
        store=store,
        gpus=gpus,
        logs_dir=Path(logs_dir),
        lookahead=lookahead or 2 * len(gpus),
        handler=handler or Handler(),
    )
    return runner.run(cells)


class _Runner:
    def __init__(
        self,
        backend: Backend,
        *,
        store: Store,
        gpus: Sequence[Gpu | None],
        logs_dir: Path,
        lookahead: int,
        handler: Handler,
    ):
        self.backend, self.store, self.logs_dir, self.handler = backend, store, logs_dir, handler
        self.gpus = tuple(gpus)
        self.lookahead = max(1, lookahead)
        self.free: deque[Gpu | None] = deque(self.gpus)
        self.ready: deque[execute.Staged] = deque()
        self.preparing: dict[Future[execute.Staged | CellRun], Cell] = {}
        self.probing: dict[Future[CellRun], tuple[execute.Staged, Gpu | None]] = {}
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
                done, _ = wait(self._futures(), return_when=FIRST_COMPLETED)
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
        future = pool.submit(
            execute.prepare, self.backend, cell, log=self._log(cell), gpu=self.gpus[0]
        )
        self.preparing[future] = cell

    def _submit_probe(
        self, pool: ThreadPoolExecutor, staged: execute.Staged, gpu: Gpu | None
    ) -> None:
        future = pool.submit(
            execute.probe, self.backend, staged, gpu=gpu, log=self._log(staged.cell)
        )
        self.probing[future] = (staged, gpu)

    def _futures(self) -> list[Future[Any]]:
        """The installs and the probes under way (two types of future: Any joins them)."""
        return [*self.preparing, *self.probing]

    def _collect(self, future: Future[Any]) -> None:  # one of preparing's or probing's
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
        running = [f for f in self._futures() if not f.done()]
        _interrupt_children(running)
        for future in self.preparing:
            if future.done() and not future.cancelled() and future.exception() is None:
                outcome = future.result()
                if isinstance(outcome, execute.Staged):
                    self.ready.append(outcome)
        for staged in self.ready:
            execute.release(self.backend, staged.prepared, log=self._log(staged.cell))


def _interrupt_children(running: Sequence[Future[Any]], grace: float = _STOP_GRACE) -> None:
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
