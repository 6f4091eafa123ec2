"""Turns one cell into one `CellRun`: prepare, probe, and map whatever happened to a status.

This module is THE place where exceptions and exit statuses become statuses, for the matrix and
the bisection alike (a `bisect --script` is a probe too: probes/script.py).  Only a probe that
exited 0, 1 or 125 and wrote a valid document matching that status gives `RunStatus.OK` with its
verdict.  A backend failure, a crash, a hang, a missing or unreadable JSON document, or an exit
status that disagrees with the document all give `RunStatus.INFRA_FAILURE` with a one-line
reason: never affected, never not affected (`probe/document.py` sets the limits a document must
keep: size, depth, verdicts, types).  The one exception that passes through is
ConfigError: a mistake in matrix.yaml (say, a preinstalled cell on docker without an image) stops
the run with its sentence and exit status 2.
"""

from __future__ import annotations

import contextlib
import re
import traceback
from dataclasses import dataclass
from pathlib import Path

from ..backends.base import Backend, Prepared, ProbeOutput
from ..errors import CommandFailed, ConfigError, TorchbisectError
from ..exits import Exit
from ..masking import mask
from ..model import Cell, CellRun, ProbeResult, RunStatus
from ..probe import document
from ..probe.scripts import probe_version, runs_through_adapter
from ..utils import files
from ..utils.clock import now
from ..utils.gpus import Gpu, device_of
from ..utils.words import last_line, signal_name

PROBE_EXITS = (Exit.OK, Exit.AFFECTED, Exit.CANNOT_TELL)  # the probe's contract
# probes/script.py's status and last line for a script it cannot run: no document, no verdict
_ADAPTER_REFUSED, _ADAPTER_SAYS = 128, "script.py: "
_EXCERPT_LINES = 40


@dataclass(frozen=True, kw_only=True)
class Staged:
    """A prepared cell waiting for a GPU, and when its run started (the start of its install)."""

    prepared: Prepared
    started: str

    @property
    def cell(self) -> Cell:
        return self.prepared.cell


def log_path(logs_dir: Path, cell: Cell) -> Path:
    """One log per (cell, probe): the latest run's (`Cell.run_name`)."""
    return Path(logs_dir) / f"{cell.run_name}.log"


def probe_args(cell: Cell) -> list[str]:
    """The probe's command-line options for this cell (the backend adds --json)."""
    args: list[str] = []
    if cell.cases:
        args += ["--cases", ",".join(cell.cases)]
    if cell.trials is not None:
        args += ["--trials", str(cell.trials)]
    if runs_through_adapter(cell.probe):  # it stops the command in time to say `timeout`
        args += ["--timeout", repr(cell.timeout)]  # every digit: the adapter stops before us
    return args


def prepare(backend: Backend, cell: Cell, *, log: Path, gpu: Gpu | None) -> Staged | CellRun:
    """Install the cell's torch; an infrastructure failure comes back as a stored-ready CellRun.

    Truncates the cell's log: it always holds the latest run.  `gpu` only labels a failure.
    The backend tells its `Watcher` the phases (install, download, probe).
    """
    started = now()
    # a fresh file: a link planted at the log's name is replaced, its target left alone
    files.write_text(
        log,
        f"# torchbisect: {cell.id} started {started} backend={backend.name} probe={cell.probe}\n",
    )
    try:
        prepared = backend.prepare(cell, log=log)
    except (ConfigError, files.DiskFull):
        raise  # a mistake in matrix.yaml, a full disk: they stop the run with their sentence
    except Exception as err:  # noqa: BLE001 - every other failure of a backend is infra
        if full := _disk_full(backend, err):
            raise full from None  # every cell after it would fail the same way
        return _failure(cell, backend, gpu, started, log, f"install: {_describe(err, cell, log)}")
    return Staged(prepared=prepared, started=started)


def probe(backend: Backend, staged: Staged, *, gpu: Gpu | None, log: Path) -> CellRun:
    """Run the probe on `gpu` and turn its output (or its failure) into a CellRun."""
    prepared, cell, started = staged.prepared, staged.cell, staged.started
    try:
        output = backend.probe(
            prepared, gpu=device_of(gpu) if gpu else None, probe_args=probe_args(cell), log=log
        )
    except (ConfigError, files.DiskFull):
        raise
    except Exception as err:  # noqa: BLE001
        if full := _disk_full(backend, err):
            raise full from None
        return _failure(
            cell,
            backend,
            gpu,
            started,
            log,
            f"probe: {_describe(err, cell, log)}",
            prepared=prepared,
        )
    status, result, reason = interpret(output)
    return CellRun(
        cell=cell,
        status=status,
        result=result,
        reason=reason,
        # what ran: the fingerprint of the copy the backend made, never the file read again
        wheel_sha256=prepared.wheel_sha256,
        probe_version=output.probe_version or _probe_version_or_empty(cell),
        gpu=gpu_name(gpu),
        driver=gpu.driver if gpu else "",
        backend=backend.name,
        started=started,
        seconds_install=prepared.seconds_install,
        seconds_probe=output.seconds,
        log_excerpt=excerpt(log) or output.log_tail,
    )


def release(backend: Backend, prepared: Prepared, *, log: Path) -> None:
    """Free what `prepare` made; a failure here is written to the log and changes no status."""
    try:
        backend.release(prepared)
    except Exception as err:  # noqa: BLE001
        _append(log, f"# torchbisect: release failed: {err!r}\n")


def run_cell(backend: Backend, cell: Cell, *, gpu: Gpu | None, logs_dir: Path) -> CellRun:
    """Prepare, probe and release one cell, in this thread."""
    log = log_path(logs_dir, cell)
    staged = prepare(backend, cell, log=log, gpu=gpu)
    if isinstance(staged, CellRun):
        return staged
    try:
        return probe(backend, staged, gpu=gpu, log=log)
    finally:
        release(backend, staged.prepared, log=log)


def interpret(output: ProbeOutput) -> tuple[RunStatus, ProbeResult | None, str]:
    """(status, result, reason) for what the probe printed and how it exited."""
    code = output.exit_code
    if code < 0:
        return _infra(f"probe killed by signal {signal_name(-code)}")
    if code == _ADAPTER_REFUSED and last_line(output.log_tail).startswith(_ADAPTER_SAYS):
        # probes/script.py could not run the script (gone, not compiling, no statement)
        return _infra(last_line(output.log_tail).removeprefix(_ADAPTER_SAYS))
    if code not in PROBE_EXITS:
        return _infra(
            f"probe exited with status {code} (expected 0, 1 or 125){_said(output.log_tail)}"
        )
    if not output.json_text.strip():
        return _infra(f"probe wrote no JSON document (exit status {code}){_said(output.log_tail)}")
    try:  # checked first: a probe is any script, and its document reaches the page
        result = ProbeResult.from_json(document.check_text(output.json_text))
    except document.Rejected as err:
        return _infra(f"probe JSON unreadable: {err}")
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        return _infra(f"probe JSON unreadable: {type(err).__name__}: {err}")
    said = document.claimed(result.raw)
    if said.exit_code != code:
        return _infra(
            f"probe exit status {code} disagrees with its verdict "
            f"{said.value!r} (expected {said.exit_code})"
        )
    return RunStatus.OK, result, ""


def gpu_name(gpu: Gpu | None) -> str:
    return gpu.name if gpu else "none"


def excerpt(log: Path, lines: int = _EXCERPT_LINES) -> str:
    """The last lines of a cell's log, for the store (the whole log stays on disk)."""
    try:
        text = log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def _failure(
    cell: Cell,
    backend: Backend,
    gpu: Gpu | None,
    started: str,
    log: Path,
    reason: str,
    *,
    prepared: Prepared | None = None,
) -> CellRun:
    _append(log, f"# torchbisect: infrastructure failure: {reason}\n")
    return CellRun(
        cell=cell,
        status=RunStatus.INFRA_FAILURE,
        reason=reason,
        wheel_sha256=prepared.wheel_sha256 if prepared else (cell.sha256 or ""),
        probe_version=_probe_version_or_empty(cell),
        gpu=gpu_name(gpu),
        driver=gpu.driver if gpu else "",
        backend=backend.name,
        started=started,
        seconds_install=prepared.seconds_install if prepared else 0.0,
        log_excerpt=excerpt(log),
    )


def _describe(err: Exception, cell: Cell, log: Path) -> str:
    if isinstance(err, CommandFailed) and err.timed_out:
        return f"timed out after {cell.timeout:g} s: {err}"
    if isinstance(err, TorchbisectError):
        return str(err)
    # A bug, not a known failure: keep the traceback in the log for whoever reads it.
    _append(log, "".join(traceback.format_exception(err)))
    return f"{type(err).__name__}: {err}"


_NO_SPACE = re.compile(
    r"No space left on device|Disk quota exceeded|\(os error (?:28|122)\)"
    r"|\bENOSPC\b|\bEDQUOT\b"
)


def _disk_full(backend: Backend, err: Exception) -> files.DiskFull | None:
    """A full disk under the backend's work folder (an installer said so, or we met it):
    the run stops with one sentence naming the folder, rather than failing every cell."""
    folder = getattr(backend, "workdir", None) or getattr(backend, "cells_dir", None)
    if files.is_full(err):
        return files.disk_full(
            folder or "the work folder (--workdir)", err if isinstance(err, OSError) else None
        )
    said = _NO_SPACE.search(f"{err}\n{getattr(err, 'output', '')}")
    # a probe may print those words: only a work folder that is really full stops the run
    return files.disk_full(folder) if said and folder and files.nearly_full(folder) else None


def _probe_version_or_empty(cell: Cell) -> str:
    try:
        return probe_version(cell.probe)
    except (TorchbisectError, OSError):  # a file gone or changed since: no fingerprint
        return ""


def _infra(reason: str) -> tuple[RunStatus, None, str]:
    return RunStatus.INFRA_FAILURE, None, reason


def _append(log: Path, text: str) -> None:
    # the reason still reaches the store; a log we cannot write changes no status
    with contextlib.suppress(OSError, TorchbisectError):
        files.append(log, mask(text))


def _said(tail: str) -> str:
    line = last_line(tail)
    return f": {line}" if line else ""
