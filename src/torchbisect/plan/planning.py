"""Which plan a command uses: matrix.yaml resolved for this interpreter, host and driver, and its
lock kept up to date.

`torchbisect plan`, `matrix`, `probe` and the benchmarks call these; nothing here reads the command
line, so each takes what it needs as keyword arguments, and nothing here reads matrix.yaml: the
command loads it once and hands the loaded `MatrixConfig` down, with its path for the lock beside
it.  The lock is written here only: when the plan is resolved, and after a run the hashes its
installer found for wheels the index published none for (`pin_found_hashes`).
"""

from __future__ import annotations

import fnmatch
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from ..config.matrix import MatrixConfig
from ..defaults import PROBE as DEFAULT_PROBE
from ..errors import ConfigError, ResolveError
from ..index.fetch import local_path
from ..index.tags import host_platform, runner_platform
from ..model import CellRun, Plan
from ..probe.scripts import own_probes, stand_ins
from ..utils.gpus import driver_version
from .cost import with_sizes
from .deps import with_deps
from .lock import Lock, lock_path, pin_sha256
from .resolve import build_plan, preinstalled_plan

Say = Callable[[str], None]


@dataclass(frozen=True, kw_only=True)
class Locked:
    """A resolved plan and the lock written for it."""

    plan: Plan
    lock: Lock  # as saved: the plan's wheels, with their sizes
    path: Path
    changed: bool  # whether the file's bytes changed


def plan_and_lock(
    config: MatrixConfig,
    *,
    matrix: Path,
    lock: Path | None = None,
    previous: Path | None = None,
    offline: bool = False,
    driver: str | None = None,
    python: str | None = None,
    platform: str | None = None,
    hasher: Callable[[str], str] | None = None,
    select: Sequence[str] = (),
    host_driver: bool = True,
    note: Say,
) -> Locked:
    """Resolve `config`, the loaded `matrix` file (for this interpreter, host and driver unless
    told), and save its lock;
    without `host_driver` a `driver` of None means none at all (a runner kind that declares
    none, planned on another machine), never this machine's;
    `previous`, an older lock, supplies pins the lock lacks (and allows --offline without one).
    With `select` (the globs of --cells) only the entries those can match are resolved, and the
    lock keeps its other cells as they were."""
    unnamed_probes(config, note)
    path = lock_path(matrix, lock=lock)
    locked = Lock.load(path)
    if previous:
        locked = locked.over(Lock.load(previous))
    platform = platform or runner_platform()  # this machine, its glibc included
    with lock_needed_offline(offline and previous is None, path):
        plan = build_plan(
            config,
            lock=locked,
            python=python or _this_python(),
            platform=platform,
            driver=driver or (driver_version() if host_driver else None),
            today=datetime.now(timezone.utc).date(),
            offline=offline,
            note=note,
            hasher=hasher,
            select=select,
        )
    # installed --no-deps over an image, or read where it lies: their dependencies cost nothing
    no_deps = {c.id for c in plan.cells if c.overlay or (c.url and local_path(c.url))}
    saved = with_deps(
        with_sizes(Lock.from_plan(plan), known=locked, offline=offline),
        known=locked,
        platform=platform,
        offline=offline,
        allow=config.allow_links_to,
        skip=no_deps,
    )
    if select:  # the cells --cells cannot match were not planned: they stay as locked
        kept = {
            cid: b
            for cid, b in Lock.load(path).builds.items()
            if not any(fnmatch.fnmatchcase(cid, p) for p in select)
        }
        saved = saved.over(Lock(builds=kept))
    # a lock that pins nothing (only preinstalled or dev cells) is never written: "commit it"
    # would be advice about an empty file, and --offline would read it as "no such release"
    changed = saved.save(path) if saved.builds else False
    return Locked(plan=plan, lock=saved, path=path, changed=changed)


def resolve_plan(
    config: MatrixConfig,
    *,
    matrix: Path,
    lock: Path | None = None,
    offline: bool = False,
    driver: str | None = None,
    say: Say = print,
    select: Sequence[str] = (),
    preinstalled_only: bool = False,
) -> Plan:
    """The plan of `config` (the loaded `matrix` file) for this interpreter and host, the lock
    kept up to date, notes and missing builds said as they are found; `select` as for
    `plan_and_lock`; with `preinstalled_only`, only the interpreter's own torch (no index, no
    lock)."""
    if preinstalled_only:
        unnamed_probes(config, lambda text: say(f"note: {text}"))
        return preinstalled_plan(
            config,
            python=_this_python(),
            platform=host_platform(),
            today=datetime.now(timezone.utc).date(),
        )
    plan = plan_and_lock(
        config,
        matrix=matrix,
        lock=lock,
        offline=offline,
        driver=driver,
        select=select,
        note=lambda text: say(f"note: {text}"),
    ).plan
    for missing in plan.missing:
        say(f"missing {missing.channel.value} {missing.what}: {missing.reason}")
    return plan


def pin_found_hashes(runs: Sequence[CellRun], lock_file: Path) -> None:
    """Record in the lock the sha256 of wheels the plan did not know and the installer hashed
    (the run stage hands its new runs here: the lock is the plan's to write)."""
    for run in runs:
        if run.cell.url and not run.cell.sha256 and re.fullmatch(r"[0-9a-f]{64}", run.wheel_sha256):
            pin_sha256(lock_file, run.cell.id, run.wheel_sha256)


def unnamed_probes(config: MatrixConfig, note: Say) -> None:
    """A user's probes beside matrix.yaml (or in TORCHBISECT_PROBES) that the file does not name
    do not run: the built-in default does.  Said, with the key that runs them; and a user's file
    of a shipped probe's name, which runs in its place, is said with both files."""
    for mine, shipped in stand_ins():
        note(
            f"probe {mine.stem!r} is found twice: your {mine} runs in place of the shipped "
            f"{shipped}; rename yours to keep both"
        )
    if config.names_a_probe():
        return
    names = [n for n in own_probes() if n != DEFAULT_PROBE]
    if names:
        note(
            f"matrix.yaml names no probe, so {DEFAULT_PROBE} probes every build; your probes "
            f"folders hold {', '.join(names)}: to run yours, add `probe: {names[0]}` (or a list) "
            "under `defaults:`"
        )


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
            raise ConfigError(
                f"--offline plans from the lock file alone, and there is none at "
                f"{lock_file}: run `torchbisect plan` once with network access to "
                f"write it, or pass --lock PATH"
            ) from None
        raise
