"""The one interface every backend implements: prepare a cell's environment, then probe it.

Preparing (download + install) and probing are separate so the scheduler can install the next
cells while the GPUs probe the current ones.  Backends raise `InfraError` (or a subclass) for any
failure of their own; they never decide a verdict.
"""

from __future__ import annotations

import abc
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from ..model import Cell


def host_python() -> str:
    """The interpreter whose torch is "preinstalled" and which overlays build on.

    `$TORCHBISECT_HOST_PYTHON` (the nox sessions set it to the interpreter that runs nox, since a
    session's own venv may not see a torch installed in another venv), else this interpreter.
    """
    return os.environ.get("TORCHBISECT_HOST_PYTHON") or sys.executable


@dataclass(frozen=True, kw_only=True)
class Prepared:
    """A cell whose torch is installed and ready to probe."""

    cell: Cell
    python: str  # interpreter that has the cell's torch (inside the container for docker)
    wheel_sha256: str  # of the installed wheel; a fingerprint of the torch for preinstalled
    seconds_install: float = 0.0
    env: dict[str, str] = field(default_factory=dict)  # the entry's extra variables and overlay
    handle: Any = None  # backend-private state (venv dir, image tag …)


@dataclass(frozen=True, kw_only=True)
class ProbeOutput:
    """What the probe printed: its JSON document (maybe empty) and how it exited."""

    json_text: str
    exit_code: int
    seconds: float
    log_tail: str = ""


class Backend(abc.ABC):
    name: ClassVar[str]

    @abc.abstractmethod
    def check(self) -> None:
        """Raise BackendUnavailable with one sentence when this backend cannot run here."""

    @abc.abstractmethod
    def prepare(self, cell: Cell, *, log: Path) -> Prepared:
        """Download and install the cell's torch; may run while other cells are being probed."""

    @abc.abstractmethod
    def probe(self, prepared: Prepared, *, gpu: int | None, probe_args: list[str],
              log: Path) -> ProbeOutput:
        """Run the cell's probe script on one GPU (None: no GPU) and return its output."""

    def fingerprint(self, cell: Cell) -> str | None:
        """What `Prepared.wheel_sha256` will be, when known without installing (skip checks)."""
        return cell.sha256

    def release(self, prepared: Prepared) -> None:  # noqa: B027 - optional hook
        """Free what `prepare` made (venv dirs are kept for reuse; containers are removed)."""
