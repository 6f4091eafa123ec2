"""Errors a user can cause or meet, each with its own exit status (exits.py) and a message that
says what to do.

The CLI (`torchbisect.cli.main`) is the one place that turns these into one printed sentence and an
exit status; nothing else prints tracebacks for them.  Any other exception is torchbisect's own
failure: main writes its traceback to a file and exits with `Exit.FAILED`, which no verdict shares.
"""

from __future__ import annotations

from .exits import Exit


class TorchbisectError(Exception):
    """Base class: `str(err)` is the one sentence shown to the user; each class names its status
    (a subclass that names none is a mistake to fix)."""

    exit_code: Exit = Exit.MISTAKE


class ConfigError(TorchbisectError):
    """A bad matrix.yaml, lock file or command-line flag."""

    exit_code = Exit.MISTAKE


class CannotTell(TorchbisectError):
    """Nothing can be measured where it was asked (an interpreter without torch): the probe's own
    "cannot tell", 125, as `git bisect run` reads it and as the probe script exits there."""

    exit_code = Exit.CANNOT_TELL


class ResolveError(TorchbisectError):
    """A requested build does not exist on its index (e.g. an unknown stable version)."""

    exit_code = Exit.MISTAKE


class InfraError(TorchbisectError):
    """Infrastructure failed: cells could not be installed or probed. Never a verdict."""

    exit_code = Exit.NO_VERDICT


class IndexUnreachable(TorchbisectError):
    """A wheel index did not answer after retries; nothing is concluded from a partial answer."""

    exit_code = Exit.INDEX_UNREACHABLE


class Busy(InfraError):
    """Another torchbisect process holds the store or workdir this run needs (utils/runlock.py)."""


class BackendUnavailable(TorchbisectError):
    """The requested backend cannot run here (no Docker engine, no uv, no NVIDIA toolkit)."""

    exit_code = Exit.BACKEND_UNAVAILABLE


class NoTorch(BackendUnavailable):
    """The interpreter whose torch is to be probed has none: nothing can be measured there, so
    "cannot tell" (125, as the probe script itself exits under it), from every command alike;
    a BackendUnavailable for the code that asks whether a torch is there."""

    exit_code = Exit.CANNOT_TELL


class CommandFailed(InfraError):
    """A subprocess exited non-zero; carries its exit status and the tail of its output."""

    def __init__(self, argv: list[str], returncode: int, output: str, *, timed_out: bool = False):
        self.argv = list(argv)
        self.returncode = returncode
        self.output = output
        self.timed_out = timed_out
        what = "timed out" if timed_out else f"exited with status {returncode}"
        tail = output.strip().splitlines()[-1:] if output.strip() else []
        suffix = f": {tail[0]}" if tail else ""
        from .masking import mask

        super().__init__(mask(f"`{_short(argv)}` {what}{suffix}"))


def _short(argv: list[str], limit: int = 120) -> str:
    text = " ".join(argv)
    return text if len(text) <= limit else text[: limit - 1] + "…"
