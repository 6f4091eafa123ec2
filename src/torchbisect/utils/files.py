"""How torchbisect writes files: whole, never through a planted link, and a full disk is a sentence.

* A whole file (a page, the lock, an export, a marker) is written to a fresh temporary name in
  the same folder — created with O_EXCL | O_NOFOLLOW, so a link planted under that name is never
  followed — and renamed over the target: a reader sees the old file or the new one, never half,
  and a symbolic link planted at the target is replaced by the file, its target left untouched.
* A log is appended with O_NOFOLLOW: a link planted in the logs folder is refused with one
  sentence, never written through (a cell's log is started afresh with `write_text`, which
  replaces such a link).
* A full disk or quota (ENOSPC, EDQUOT, EFBIG) is `DiskFull`: one sentence naming the folder,
  exit status 3 (an infrastructure failure), and the temporary file is removed.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, TypeGuard

from ..errors import InfraError

FULL = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
_NEARLY_FULL = 1024 * 1024  # bytes free below which an I/O error is taken for a full disk


class DiskFull(InfraError):
    """No space (or quota) left where torchbisect writes; `str(err)` names the folder."""


class PlantedLink(InfraError):
    """A symbolic link stands where torchbisect writes a file of its own."""


def disk_full(folder: Path | str, err: OSError | None = None, *, intact: str = "") -> DiskFull:
    """The sentence for a full disk (or quota) under `folder`; `intact` names what was kept."""
    why = (
        os.strerror(err.errno).lower()
        if err is not None and err.errno
        else "no space left on device"
    )
    kept = f"{intact} is intact, and " if intact else ""
    return DiskFull(
        f"{folder}: {why} ({kept}nothing there was half-written); free some space "
        "there, or choose another folder, and run again"
    )


def nearly_full(folder: Path | str) -> bool:
    """Whether the file system under `folder` has (almost) no space or inodes left."""
    try:
        stat = os.statvfs(folder)
    except OSError:
        return False
    return stat.f_bavail * stat.f_frsize < _NEARLY_FULL or bool(stat.f_files and not stat.f_favail)


def is_full(err: BaseException) -> TypeGuard[OSError]:
    return isinstance(err, OSError) and err.errno in FULL


@contextlib.contextmanager
def atomic(path: Path | str, *, binary: bool = False) -> Iterator[IO[Any]]:
    """A file object whose content replaces `path` when the block ends without an error."""
    path = Path(path)
    folder = path.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tmp, fd = _fresh(path)
    except OSError as err:
        if is_full(err):
            raise disk_full(folder, err) from None
        raise
    try:
        opened = os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8")
        with opened as out:
            yield out
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)  # replaces a link at `path` itself, never its target
    except BaseException as err:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if is_full(err):
            raise disk_full(folder, err) from None
        raise


def write_text(path: Path | str, text: str) -> Path:
    """Replace `path` with `text`, atomically (see `atomic`)."""
    with atomic(path) as out:
        out.write(text)
    return Path(path)


def write_all(texts: dict[Path, str], *, below: Path | None = None) -> list[Path]:
    """Write several files that belong together (a page's documents): every one to its
    temporary name first, and only when all are written are they renamed, so a full disk leaves
    the old set whole rather than half old, half new.

    `below`: the folder they all lie in, which the caller checked; then no folder at any level
    below it is followed through a link (`_write_all_below`)."""
    if below is not None:
        return _write_all_below(texts, Path(below))
    written: list[tuple[Path, Path]] = []
    try:
        for path, text in texts.items():
            with _fresh_file(path) as (tmp, out):
                out.write(text)
            written.append((tmp, path))
        for tmp, path in written:
            os.replace(tmp, path)
    except BaseException as err:
        for tmp, _ in written:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        if is_full(err):
            raise disk_full(next(iter(texts)).parent, err) from None
        raise
    return list(texts)


def _write_all_below(texts: dict[Path, str], below: Path) -> list[Path]:
    """`write_all` openat-style: `below` and each folder under it opened with O_NOFOLLOW from
    the descriptor of the one above, each file created and renamed by its folder's descriptor.
    So a folder swapped for a link at any moment (a regression's folder pointing elsewhere) is
    refused (PlantedLink) at the moment it is used, never written through."""
    folders: dict[tuple[str, ...], int] = {}
    written: list[tuple[int, str, str]] = []
    try:
        below.mkdir(parents=True, exist_ok=True)
        folders[()] = _open_folder(below, None, str(below))
        for path, text in texts.items():
            parts = path.relative_to(below).parts
            fd = _folder_fd(folders, below, parts[:-1])
            tmp = f".{parts[-1]}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
            out = os.open(
                tmp,
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                0o666,
                dir_fd=fd,
            )
            written.append((fd, tmp, parts[-1]))
            with os.fdopen(out, "w", encoding="utf-8") as fh:
                fh.write(text)
                fh.flush()
                os.fsync(fh.fileno())
        for fd, tmp, name in written:
            os.replace(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
    except BaseException as err:
        for fd, tmp, _ in written:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=fd)
        if is_full(err):
            raise disk_full(below, err) from None
        raise
    finally:
        for fd in folders.values():
            os.close(fd)
    return list(texts)


def _folder_fd(folders: dict[tuple[str, ...], int], below: Path, parts: tuple[str, ...]) -> int:
    """The descriptor of `below/parts…`, each level made when missing and opened from the one
    above without following a link."""
    for depth in range(1, len(parts) + 1):
        if parts[:depth] not in folders:
            parent = folders[parts[: depth - 1]]
            with contextlib.suppress(FileExistsError):
                os.mkdir(parts[depth - 1], 0o777, dir_fd=parent)
            folders[parts[:depth]] = _open_folder(
                parts[depth - 1], parent, str(below.joinpath(*parts[:depth]))
            )
    return folders[parts]


def _open_folder(name: Path | str, parent: int | None, shown: str) -> int:
    try:
        return os.open(
            name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent
        )
    except OSError as err:
        if err.errno in (errno.ELOOP, errno.ENOTDIR):
            raise PlantedLink(
                f"{shown} is a symbolic link (or not a folder): torchbisect does "
                "not write through links in its folders; remove it and run "
                "again"
            ) from None
        raise


@contextlib.contextmanager
def _fresh_file(path: Path) -> Iterator[tuple[Path, IO[str]]]:
    """A temporary file beside `path`, written and synced; removed again on any error."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp, fd = _fresh(path)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            yield tmp, out
            out.flush()
            os.fsync(out.fileno())
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_bytes(path: Path | str, data: bytes) -> Path:
    with atomic(path, binary=True) as out:
        out.write(data)
    return Path(path)


def append(path: Path | str, text: str) -> None:
    """Append `text` to a log, refusing a symbolic link in its place (see `open_append`)."""
    with open_append(path) as out:
        out.write(text)


@contextlib.contextmanager
def open_append(path: Path | str) -> Iterator[IO[str]]:
    """A log opened for appending (created when missing) that is never a planted link."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(
            path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666
        )
    except OSError as err:
        raise refusal(path, err) from None
    try:
        with os.fdopen(fd, "a", encoding="utf-8") as out:
            yield out
    except OSError as err:
        raise refusal(path, err) from None


def open_new(path: Path | str, *, binary: bool = True, append: bool = False) -> IO[Any]:
    """Open a work file (a download's part file) for writing without following a link there."""
    path = Path(path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    flags |= os.O_APPEND if append else os.O_TRUNC
    try:
        fd = os.open(path, flags, 0o666)
    except OSError as err:
        raise refusal(path, err) from None
    return os.fdopen(fd, ("ab" if append else "wb") if binary else ("a" if append else "w"))


def _fresh(path: Path) -> tuple[Path, int]:
    """A new temporary file beside `path` (its name is ours alone: O_EXCL)."""
    for attempt in range(100):
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{attempt}.{os.urandom(4).hex()}.tmp")
        try:
            return tmp, os.open(
                tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666
            )
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary name", str(path))


def refusal(path: Path, err: OSError) -> Exception:
    """What to raise when opening `path` failed: PlantedLink, DiskFull, or the error itself."""
    if err.errno == errno.ELOOP:
        return PlantedLink(
            f"{path} is a symbolic link: torchbisect does not write through "
            "links in its folders; remove the link and run again"
        )
    if is_full(err):
        return disk_full(path.parent, err)
    return err
