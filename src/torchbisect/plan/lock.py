"""The lock file: the exact wheel (URL + sha256) each cell resolved to, keyed by cell id.

A later run — or the scheduled job months later — installs the same bytes even after the nightly
index pruned them: `resolve` uses a locked build instead of the index.  The file is written with
sorted keys, fixed formatting and no timestamps, so resolving twice without changes gives the
same bytes (and a clean `git diff`).  Wheels whose index publishes no sha256 (nightlies) are
locked with `sha256: null` until `plan --hash` or the installer pins them (`pin_sha256`).
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from packaging.utils import InvalidWheelFilename

from ..errors import ConfigError
from ..links import wheel_name
from ..model import Plan

LOCK_FORMAT = 1
_COMMENT = ("Written by `torchbisect plan` from the matrix file next to it: the exact wheel of "
            "every cell. Commit it; delete an entry to resolve that cell again.")
_FIELDS = ("channel", "version", "cuda", "python", "url")


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

    @property
    def filename(self) -> str:
        return unquote(urlparse(self.url).path.rsplit("/", 1)[-1]) if "://" in self.url else \
            Path(self.url).name


@dataclass(frozen=True)
class Lock:
    builds: Mapping[str, LockedBuild] = field(default_factory=dict)

    @staticmethod
    def default_path(matrix: Path) -> Path:
        """`matrix.yaml` → `matrix.lock.json`, in the same folder."""
        matrix = Path(matrix)
        return matrix.with_name(f"{matrix.stem}.lock.json")

    @classmethod
    def load(cls, path: Path) -> Lock:
        """The lock at `path`, or an empty one when there is no file yet."""
        path = Path(path)
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return cls()
        except (OSError, ValueError) as err:
            raise ConfigError(_bad(path, f"not JSON: {err}")) from None
        return cls(builds=_builds(path, doc))

    @classmethod
    def from_plan(cls, plan: Plan) -> Lock:
        """Every cell of the plan that has a wheel; nothing else (the lock mirrors the matrix)."""
        return cls(builds={c.id: LockedBuild(channel=c.channel.value, version=c.version,
                                             cuda=c.cuda, python=c.python, url=c.url,
                                             sha256=c.sha256, date=c.date, index=c.index_url)
                           for c in plan.cells if c.url})

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
        doc = {"format": LOCK_FORMAT, "comment": _COMMENT,
               "builds": {k: _entry(b) for k, b in self.builds.items()}}
        return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=True) + "\n"

    def save(self, path: Path) -> bool:
        """Write the lock; False (and the file untouched) when it already says the same."""
        path = Path(path)
        text = self.dumps()
        try:
            if path.read_text(encoding="utf-8") == text:
                return False
        except (OSError, UnicodeDecodeError):
            pass
        # A name of our own: two runs saving at once must not rename each other's file away.
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
        try:
            tmp.write_text(text, encoding="utf-8")
            tmp.replace(path)  # atomic: a crash never leaves half a lock
        finally:
            tmp.unlink(missing_ok=True)
        return True


def pin_sha256(path: Path, cell_id: str, sha256: str) -> None:
    """Record the sha256 the installer computed, for a cell the lock has without one."""
    lock = Lock.load(path)
    build = lock.get(cell_id)
    if build is not None and build.sha256 is None:
        lock.pinned(cell_id, sha256).save(path)


def _entry(build: LockedBuild) -> dict[str, Any]:
    # Without a size the entry reads as before sizes were recorded: older locks stay unchanged.
    entry = asdict(build)
    if entry["size"] is None:
        del entry["size"]
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
        try:
            out[cell_id] = LockedBuild(**entry)
        except TypeError:
            raise ConfigError(_bad(path, f"entry {cell_id!r} has unknown keys")) from None
        if not isinstance(entry.get("size", 0), int | None):
            raise ConfigError(_bad(path, f"the size of entry {cell_id!r} is not a whole number"))
        if not _is_wheel(entry["url"]):  # resolve and the backends use it as a file name
            raise ConfigError(_bad(path, f"the url of entry {cell_id!r} does not end in a wheel "
                                         "file name"))
    return out


def _is_wheel(url: str) -> bool:
    from ..index.fetch import Wheel  # resolve reads the entry with Wheel.parse: it must agree

    name = wheel_name(url)
    try:
        return name is not None and bool(Wheel.parse(name, url))
    except InvalidWheelFilename:
        return False


def _bad(path: Path, why: str) -> str:
    return (f"{path} is not a torchbisect lock file ({why}); delete it and run "
            "`torchbisect plan` again")
