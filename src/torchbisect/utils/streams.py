"""Output nobody reads is no failure: a closed stdout, or a pipe whose reader went away.

`torchbisect matrix | head -1`, `plan >&-`, a CI step whose log reader died: the work goes on and
the command ends with the status its work gave (exits.py), quietly.  Before, the first write into
a pipe nobody reads raised BrokenPipeError, which rich turned into `exit(1)` — "affected" to a
gate — and print() into a traceback (250); a stdout closed before the start was `None` to Python.

`quiet_when_unread()` (cli.main, around every command) puts /dev/null on a standard stream's file
descriptor when it is closed at the start or once its reader has gone, so that what is still
written there, by torchbisect or by a child that inherited it, goes nowhere, and no write can
fail again.  A stream that has no file descriptor (a test's capture) is left as it is.
"""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any, TextIO

from ..errors import InfraError

_UNREAD = (errno.EPIPE, errno.EBADF)


class _Unread:
    """A standard stream whose writes end quietly once its reader has gone."""

    def __init__(self, stream: TextIO, fd: int) -> None:
        self._stream, self._fd = stream, fd

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except OSError as err:
            self._gone(err)
            return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as err:
            self._gone(err)

    def _gone(self, err: OSError) -> None:
        unread = err.errno in _UNREAD
        to_devnull(self._fd)  # either way nothing more is tried there
        with suppress(OSError):  # what the buffer still holds goes to /dev/null now
            self._stream.flush()
        if not unread:  # a reader is there, and did not get it: said, never put on a folder
            raise OutputFailed(self._fd, err)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class OutputFailed(InfraError):
    """A standard stream that could not be written (a redirect to a full disk, `/dev/full`, an
    I/O error): exit 3, the stream named, not one of the command's folders."""

    def __init__(self, fd: int, err: OSError) -> None:
        why = os.strerror(err.errno).lower() if err.errno else str(err)
        name = "standard output" if fd == 1 else "standard error"
        super().__init__(
            f"writing to {name} failed ({why}): what the command printed there is lost, and "
            f"the files it wrote are whole; send {name} where it can be written, and run again"
        )


def to_devnull(fd: int) -> None:
    """/dev/null on file descriptor `fd` (1 or 2), in place of a closed one or a broken pipe."""
    null = os.open(os.devnull, os.O_WRONLY)
    if null != fd:
        os.dup2(null, fd)
        os.close(null)


@contextmanager
def quiet_when_unread() -> Iterator[None]:
    """stdout and stderr that never fail a command because nobody reads them; restored after."""
    before = sys.stdout, sys.stderr
    try:
        sys.stdout = _guarded(sys.stdout, 1)
        sys.stderr = _guarded(sys.stderr, 2)
        yield
    finally:
        try:
            for stream in (sys.stdout, sys.stderr):
                if isinstance(stream, _Unread):
                    stream.flush()
        finally:
            sys.stdout, sys.stderr = before


def _guarded(stream: TextIO | None, fd: int) -> TextIO | _Unread | None:
    if stream is None:  # closed before Python started: /dev/null takes its number
        try:
            os.fstat(fd)
        except OSError:
            to_devnull(fd)
        return open(fd, "w", encoding="utf-8", closefd=False)  # noqa: SIM115 - lives as long as sys
    try:
        if stream.fileno() != fd:
            return stream
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is both
        return stream
    return _Unread(stream, fd)
