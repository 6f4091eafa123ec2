"""The one helper that runs subprocesses: echoes the command, captures output, raises a typed error.

Each command runs in its own process group, so a timeout or a stop ends the whole tree (the
probe's per-case children, uv's workers), not only the process we started.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from .errors import CommandFailed

Echo = Callable[[str], None]


@dataclass(frozen=True, kw_only=True)
class Completed:
    argv: tuple[str, ...]
    returncode: int
    output: str  # stdout and stderr, interleaved
    seconds: float


def run(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    timeout: float | None = None,
    log: Path | None = None,
    echo: Echo | None = None,
    check: bool = True,
) -> Completed:
    """Run `argv`, appending its output to `log`; raise CommandFailed on failure when `check`.

    `env` entries are added to the current environment, not substituted for it.
    """
    argv = [str(a) for a in argv]
    line = shlex.join(argv)
    if echo:
        echo(f"$ {line}")
    full_env = {**os.environ, **env} if env else None
    start = time.monotonic()
    try:
        child = subprocess.Popen(argv, env=full_env, cwd=cwd, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True,
                                 errors="replace", start_new_session=True)
    except FileNotFoundError:
        raise CommandFailed(argv, 127, f"{argv[0]}: command not found") from None
    with _LOCK:
        _LIVE.add(child)
    try:
        output, _ = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _signal_group(child, signal.SIGKILL)
        output, _ = child.communicate()
        _append(log, line, output)
        raise CommandFailed(argv, -1, output, timed_out=True) from None
    except BaseException:  # KeyboardInterrupt: leave nothing running behind us
        _signal_group(child, signal.SIGKILL)
        child.wait()
        raise
    finally:
        with _LOCK:
            _LIVE.discard(child)
    seconds = time.monotonic() - start
    _append(log, line, output)
    if check and child.returncode != 0:
        raise CommandFailed(argv, child.returncode, output)
    return Completed(argv=tuple(argv), returncode=child.returncode, output=output,
                     seconds=seconds)


_LIVE: set[subprocess.Popen] = set()
_LOCK = threading.Lock()


def live_count() -> int:
    """How many commands started by `run` are still running (in any thread)."""
    with _LOCK:
        return len(_LIVE)


def signal_all(sig: int) -> None:
    """Send `sig` to the process group of every running command (a stop from another thread)."""
    with _LOCK:
        children = list(_LIVE)
    for child in children:
        _signal_group(child, sig)


def _signal_group(child: subprocess.Popen, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(child.pid, sig)


def _append(log: Path | None, line: str, output: str) -> None:
    if log is None:
        return
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a", encoding="utf-8") as fh:
        fh.write(f"$ {line}\n{output}")
        if output and not output.endswith("\n"):
            fh.write("\n")
