"""Which of the plan's cells this run probes: the picking (`--cells`, `--skip`, `--shard`,
`--overlay`) and the split into the cells to run and the verdicts already stored.

* `pick` applies `--cells` and `--skip` (comma lists of glob patterns over cell ids; a pattern
  that matches no cell is a mistake, said as such), then `--shard`, then `--overlay`.
* `shard(cells, "i/n")` keeps the cells whose stable hash (sha256 of the id) falls in shard i: a
  cell's shard depends on nothing but its id, so hosts that resolved slightly different plans still
  never probe one cell twice, and shards 1/n … n/n together hold every cell exactly once.
* `select` drops the cells that already have a verdict in the store for the same wheel sha256, probe
  version, GPU model and driver, probed with the same cases, trials, timeout and env (the skip
  key; `--force` keeps them).  Infrastructure failures do not count, so they are retried.  It only
  reads: `keep_reused` then stores a verdict found under another cell id under this one too.

A host is taken to have one GPU model: the skip key uses the first GPU's.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from ..backends.base import Backend
from ..errors import ConfigError, TorchbisectError
from ..model import Cell, CellRun
from ..plan.cost import Cost, estimate
from ..plan.lock import Lock
from ..probe.scripts import probe_version
from ..store.db import Store
from ..utils.gpus import Gpu
from . import execute


def pick(
    cells: tuple[Cell, ...],
    *,
    keep: str | None,
    skip: str | None,
    shard_spec: str | None,
    overlay: bool,
    matrix: Path,
) -> tuple[Cell, ...]:
    """--cells and --skip, then --shard, then --overlay."""
    cells = by_patterns(cells, keep=keep, skip=skip, matrix=matrix)
    cells = shard(cells, shard_spec)
    if overlay:
        cells = tuple(dataclasses.replace(c, overlay=True) if c.url else c for c in cells)
    return cells


def by_patterns(
    cells: tuple[Cell, ...], *, keep: str | None, skip: str | None, matrix: Path
) -> tuple[Cell, ...]:
    """`--cells` and `--skip`: comma lists of glob patterns over cell ids."""
    if keep:  # the patterns are checked even when the plan is empty
        wanted = _patterns(cells, keep, "cells", matrix)
        cells = tuple(c for c in cells if _matches(c.id, wanted))
    if skip:
        unwanted = _patterns(cells, skip, "skip", matrix)
        cells = tuple(c for c in cells if not _matches(c.id, unwanted))
    return cells


def globs(text: str | None) -> tuple[str, ...]:
    """The patterns of `--cells` or `--skip` ("stable-*,nightly-202610*")."""
    return tuple(p.strip() for p in (text or "").split(",") if p.strip())


def _patterns(cells: tuple[Cell, ...], text: str, flag: str, matrix: Path) -> tuple[str, ...]:
    """The patterns of one flag; one that matches no cell is a mistake, said as such."""
    patterns = globs(text)
    unknown = [p for p in patterns if not any(_matches(c.id, [p]) for c in cells)]
    if unknown:
        raise ConfigError(
            f"--{flag}: no cell matches {', '.join(unknown)} in the plan of "
            f"{matrix}; `torchbisect plan` lists them"
        )
    return patterns


def _matches(cell_id: str, patterns: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(cell_id, p) for p in patterns)


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
    cost: Cost | None = None  # what running `to_run` will cost, said before it starts


def select(
    cells: Iterable[Cell],
    store: Store,
    *,
    backend: Backend,
    gpu: Gpu | None,
    force: bool = False,
    lock: Lock | None = None,
    gpus: int = 1,
) -> Selection:
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
    cost = estimate(
        [*to_run, *(r.cell for r in reused)],
        stored=[r.cell.run_name for r in reused],
        lock=lock or Lock(),
        runs=store.runs(),
        gpus=max(gpus, 1),
    )
    return Selection(to_run=tuple(to_run), reused=tuple(reused), cost=cost)


def _stored_verdict(cell: Cell, store: Store, backend: Backend, gpu: Gpu | None) -> CellRun | None:
    try:
        sha = fingerprint(backend, cell)
        version = probe_version(cell.probe)
    except TorchbisectError:
        return None  # cannot tell what would run: run it, and let execute report the failure
    found = store.find_ok(
        cell,
        wheel_sha256=sha or None,
        probe_version=version,
        gpu=execute.gpu_name(gpu),
        driver=gpu.driver if gpu else "",
    )
    if found is None or found.cell.id == cell.id:
        return found
    # The same wheel under another id (a bisected nightly, a dev entry of a release): the verdict
    # stands for this cell too, unsaved (run_id None) until `keep_reused` stores it.
    return replace(found, cell=cell, run_id=None)


def keep_reused(selection: Selection, store: Store) -> Selection:
    """Store the reused verdicts that `select` found under another cell id under this plan's id,
    so every cell of the plan shows in the report; the selection with their new run ids."""
    reused = tuple(
        run if run.run_id is not None else replace(run, run_id=store.add(run))
        for run in selection.reused
    )
    return replace(selection, reused=reused)


def fingerprint(backend: Backend, cell: Cell) -> str | None:
    """The wheel sha256 (or preinstalled fingerprint) a run of `cell` would record, if known now."""
    known = getattr(backend, "fingerprint", None)  # optional: venv/current know it before install
    return known(cell) if known else cell.sha256
