"""One run at a time per store and per workdir: an OS lock on a file beside each.

Two `matrix` runs in one checkout would install the same cells into the same venvs, store the
same cells twice and overwrite each other's logs.  So a command that writes a store or a workdir
first takes `fcntl.flock` on `<path>.lock`; a second one is told who holds it (pid, command, since
when) and stops, or queues behind it with `--wait`.  The kernel drops a flock when its holder dies,
even by `kill -9`, so a crashed run never leaves a lock that has to be deleted by hand.  The file
is removed on release (a published site folder keeps no lock file); whoever opened it just before
the removal notices the file is gone and opens the new one.

A lock belongs to the real file, not to the name it was given: the path is resolved through
every symbolic link first, so a store reached through a link, `./` or `..` has the same lock as
the store itself.  A lock path that is not a regular file (a folder, a FIFO, a device) is one
sentence, never a lock taken on it.
"""

from __future__ import annotations

import fcntl
import json
import os
import stat
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path

from ..errors import Busy, ConfigError
from . import files


def lock_path(path: Path) -> Path:
    """The lock of a store or workdir: `results.sqlite` → `results.sqlite.lock`, beside it."""
    return path.with_name(path.name + ".lock")


@contextmanager
def hold(
    paths: Sequence[Path], *, command: str, wait: bool = False, say: Callable[[str], None] = print
) -> Iterator[None]:
    """Hold the locks of `paths`, in the order given (every command takes them in the same order:
    store, then workdir), until the block ends; each the lock of the real file a path names."""
    with ExitStack() as stack:
        for path in dict.fromkeys(Path(os.path.realpath(p)) for p in paths):
            stack.enter_context(_held(path, command=command, wait=wait, say=say))
        yield


@contextmanager
def _held(path: Path, *, command: str, wait: bool, say: Callable[[str], None]) -> Iterator[None]:
    made = [p for p in reversed(path.parents) if not p.exists()]  # removed again if left empty
    for folder in made:
        folder.mkdir(exist_ok=True)
    fd = _acquire(lock_path(path), path, wait=wait, say=say)
    try:
        holder = {
            "pid": os.getpid(),
            "command": command,
            "since": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        }
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(holder) + "\n").encode(), 0)
        yield
    finally:
        # Removed while still held: a process that opened the old file sees it gone and retries.
        with suppress(FileNotFoundError):
            os.unlink(lock_path(path))
        os.close(fd)
        for folder in reversed(made):  # a run refused at once leaves no empty folder behind
            with suppress(OSError):
                folder.rmdir()


def _acquire(lock: Path, path: Path, *, wait: bool, say: Callable[[str], None]) -> int:
    while True:
        try:  # never through a link planted at the lock's name: its target is not ours
            fd = os.open(
                lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644
            )  # a FIFO there must not block the open
        except IsADirectoryError:
            raise _odd(lock, "a folder") from None
        except OSError as err:
            raise files.refusal(lock, err) from None
        kind = os.fstat(fd).st_mode
        if not stat.S_ISREG(kind):
            os.close(fd)
            raise _odd(
                lock,
                "a FIFO"
                if stat.S_ISFIFO(kind)
                else "a socket"
                if stat.S_ISSOCK(kind)
                else "a device"
                if stat.S_ISCHR(kind) or stat.S_ISBLK(kind)
                else "not a regular file",
            )
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            if not wait:
                os.close(fd)
                raise Busy(
                    f"{path} is in use by {holder}: wait for it to end, or pass --wait "
                    "to start when it does"
                ) from None
            say(f"waiting for {holder} to release {path}")
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
            except BaseException:
                os.close(fd)
                raise
        if _still_there(fd, lock):
            return fd
        os.close(fd)  # its holder removed it while we waited: take the new one


def _odd(lock: Path, what: str) -> ConfigError:
    return ConfigError(
        f"{lock} is {what}, not a lock file: torchbisect makes that file and "
        "removes it again; move what is there away and run again"
    )


def _still_there(fd: int, lock: Path) -> bool:
    try:
        now = os.stat(lock)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (mine.st_dev, mine.st_ino) == (now.st_dev, now.st_ino)


def _holder(fd: int) -> str:
    """Who holds the lock, in words; the holder writes this just after taking it."""
    try:
        info = json.loads(os.pread(fd, 4096, 0).decode() or "{}")
        return f"another run (pid {info['pid']}, `{info['command']}`, since {info['since']})"
    except (ValueError, KeyError, TypeError, OSError):
        return "another torchbisect run"
