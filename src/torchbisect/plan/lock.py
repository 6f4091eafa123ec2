"""The lock file: the exact wheel (URL + sha256) each cell resolved to, keyed by cell id.

A later run — or the scheduled job months later — installs the same bytes even after the nightly
index pruned them: `resolve` uses a locked build instead of the index.  The file is written with
sorted keys, fixed formatting and no timestamps, so resolving twice without changes gives the
same bytes (and a clean `git diff`).  Wheels whose index publishes no sha256 (nightlies) are
locked with `sha256: null` until `plan --hash` or the installer pins them (`pin_sha256`).
Beside a wheel the lock keeps what `plan` learned to say its cost, so a re-plan asks nothing:
`size` (bytes) and `deps`, the CUDA libraries and triton its metadata pins, each with the file
and size found on its index; a lock written before either was kept still loads.  A file the index
had yanked keeps the reason (`yanked`), so an offline plan still says so.
A URL's credentials (`https://user:password@mirror/`) are never written: `url` and `index` are
kept without their userinfo, and the runner sends the credentials matrix.yaml gives for that
origin (net/credentials.py), as it does for the index pages.

Several runs may write one lock at once (four `plan --hash`, shards pinning what they hashed):
every write is a read-modify-write under an exclusive `fcntl.flock` on the lock's folder
(`_exclusive`), which re-reads the file and keeps the pins it holds for the same wheels, so no
pin is lost; the file itself is replaced atomically (`files.write_text`).  Reading is bounded:
a lock larger than `MAX_BYTES` or nested deeper than `MAX_DEPTH` is one sentence.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from packaging.utils import InvalidWheelFilename

from ..errors import ConfigError
from ..model import Plan
from ..net.credentials import split as without_userinfo
from ..net.links import wheel_name
from ..probe import document
from ..utils import files

LOCK_FORMAT = 1
_COMMENT = (
    "Written by `torchbisect plan` from the matrix file next to it: the exact wheel of "
    "every cell. Commit it; delete an entry to resolve that cell again."
)
_FIELDS = ("channel", "version", "cuda", "python", "url")
MAX_BYTES = 64 * 1024 * 1024  # a lock of every nightly since 2023 on every tag is ~10 MB
MAX_DEPTH = 8  # lock → builds → entry → value is 3


def lock_path(
    matrix: Path, *, lock: Path | None = None, lock_dir: Path | None = None, kind: str | None = None
) -> Path:
    """Where a plan's lock lives: `lock` (`--lock`) when given; a runner kind's is
    `<lock_dir>/<kind>.lock.json`, the folder defaulting to `<matrix>.locks/` beside the matrix
    file; else `<matrix>.lock.json` beside it (`matrix.yaml` → `matrix.lock.json`)."""
    if lock is not None:
        return Path(lock)
    matrix = Path(matrix)
    if kind is not None:
        folder = lock_dir if lock_dir is not None else matrix.with_name(f"{matrix.stem}.locks")
        return Path(folder) / f"{kind}.lock.json"
    return matrix.with_name(f"{matrix.stem}.lock.json")


@dataclass(frozen=True, kw_only=True)
class LockedDep:
    """A wheel a torch wheel's metadata pins and a first run downloads beside it (deps.py)."""

    name: str  # normalized: "nvidia-cublas-cu12", "triton"
    version: str | None  # the `==` pin; None when the requirement pins no exact version
    url: str | None = None  # the file picked on the torch wheel's index; None when not found
    size: int | None = None  # bytes; None when unknown


@dataclass(frozen=True, kw_only=True)
class LockedBuild:
    channel: str  # Channel value
    version: str  # "2.10.0.dev20250801+cu128"
    cuda: str
    python: str  # "3.12"
    url: str  # wheel URL or local path
    sha256: str | None = None
    date: str | None = None  # nightly date YYYY-MM-DD
    index: str | None = None  # the index it was listed on (where its dependencies come from)
    size: int | None = None  # bytes, from a HEAD request (`cost.with_sizes`); omitted if unknown
    # what its metadata pins (`deps.with_deps`); None, omitted: not learned (no metadata, offline)
    deps: tuple[LockedDep, ...] | None = None
    yanked: str | None = None  # the index's yank reason ("" for none given); omitted: not yanked

    @property
    def filename(self) -> str:
        return (
            unquote(urlparse(self.url).path.rsplit("/", 1)[-1])
            if "://" in self.url
            else Path(self.url).name
        )


@dataclass(frozen=True)
class Lock:
    builds: Mapping[str, LockedBuild] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> Lock:
        """The lock at `path`, or an empty one when there is no file yet."""
        path = Path(path)
        try:
            doc = document.parse(
                document.read_text(path, max_bytes=MAX_BYTES),
                max_bytes=MAX_BYTES,
                max_depth=MAX_DEPTH,
            )
        except FileNotFoundError:
            return cls()
        except document.Rejected as err:
            raise ConfigError(_bad(path, str(err))) from None
        except OSError as err:
            raise ConfigError(_bad(path, f"cannot read it: {err.strerror}")) from None
        return cls(builds=_builds(path, doc))

    @classmethod
    def from_plan(cls, plan: Plan) -> Lock:
        """Every cell of the plan that has a wheel; nothing else (the lock mirrors the matrix)."""
        return cls(
            builds={
                c.id: LockedBuild(
                    channel=c.channel.value,
                    version=c.version,
                    cuda=c.cuda,
                    python=c.python,
                    url=c.url,
                    sha256=c.sha256,
                    date=c.date,
                    index=c.index_url,
                    yanked=c.yanked,
                )
                for c in plan.cells
                if c.url
            }
        )

    def get(self, cell_id: str) -> LockedBuild | None:
        return self.builds.get(cell_id)

    def over(self, older: Lock) -> Lock:
        """This lock, with `older`'s pins for the cells this one does not have (e.g. the lock a
        previous CI run kept: its nightlies stay installable after the index pruned them)."""
        return Lock(builds={**older.builds, **self.builds})

    def pinned(self, cell_id: str, sha256: str) -> Lock:
        """A copy with `sha256` recorded for `cell_id` (after the installer hashed the download)."""
        builds = dict(self.builds)
        builds[cell_id] = replace(builds[cell_id], sha256=sha256.lower())
        return Lock(builds=builds)

    def dumps(self) -> str:
        doc = {
            "format": LOCK_FORMAT,
            "comment": _COMMENT,
            "builds": {k: _entry(b) for k, b in self.builds.items()},
        }
        return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=True) + "\n"

    def save(self, path: Path) -> bool:
        """Write the lock; False (and the file untouched) when it already says the same.

        Under the folder's lock, pins the file holds for wheels this lock has unpinned (another
        run hashed them meanwhile) are kept: concurrent writers lose no pin.
        """
        path = Path(path)
        with _exclusive(path):
            return self.kept_pins(_current(path))._write(path)

    def kept_pins(self, other: Lock) -> Lock:
        """This lock, with `other`'s sha256 for the same wheel (URL) where this one has none."""
        builds = dict(self.builds)
        for cell_id, build in self.builds.items():
            theirs = other.get(cell_id)
            if build.sha256 is None and theirs and theirs.url == build.url and theirs.sha256:
                builds[cell_id] = replace(build, sha256=theirs.sha256)
        return Lock(builds=builds)

    def _write(self, path: Path) -> bool:
        text = self.dumps()
        try:
            if path.read_text(encoding="utf-8") == text:
                return False
        except (OSError, UnicodeDecodeError):
            pass
        files.write_text(path, text)  # atomic: a crash never leaves half a lock
        return True


def pin_sha256(path: Path, cell_id: str, sha256: str) -> None:
    """Record the sha256 the installer computed, for a cell the lock has without one."""
    path = Path(path)
    with _exclusive(path):
        lock = Lock.load(path)
        build = lock.get(cell_id)
        if build is not None and build.sha256 is None:
            lock.pinned(cell_id, sha256)._write(path)


@contextlib.contextmanager
def _exclusive(path: Path) -> Iterator[None]:
    """Hold an exclusive flock on the lock's folder (no extra file beside a committed lock);
    released when closed, or when the process dies."""
    folder = path.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as err:
        raise ConfigError(
            f"cannot open the folder of the lock file {path} "
            f"({err.strerror}); create it or pass another --lock"
        ) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _current(path: Path) -> Lock:
    """What the file says now; a file we cannot read is replaced, as it always was."""
    try:
        return Lock.load(path)
    except ConfigError:
        return Lock()


def _entry(build: LockedBuild) -> dict[str, Any]:
    # Without a size the entry reads as before sizes were recorded: older locks stay unchanged.
    entry = asdict(build)
    for key in ("url", "index"):  # a committed file: no password, whoever built the lock
        if entry[key]:
            entry[key] = without_userinfo(entry[key])[0]
    for key in ("size", "deps", "yanked"):
        if entry[key] is None:
            del entry[key]
    for dep in entry.get("deps") or ():
        if dep["url"]:
            dep["url"] = without_userinfo(dep["url"])[0]
    return entry


def _builds(path: Path, doc: Any) -> dict[str, LockedBuild]:
    if not isinstance(doc, dict) or doc.get("format") != LOCK_FORMAT:
        raise ConfigError(_bad(path, f"expected format {LOCK_FORMAT}"))
    builds = doc.get("builds")
    if not isinstance(builds, dict):
        raise ConfigError(_bad(path, "no `builds` mapping"))
    out = {}
    for cell_id, entry in builds.items():
        if not isinstance(entry, dict) or not all(isinstance(entry.get(k), str) for k in _FIELDS):
            raise ConfigError(_bad(path, f"entry {cell_id!r} lacks one of {', '.join(_FIELDS)}"))
        deps = _deps(path, cell_id, entry.get("deps"))
        try:
            fields: dict[str, Any] = {
                k: without_userinfo(v)[0] if k in ("url", "index") and isinstance(v, str) else v
                for k, v in entry.items()
                if k != "deps"
            }
            out[cell_id] = LockedBuild(**fields, **deps)
        except TypeError:
            raise ConfigError(_bad(path, f"entry {cell_id!r} has unknown keys")) from None
        if not isinstance(entry.get("yanked"), str | None):
            raise ConfigError(_bad(path, f"the yanked of entry {cell_id!r} is not text"))
        if not isinstance(entry.get("size", 0), int | None):
            raise ConfigError(_bad(path, f"the size of entry {cell_id!r} is not a whole number"))
        if not _is_wheel(entry["url"]):  # resolve and the backends use it as a file name
            raise ConfigError(
                _bad(path, f"the url of entry {cell_id!r} does not end in a wheel file name")
            )
    return out


def _deps(path: Path, cell_id: str, deps: Any) -> dict[str, Any]:
    """`{"deps": …}` as LockedDeps ({} when the entry has none: a lock older than deps)."""
    if deps is None:
        return {}
    typed = {
        "name": (str,),
        "version": (str, type(None)),
        "url": (str, type(None)),
        "size": (int, type(None)),
    }
    if not isinstance(deps, list) or not all(
        isinstance(d, dict)
        and set(d) <= set(typed)
        and isinstance(d.get("name"), str)
        and all(isinstance(d.get(k), t) for k, t in typed.items())
        for d in deps
    ):
        raise ConfigError(
            _bad(
                path,
                f"the deps of entry {cell_id!r} are not a list of {{name, version, url, size}}",
            )
        )
    return {"deps": tuple(LockedDep(**d) for d in deps)}


def _is_wheel(url: str) -> bool:
    from ..index.pages import Wheel  # resolve reads the entry with Wheel.parse: it must agree

    name = wheel_name(url)
    try:
        return name is not None and bool(Wheel.parse(name, url))
    except InvalidWheelFilename:
        return False


def _bad(path: Path, why: str) -> str:
    return (
        f"{path} is not a torchbisect lock file ({why}); delete it and run `torchbisect plan` again"
    )
