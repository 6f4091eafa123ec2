"""`PlanOptions`: what `torchbisect plan` is asked to do, built once from its flags by
commands/plan.py and read, never written, by what plans and prints (plan_table.py,
plan_kinds.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..config.matrix import MatrixConfig
    from ..config.runners import Kind, Runners


@dataclass(frozen=True, kw_only=True)
class PlanOptions:
    """What `plan` is asked to do, built once from the flags: matrix.yaml loaded (None with
    `--kinds-only`, which plans nothing), runners.yaml loaded and the kinds it plans chosen."""

    matrix: Path  # where matrix.yaml is: the locks beside it
    config: MatrixConfig | None  # matrix.yaml, loaded once
    json: str | Path | None = None  # `-`: standard output
    lock: Path | None = None
    offline: bool = False
    driver: str | None = None
    store: Path
    hash: bool = False
    python: str | None = None
    platform: str | None = None
    previous_lock: Path | None = None
    shards: int | None = None
    github_output: Path | None = None
    runners: Runners | None = None  # with the kinds below
    kinds: tuple[Kind, ...] = ()  # --kind's, else every declared one
    lock_dir: Path | None = None
    previous_lock_dir: Path | None = None
    json_dir: Path | None = None
    kinds_only: bool = False
    online_runners: tuple[str, ...] = ()

    @property
    def planned(self) -> MatrixConfig:
        """The matrix a planning step plans (every one but --kinds-only's)."""
        assert self.config is not None, "--kinds-only plans nothing"
        return self.config
