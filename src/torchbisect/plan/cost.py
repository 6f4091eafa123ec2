"""What a run will cost, said before it starts: cells, gigabytes to download, and time.

Sizes: PyTorch's index pages (PEP 503 HTML) give no file sizes, so each wheel's is asked once
with a HEAD request (its Content-Length) and kept in the lock next to its URL; a re-plan asks
nothing.  A local wheel's size is read from disk.  A HEAD that fails leaves the size unknown and
is said as such: the cost is advice, never a reason to stop.  Beside each torch wheel a first
run downloads the CUDA libraries and triton its metadata pins (deps.py, kept in the lock too),
but each pinned file once: uv caches it, so a second cell of the same CUDA tag pinning the same
version downloads nothing new; a cell installed `--no-deps` over an image (`overlay`) downloads
none.  The figures are said per CUDA tag, then in total.  Time: the median install + probe
seconds of the runs already in the store, times the cells to probe, over the GPUs.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from ..index.fetch import local_path
from ..model import Cell, CellRun, RunStatus
from ..utils.words import count
from .deps import TRITON, file_size, head_size
from .lock import Lock, LockedDep

_HEAD_WORKERS = 8


@dataclass(frozen=True, kw_only=True)
class TagCost:
    """What the cells to probe of one CUDA tag download: their torch wheels, and the CUDA
    libraries and triton files first pinned by them (a file counted once in the whole plan)."""

    tag: str  # "cu126"; "" for a wheel of no known tag
    wheels: int = 0
    wheel_bytes: int = 0
    wheel_unknown: int = 0  # torch wheels of unknown size
    libraries: int = 0  # distinct nvidia-* files
    library_bytes: int = 0
    triton: int = 0  # distinct triton / pytorch-triton files
    triton_bytes: int = 0
    dep_unknown: int = 0  # of the libraries and triton files, those of unknown size or pin
    no_metadata: int = 0  # torch wheels whose dependencies are unknown (no metadata read)
    overlay: int = 0  # torch wheels installed --no-deps over an image: no dependencies

    @property
    def bytes(self) -> int:
        return self.wheel_bytes + self.library_bytes + self.triton_bytes

    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "bytes": self.bytes}


@dataclass(frozen=True, kw_only=True)
class Cost:
    to_probe: int
    stored: int
    wheels: int  # cells to probe whose wheel is downloaded (not preinstalled, not a local file)
    download_bytes: int  # the wheels of the cells to probe whose size is known
    unknown_sizes: int  # cells to probe with a wheel of unknown size
    seconds_per_cell: float | None  # median install + probe of stored runs; None without any
    timed_runs: int
    gpus: int
    tags: tuple[TagCost, ...] = ()  # per CUDA tag, torch wheels and what they pull in

    @property
    def dependency_bytes(self) -> int:
        return sum(t.library_bytes + t.triton_bytes for t in self.tags)

    @property
    def seconds(self) -> float | None:
        if self.seconds_per_cell is None:
            return None
        return self.to_probe * self.seconds_per_cell / max(self.gpus, 1)

    def to_json(self) -> dict[str, Any]:
        """The figures `describe` says, for `plan --json`."""
        return {
            "to_probe": self.to_probe,
            "stored": self.stored,
            "wheels": self.wheels,
            "wheel_bytes": self.download_bytes,
            "wheel_unknown": self.unknown_sizes,
            "dependency_bytes": self.dependency_bytes,
            "download_bytes": self.download_bytes + self.dependency_bytes,
            "seconds": self.seconds,
            "seconds_per_cell": self.seconds_per_cell,
            "timed_runs": self.timed_runs,
            "gpus": self.gpus,
            "by_cuda": [t.to_json() for t in self.tags],
        }


def with_sizes(lock: Lock, *, known: Lock, offline: bool = False) -> Lock:
    """`lock` with every http(s) wheel's size: from `known` (the lock as it was) for the same
    URL, else from a HEAD request (none when `offline`)."""
    sizes_known = {b.url: b.size for b in known.builds.values() if b.size is not None}
    builds = {
        cid: b
        if b.size is not None or b.url not in sizes_known
        else dataclasses.replace(b, size=sizes_known[b.url])
        for cid, b in lock.builds.items()
    }
    ask = [cid for cid, b in builds.items() if b.size is None and _remote(b.url)]
    if ask and not offline:
        with ThreadPoolExecutor(min(_HEAD_WORKERS, len(ask))) as pool:
            sizes = pool.map(head_size, [builds[cid].url for cid in ask])
            for cid, size in zip(ask, sizes, strict=True):
                builds[cid] = dataclasses.replace(builds[cid], size=size)
    return Lock(builds=builds)


def estimate(
    cells: Sequence[Cell], *, stored: Iterable[str], lock: Lock, runs: Iterable[CellRun], gpus: int
) -> Cost:
    """The cost of probing `cells` minus those in `stored` (run names, `Cell.run_name`, that
    already have a verdict)."""
    stored = set(stored)
    todo = [c for c in cells if c.run_name not in stored]
    # a local wheel (a dev build, a mirror folder) is read where it lies: nothing to download;
    # a build probed by several probes is downloaded once
    fetched = list({c.id: c for c in todo if c.url and local_path(c.url) is None}.values())
    sizes = [wheel_size(c, lock) for c in fetched]
    timings = [r.seconds_install + r.seconds_probe for r in runs if r.status is RunStatus.OK]
    return Cost(
        to_probe=len(todo),
        stored=len(cells) - len(todo),
        wheels=len(sizes),
        download_bytes=sum(s for s in sizes if s is not None),
        unknown_sizes=sum(s is None for s in sizes),
        seconds_per_cell=statistics.median(timings) if timings else None,
        timed_runs=len(timings),
        gpus=gpus,
        tags=by_tag(fetched, lock),
    )


def by_tag(cells: Sequence[Cell], lock: Lock) -> tuple[TagCost, ...]:
    """Per CUDA tag (in the plan's order), what its cells download; each dependency file is
    counted where it is first pinned."""
    seen: set[tuple[str | None, ...]] = set()
    tags: dict[str, dict[str, int]] = {}
    for cell in cells:
        t = tags.setdefault(
            cell.cuda,
            dict.fromkeys((f.name for f in dataclasses.fields(TagCost) if f.name != "tag"), 0),
        )
        t["wheels"] += 1
        size = wheel_size(cell, lock)
        if size is None:
            t["wheel_unknown"] += 1
        else:
            t["wheel_bytes"] += size
        build = lock.get(cell.id)
        if build is not None and build.url != cell.url:
            build = None  # the lock's entry is another wheel's: its pins are not this one's
        if cell.overlay:
            t["overlay"] += 1
        elif build is None or build.deps is None:
            t["no_metadata"] += 1
        else:
            for dep in build.deps:
                key = (dep.url,) if dep.url else (build.index, dep.name, dep.version)
                if key not in seen:
                    seen.add(key)
                    _count(t, dep)
    return tuple(TagCost(tag=tag, **t) for tag, t in tags.items())


def _count(t: dict[str, int], dep: LockedDep) -> None:
    kind = "triton" if dep.name in TRITON else "libraries"
    t[kind] += 1
    if dep.size is None or dep.version is None:
        t["dep_unknown"] += 1
    else:
        t["triton_bytes" if kind == "triton" else "library_bytes"] += dep.size


def wheel_size(cell: Cell, lock: Lock) -> int | None:
    """Bytes of the cell's wheel: the lock's for a URL, the file's for a local wheel."""
    path = local_path(cell.url or "")
    if path is not None:
        return file_size(path)
    build = lock.get(cell.id)
    return build.size if build is not None and build.url == cell.url else None


def describe(cost: Cost) -> str:
    """One line per CUDA tag ("cu126: 9 torch wheels 7.4 GB + 14 CUDA libraries 3.1 GB + triton
    0.3 GB"), then one sentence: "28 cells to probe; 2 already have a verdict in the store;
    24.6 GB to download (…); about 1 h 5 min (the median of 12 stored runs, 2 min 20 s a cell,
    on one GPU)."  Cells without a wheel (the preinstalled torch) or with a local one download
    nothing."""
    stored = (
        f"{cost.stored} already have a verdict in the store" if cost.stored else "none stored yet"
    )
    cells = f"{count(cost.to_probe, 'cell')} to probe; {stored}"
    if not cost.to_probe:
        return f"{cells}."
    total, per_cell = cost.seconds, cost.seconds_per_cell  # both None, or neither
    if total is None or per_cell is None:
        time = "no stored runs yet to estimate the time from"
    else:
        on = "one GPU" if cost.gpus <= 1 else f"{cost.gpus} GPUs"
        time = (
            f"about {duration(total)} (the median of "
            f"{count(cost.timed_runs, 'stored run')}, {duration(per_cell)} a "
            f"cell, on {on})"
        )
    return "\n".join([*(_tag_line(t) for t in cost.tags), f"{cells}; {_download(cost)}; {time}."])


def _download(cost: Cost) -> str:
    if not cost.wheels:
        return "nothing to download"
    if cost.dependency_bytes:
        said = (
            f"{_gb(cost.download_bytes + cost.dependency_bytes)} to download "
            f"({_gb(cost.download_bytes)} of torch wheels, {_gb(cost.dependency_bytes)} "
            "of CUDA libraries and triton, each file once)"
        )
    else:
        said = f"{_gb(cost.download_bytes)} of torch wheels to download"
    unknown = []
    if cost.unknown_sizes:
        unknown.append(f"{count(cost.unknown_sizes, 'wheel')} of unknown size")
    no_metadata = sum(t.no_metadata for t in cost.tags)
    if no_metadata:
        unknown.append(f"the CUDA libraries of {count(no_metadata, 'wheel')}, unknown")
    dep_unknown = sum(t.dep_unknown for t in cost.tags)
    if dep_unknown:
        unknown.append(f"{count(dep_unknown, 'dependency file')} of unknown size")
    return said + (" plus " + ", ".join(unknown) if unknown else "")


def _tag_line(t: TagCost) -> str:
    """ "cu126: 9 torch wheels 7.4 GB + 14 CUDA libraries 3.1 GB + triton 0.3 GB", and what is
    unknown or left out on indented lines below it (each under 80 columns in the usual case)."""
    parts = [f"{count(t.wheels, 'torch wheel')} {_gb(t.wheel_bytes)}"]
    if t.libraries:
        parts.append(
            f"{count(t.libraries, 'CUDA library', 'CUDA libraries')} {_gb(t.library_bytes)}"
        )
    if t.triton:
        parts.append(
            f"triton {_gb(t.triton_bytes)}"
            if t.triton == 1
            else f"{count(t.triton, 'triton wheel')} {_gb(t.triton_bytes)}"
        )
    notes = []
    if t.wheel_unknown:
        notes.append(f"{count(t.wheel_unknown, 'torch wheel')} of unknown size")
    if t.dep_unknown:
        notes.append(f"{count(t.dep_unknown, 'dependency file')} of unknown size")
    if t.no_metadata:
        notes.append(f"{count(t.no_metadata, 'wheel')} without metadata: CUDA libraries unknown")
    if t.overlay:
        notes.append(f"{count(t.overlay, 'wheel')} --no-deps over an image: no CUDA libraries")
    line = f"{t.tag or 'no CUDA tag'}: " + " + ".join(parts)
    return "\n  ".join([line, *notes])


def _gb(n: int) -> str:
    return f"{n / 1e9:.1f} GB"


def duration(seconds: float) -> str:
    """ "45 s", "2 min 20 s", "1 h 5 min"."""
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    minutes, secs = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {secs} s" if secs else f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"


def _remote(url: str) -> bool:
    return url.startswith(("http://", "https://"))
