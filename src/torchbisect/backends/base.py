"""The one interface every backend implements: prepare a cell's environment, then probe it.

Preparing (download + install) and probing are separate so the scheduler can install the next
cells while the GPUs probe the current ones.  Backends raise `InfraError` (or a subclass) for any
failure of their own; they never decide a verdict.

A backend is built from one `BackendOptions` (an option no backend knows is a TypeError, not
silently dropped), and says what each cell is doing to the `Watcher` in it: the one route by which
phases (download, install, probe) and download progress reach the user.
"""

from __future__ import annotations

import abc
import contextlib
import fcntl
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from .. import defaults
from ..errors import TorchbisectError
from ..masking import mask
from ..model import Cell
from ..probe.document import MAX_BYTES
from ..utils import files


def host_python() -> str:
    """The interpreter whose torch is "preinstalled" and which overlays build on.

    `$TORCHBISECT_HOST_PYTHON` (the nox sessions set it to the interpreter that runs nox, since a
    session's own venv may not see a torch installed in another venv), else this interpreter.
    """
    return os.environ.get("TORCHBISECT_HOST_PYTHON") or sys.executable


class Watcher:
    """Hears what a backend is doing with a cell; this one stays silent (`progress.Handler`
    draws it).  Called from worker threads."""

    def phase(self, cell: Cell, phase: str) -> None:
        """`cell` entered `phase`: "download", "install" or "probe"."""

    def download(self, cell: Cell, got: int, total: int | None, rate: float) -> None:
        """`got` bytes of `cell`'s wheel (of `total`, when known) are in, at `rate` bytes/s."""


@dataclass(frozen=True, kw_only=True)
class BackendOptions:
    """How to build a backend; every backend takes all of these, and reads those it needs."""

    # venvs, downloads and probe output (the project's, or the data folder's: defaults.py)
    workdir: Path = field(default_factory=lambda: defaults.WORKDIR)
    overlay: bool = False  # install only torch, over the packages of `python` (or the image's)
    # The interpreter whose torch is "preinstalled" and which overlays build on (venv, current;
    # docker runs the image's python).  None: `host_python()`.
    python: str | None = None
    install_timeout: float = 3600.0  # seconds one cell's install may take
    watcher: Watcher = field(default_factory=Watcher)
    # docker: the CA bundle mounted into containers ("auto": the one this host's tools trust),
    # and a docker SDK client (None: from the environment)
    ca_bundle: Path | str | None = "auto"
    client: Any = None


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
    # the fingerprint of the probe's copy this run ran (probe/scripts.py `snapshot`), stored
    # with the run whatever became of the probe's file since
    probe_version: str = ""


@dataclass(frozen=True, kw_only=True)
class Capabilities:
    """What a backend can do.  Callers ask these, never the backend's name, so that a new
    backend is one new module and one line of `BACKENDS` (docs/development.md)."""

    # Each cell runs in a container of an image: a preinstalled cell may name an image to probe,
    # the GPUs must be handed to the container (what `preflight` checks), and a `bisect
    # --script` runs inside it, so its path is not looked up on this host.
    containers: bool = False
    # `bisect --pytorch-repo`: a main-branch commit's Python files laid over a hard-linked copy
    # of a nightly's venv on this host.
    commit_overlays: bool = False
    # What it keeps between runs, which `torchbisect cache` measures and `--prune` empties, in
    # a few words ("" when nothing): `Backend.measure_kept` and `Backend.prune_kept`.
    keeps: str = ""
    # What it keeps lies in the work folder, so a prune holds that folder's run lock
    # (utils/runlock.py): no prune while a run builds there.
    keeps_in_workdir: bool = False


class Backend(abc.ABC):
    name: ClassVar[str]
    label: ClassVar[str]  # what a page calls its runs: "the venv backend"
    can: ClassVar[Capabilities] = Capabilities()

    def __init__(self, options: BackendOptions | None = None) -> None:  # noqa: B027
        """Every backend is built from one `BackendOptions` (`choose_backend`)."""

    @abc.abstractmethod
    def check(self) -> None:
        """Raise BackendUnavailable with one sentence when this backend cannot run here."""

    @abc.abstractmethod
    def prepare(self, cell: Cell, *, log: Path) -> Prepared:
        """Download and install the cell's torch; may run while other cells are being probed."""

    @abc.abstractmethod
    def probe(
        self, prepared: Prepared, *, gpu: int | str | None, probe_args: list[str], log: Path
    ) -> ProbeOutput:
        """Run the cell's probe script on one GPU (None: no GPU) and return its output."""

    def fingerprint(self, cell: Cell) -> str | None:
        """What `Prepared.wheel_sha256` will be, when known without installing (skip checks)."""
        return cell.sha256

    def release(self, prepared: Prepared) -> None:  # noqa: B027 - optional hook
        """Free what `prepare` made (venv dirs are kept for reuse; containers are removed)."""

    def finish(self, *, say: Callable[[str], None]) -> None:  # noqa: B027 - optional hook
        """After a run's last cell: tidy what runs share (docker: prune uv's cache volume).
        Says what it did in one line; never raises: the run's results are stored by then."""

    def measure_kept(self) -> Iterator[str]:
        """What it keeps between runs (`can.keeps`) and how big, a line at a time, as
        `torchbisect cache` prints them.  Raises BackendUnavailable or InfraError when that
        cannot be measured here."""
        return iter(())

    def prune_kept(self) -> Iterator[str]:
        """Empty what it keeps between runs (`torchbisect cache --prune`); what was done, a line
        at a time.  The caller holds the work folder's run lock when `can.keeps_in_workdir`."""
        return iter(())


@contextlib.contextmanager
def finishing(backend: Backend, say: Callable[[str], None]) -> Iterator[Backend]:
    """The block, then `backend.finish`: also when the block stopped with one of torchbisect's
    errors (a bisection that stops at its ends has installed builds too), not after Ctrl-C."""
    try:
        yield backend
    except TorchbisectError:
        backend.finish(say=say)
        raise
    backend.finish(say=say)


@contextlib.contextmanager
def cell_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on `path`: one run at a time builds a cell's environment."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
    except OSError as err:
        raise files.refusal(path, err) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # released when the file closes, or the process dies
        yield
    finally:
        os.close(fd)


def read_document(path: Path) -> str:
    """What the probe wrote, read no further than the size a document may have (and one byte
    more, so that `probe/document.py` can say it was too large): a 300 MB document is not loaded."""
    try:
        with path.open("rb") as fh:
            return fh.read(MAX_BYTES + 1).decode("utf-8", errors="replace")
    except FileNotFoundError:
        return ""


def note(log: Path, line: str) -> None:
    """A line of torchbisect's own in a cell's log, among the installer's or the probe's output."""
    files.append(log, f"# torchbisect: {mask(line)}\n")
