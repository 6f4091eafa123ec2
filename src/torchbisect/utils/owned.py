"""Which folders are torchbisect's: a mark of ownership, and removal that touches nothing else.

A folder torchbisect creates to keep things in (the venv backend's `venvs/` and `downloads/`, a
report's folder) carries a mark: `.torchbisect-owned`, a small file naming the folder's use, and,
in a cache folder, a real `CACHEDIR.TAG` (https://bford.info/cachedir/: backup tools skip it).
`cache --prune` and `report --out` remove or replace only what lies in a marked folder, never
follow a symbolic link out of it, and refuse anything else with one sentence (`NotOurs`, exit 2).

A folder an older torchbisect made has no mark.  It is recognised only by its layout, when that
is unambiguous (`legacy`: a predicate over its entries, given by whoever knows the layout), and
then marked; a folder that holds anything else is refused with a sentence saying what to do.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import sys
from collections.abc import Callable
from pathlib import Path

from ..errors import ConfigError
from . import files
from .words import plain_label

MARK = ".torchbisect-owned"
MAX_MARK_BYTES = 4 * 1048576  # a report's mark lists its files: some thousands of short names
CACHEDIR_TAG = "CACHEDIR.TAG"
_SIGNATURE = "Signature: 8a477f597d28d172789f06886806bc55\n"
_TAG = (
    _SIGNATURE + "# This file is a cache directory tag created by torchbisect.\n"
    "# For information about cache directory tags see https://bford.info/cachedir/\n"
)


class NotOurs(ConfigError):
    """A folder or file torchbisect was asked to remove or replace is not one it made."""


def is_link(path: Path) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(path).st_mode)
    except OSError:
        return False


def marked(folder: Path) -> bool:
    """Whether `folder` is a real folder (not a link) that carries torchbisect's mark."""
    try:
        return stat.S_ISDIR(os.lstat(folder).st_mode) and stat.S_ISREG(
            os.lstat(Path(folder) / MARK).st_mode
        )
    except OSError:
        return False


def claim(
    folder: Path, use: str, *, cache: bool = False, legacy: Callable[[Path], bool] = lambda _: False
) -> bool:
    """Create `folder` (and its parents) when missing and mark it as torchbisect's; an existing
    folder is marked only when it is empty or `legacy` recognises an older torchbisect's layout.
    Whether it is ours now.  A link at `folder` is never claimed."""
    folder = Path(folder)
    if is_link(folder):
        return False
    if marked(folder):
        return True
    try:
        folder.mkdir(parents=True)
    except FileExistsError:
        if not folder.is_dir() or (any(folder.iterdir()) and not legacy(folder)):
            return False
    files.write_text(
        folder / MARK, f"torchbisect {use}: torchbisect may remove or replace what it wrote here\n"
    )
    if cache:
        files.write_text(folder / CACHEDIR_TAG, _TAG)
    return True


def check(
    folder: Path, use: str, *, how: str, legacy: Callable[[Path], bool] = lambda _: False
) -> None:
    """Refuse (NotOurs) to remove or replace anything in `folder` unless it is a marked folder of
    torchbisect's, or an older torchbisect's by its layout (then marked now).  `how`: what the
    user can do instead, the end of the sentence."""
    folder = Path(folder)
    if is_link(folder):
        raise NotOurs(
            f"{folder} is a symbolic link: torchbisect removes nothing through a link "
            f"(to {os.readlink(folder)}); {how}"
        )
    if not folder.exists() or marked(folder):
        return
    if not folder.is_dir():
        raise NotOurs(f"{folder} is not a folder torchbisect made; {how}")
    if not claim(folder, use, legacy=legacy):
        raise NotOurs(
            f"{folder} was not made by torchbisect (it has no {MARK} and holds "
            f"{_example(folder)}, which torchbisect does not write): torchbisect "
            f"removes only what it made; {how}"
        )


def replace_files(
    folder: Path,
    texts: dict[str, str],
    *,
    use: str,
    legacy: Callable[[Path], list[str] | None],
    how: str,
) -> list[Path]:
    """Write `texts` (name relative to `folder` → text) into `folder` all or nothing
    (files.write_all), and remove the files an earlier write listed in the mark and this one
    does not: nothing else there is removed, and an existing file of one of these names that
    torchbisect did not write is refused (NotOurs) before anything is written.

    `legacy(folder)`: for an unmarked folder an older torchbisect wrote, the names it wrote
    there (its files of these names may be replaced, and those others removed); None when the
    folder is not recognised as one."""
    folder = Path(folder)
    if is_link(folder):
        raise NotOurs(
            f"{folder} is a symbolic link: torchbisect writes no report through a link "
            f"(to {os.readlink(folder)}); {how}"
        )
    before = _listed(folder)
    if before is None and folder.is_dir():
        older = legacy(folder)
        before = set(older) if older is not None else set()
        if older is None:
            _refuse_foreign(folder, texts, how=how)
    written = files.write_all({folder / name: text for name, text in texts.items()}, below=folder)
    for name in sorted((before or set()) - set(texts)):
        _remove_file(folder, name)
    files.write_text(
        folder / MARK,
        f"torchbisect {use}: torchbisect may remove or replace what "
        "it wrote here, the files below\n" + "".join(f"{name}\n" for name in sorted(texts)),
    )
    return written


def _listed(folder: Path) -> set[str] | None:
    """The files the mark of `folder` lists (what torchbisect wrote there last); None unmarked.
    The mark is read up to MAX_MARK_BYTES, never through a link; a name no file torchbisect
    writes could have (a NUL or another control character, `..`, an absolute path) is left
    out: it names nothing to remove."""
    if not marked(folder):
        return None
    lines = _read_mark(folder / MARK).splitlines()[1:]
    return {
        line
        for line in lines
        if line
        and plain_label(line)
        and ".." not in Path(line).parts
        and not Path(line).is_absolute()
    }


def _read_mark(mark: Path) -> str:
    try:
        fd = os.open(mark, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as err:
        raise NotOurs(
            f"{mark} cannot be read ({err.strerror}): torchbisect replaces only what "
            "its mark lists; move the folder away and run again"
        ) from None
    with os.fdopen(fd, "rb") as fh:
        raw = fh.read(MAX_MARK_BYTES + 1) if stat.S_ISREG(os.fstat(fd).st_mode) else b""
    if len(raw) > MAX_MARK_BYTES:
        most = MAX_MARK_BYTES // 1048576
        raise NotOurs(
            f"{mark} is larger than any mark torchbisect writes ({most} MiB at most), "
            "so it is not one: torchbisect replaces only what it wrote; move the "
            "folder away and run again"
        )
    return raw.decode("utf-8", errors="replace")


def _refuse_foreign(folder: Path, texts: dict[str, str], *, how: str) -> None:
    for name in texts:
        try:
            mode = os.lstat(folder / name).st_mode
        except OSError:
            continue  # absent: written anew; a link is replaced, its target left as it is
        if not stat.S_ISLNK(mode):
            raise NotOurs(
                f"{folder / name} was not written by torchbisect ({folder} has no "
                f"{MARK}): torchbisect replaces only files it wrote; {how}"
            )


def _remove_file(folder: Path, name: str) -> None:
    """Remove `folder/name`, a file torchbisect wrote, never through a link on the way; then
    its folder when that is left empty."""
    path = folder / name
    if any(is_link(parent) for parent in (path, *path.parents) if folder in parent.parents):
        return
    try:
        if stat.S_ISREG(os.lstat(path).st_mode):
            path.unlink()
    except OSError:
        return
    with contextlib.suppress(OSError):
        if path.parent != folder:
            path.parent.rmdir()  # only when empty


def remove_tree(path: Path) -> None:
    """Remove a folder torchbisect made, without following any link in it (a link is removed,
    its target left); a link at `path` itself is only unlinked."""
    path = Path(path)
    if is_link(path) or not path.exists():
        path.unlink(missing_ok=True)
        return
    shutil.rmtree(path, ignore_errors=True)  # its fd-based walk never follows links


def remove_below(root: Path, *parts: str) -> bool:
    """Remove `root/parts…` (a folder or file torchbisect made under the folder it prunes),
    checked at the moment it goes: `root` and each folder on the way are opened with O_NOFOLLOW
    from the descriptor of the one above, and the last is removed through its parent's
    descriptor — so a `venvs/` swapped for a link after `check` said it is ours is refused
    (NotOurs), never deleted through.  False when it is gone already."""
    fds: list[int] = []
    try:
        fds.append(os.open(root, _FOLDER))
        for part in parts[:-1]:
            fds.append(os.open(part, _FOLDER, dir_fd=fds[-1]))
        mode = os.lstat(parts[-1], dir_fd=fds[-1]).st_mode
        if stat.S_ISLNK(mode) or not stat.S_ISDIR(mode):
            os.unlink(parts[-1], dir_fd=fds[-1])  # a link goes, its target stays
        elif sys.version_info >= (3, 11):
            shutil.rmtree(parts[-1], dir_fd=fds[-1])  # fd-based: follows no link inside
        elif os.path.samestat(os.fstat(fds[-1]), os.lstat(Path(root).joinpath(*parts[:-1]))):
            shutil.rmtree(Path(root).joinpath(*parts))  # 3.10: no dir_fd; checked just before
        else:
            raise OSError(errno.ELOOP, "swapped for a link")
    except FileNotFoundError:
        return False
    except OSError as err:
        if err.errno not in (errno.ELOOP, errno.ENOTDIR):
            raise
        raise NotOurs(
            f"{Path(root).joinpath(*parts)}: a folder on the way became a symbolic "
            f"link (or not a folder) after it was checked, under {root}: torchbisect "
            "removes nothing through a link; nothing more was removed"
        ) from None
    finally:
        for fd in fds:
            os.close(fd)
    return True


_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _example(folder: Path) -> str:
    names = sorted(p.name for p in folder.iterdir())
    shown = ", ".join(repr(n) for n in names[:3])
    return shown + (f" and {len(names) - 3} more" if len(names) > 3 else "")
