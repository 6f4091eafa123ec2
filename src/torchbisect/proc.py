"""The one helper that runs subprocesses: echoes the command, captures output, raises a typed error."""

from __future__ import annotations

import os
import shlex
import subprocess
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
    import time

    argv = [str(a) for a in argv]
    line = shlex.join(argv)
    if echo:
        echo(f"$ {line}")
    full_env = {**os.environ, **env} if env else None
    start = time.monotonic()
    try:
        proc = subprocess.run(
            argv,
            env=full_env,
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            timeout=timeout,
            text=True,
            errors="replace",
        )
    except subprocess.TimeoutExpired as exc:
        out = _text(exc.output)
        _append(log, line, out)
        raise CommandFailed(argv, -1, out, timed_out=True) from None
    except FileNotFoundError:
        raise CommandFailed(argv, 127, f"{argv[0]}: command not found") from None
    seconds = time.monotonic() - start
    _append(log, line, proc.stdout)
    if check and proc.returncode != 0:
        raise CommandFailed(argv, proc.returncode, proc.stdout)
    return Completed(argv=tuple(argv), returncode=proc.returncode, output=proc.stdout,
                     seconds=seconds)


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    return data.decode(errors="replace") if isinstance(data, bytes) else data


def _append(log: Path | None, line: str, output: str) -> None:
    if log is None:
        return
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a", encoding="utf-8") as fh:
        fh.write(f"$ {line}\n{output}")
        if output and not output.endswith("\n"):
            fh.write("\n")
