"""A runner and the kind it claims to be (runners.yaml), and the attendance its shard leaves.

`check_runner` runs before anything else in `matrix --kind`: a runner whose platform or GPU is not
its kind's (a label on the wrong machine) would probe another kind's wheels and store verdicts
under the wrong GPU model, so it stops with one sentence (exit 3) and probes nothing.

`Roll` takes the shard's attendance: which shard of which kind reported in which run, with what it
did (cells in the shard, probed now, reused from the store, left without a verdict).  It is written
to the store at the end of the shard, also when the shard failed or was interrupted, so the page can
tell a kind that reported from one whose runners never did.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..config.runners import Kind
from ..errors import InfraError
from ..model import Attendance, Cell, RunStatus
from ..store.db import Store
from ..utils.clock import now
from ..utils.gpus import Gpu


def check_runner(
    kind: Kind, runners: Path, *, platform: str, gpus: Sequence[Gpu], check_gpus: bool = True
) -> None:
    """InfraError unless this machine is `kind`'s platform and (with `check_gpus`) every GPU it
    shows is `kind`'s model."""
    names = gpu_names(gpus)
    wrong_gpu = check_gpus and (not gpus or not all(kind.matches(g.name) for g in gpus))
    if platform == kind.platform and not wrong_gpu:
        return
    has = f"{platform} with {names or 'no GPU'}" if check_gpus else platform
    wants = f"{kind.platform} with {kind.gpu}" if check_gpus else kind.platform
    raise InfraError(
        f"{runners}:{kind.line} declares kind {kind.name} as {wants}, but this "
        f"runner is {has}: give the runner the labels of its own kind (or fix that "
        "entry); nothing was probed, so no other kind's wheels run here"
    )


def gpu_names(gpus: Sequence[Gpu]) -> str:
    """ "NVIDIA H200" for eight of them; distinct names, ", "-joined."""
    return ", ".join(dict.fromkeys(g.name for g in gpus))


def run_id(started: str) -> str:
    """The CI run and attempt ("123456-2"), else "local-<started>"."""
    run, attempt = os.environ.get("GITHUB_RUN_ID"), os.environ.get("GITHUB_RUN_ATTEMPT")
    return f"{run}-{attempt or 1}" if run else f"local-{started}"


@dataclass
class Roll:
    """One shard's attendance being taken: `begin` when its cells are known, `end` always."""

    kind: Kind
    shard: str
    started: str
    gpus: str
    cells: tuple[Cell, ...] = ()
    last_id: int = 0  # the store's newest run before the shard: newer ones are its own
    reused: int = 0
    ended: bool = field(default=False, repr=False)

    def begin(self, cells: Sequence[Cell], store: Store) -> None:
        self.cells = tuple(cells)
        self.last_id = max((r.run_id or 0 for r in store.iter_runs()), default=0)

    def picked(self, to_run: int, reused: int) -> None:
        """Called once the stored verdicts standing in for cells are known."""
        self.reused = reused

    def end(self, store: Store) -> Attendance:
        """Write what the shard did to `store` (once) and return it."""
        keys = {c.key for c in self.cells}  # a build probed by two probes is two cells here
        mine = [
            r for r in store.iter_runs() if (r.run_id or 0) > self.last_id and r.cell.key in keys
        ]
        probed = {r.cell.key for r in mine}
        verdicts = {r.cell.key for r in mine if r.status is RunStatus.OK}
        attendance = Attendance(
            kind=self.kind.name,
            shard=self.shard,
            run=run_id(self.started),
            gpu=self.gpus,
            host=socket.gethostname(),
            started=self.started,
            finished=now(),
            cells=len(self.cells),
            probed=len(probed),
            reused=self.reused,
            failed=max(len(self.cells) - len(verdicts) - self.reused, 0),
        )
        if not self.ended:
            store.add_attendance(attendance)
            self.ended = True
        return attendance
