"""What a run will cost, said before it starts: cells, gigabytes of wheels, and time.

Sizes: PyTorch's index pages (PEP 503 HTML) give no file sizes, so each wheel's is asked once
with a HEAD request (its Content-Length) and kept in the lock next to its URL; a re-plan asks
nothing.  A local wheel's size is read from disk.  A HEAD that fails leaves the size unknown and
is said as such: the cost is advice, never a reason to stop.  Time: the median install + probe
seconds of the runs already in the store, times the cells to probe, over the GPUs.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from ..index.fetch import local_path
from ..model import Cell, CellRun, RunStatus
from ..net import HEAD, Deadlines, NetError, request
from ..utils.words import count
from .lock import Lock

_HEAD_WORKERS = 8


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

    @property
    def seconds(self) -> float | None:
        if self.seconds_per_cell is None:
            return None
        return self.to_probe * self.seconds_per_cell / max(self.gpus, 1)


def with_sizes(lock: Lock, *, known: Lock, offline: bool = False) -> Lock:
    """`lock` with every http(s) wheel's size: from `known` (the lock as it was) for the same
    URL, else from a HEAD request (none when `offline`)."""
    sizes_known = {b.url: b.size for b in known.builds.values() if b.size is not None}
    builds = {cid: b if b.size is not None or b.url not in sizes_known else
              dataclasses.replace(b, size=sizes_known[b.url]) for cid, b in lock.builds.items()}
    ask = [cid for cid, b in builds.items() if b.size is None and _remote(b.url)]
    if ask and not offline:
        with ThreadPoolExecutor(min(_HEAD_WORKERS, len(ask))) as pool:
            sizes = pool.map(head_size, [builds[cid].url for cid in ask])
            for cid, size in zip(ask, sizes, strict=True):
                builds[cid] = dataclasses.replace(builds[cid], size=size)
    return Lock(builds=builds)


def head_size(url: str, *, deadlines: Deadlines = HEAD) -> int | None:
    """The Content-Length a HEAD request for `url` answers; None when it does not tell (asked
    once: the size is advice, not worth a wait)."""
    try:
        with request("HEAD", url.split("#", 1)[0], headers={"Accept-Encoding": "identity"},
                     deadlines=deadlines) as answer:
            length = answer.headers.get("content-length", "")
    except NetError:
        return None
    return int(length) if length.isdigit() else None


def estimate(cells: Sequence[Cell], *, stored: Iterable[str], lock: Lock,
             runs: Iterable[CellRun], gpus: int) -> Cost:
    """The cost of probing `cells` minus those in `stored` (ids that already have a verdict)."""
    stored = set(stored)
    todo = [c for c in cells if c.id not in stored]
    # a local wheel (a dev build, a mirror folder) is read where it lies: nothing to download
    sizes = [wheel_size(c, lock) for c in todo if c.url and local_path(c.url) is None]
    timings = [r.seconds_install + r.seconds_probe for r in runs if r.status is RunStatus.OK]
    return Cost(to_probe=len(todo), stored=len(cells) - len(todo), wheels=len(sizes),
                download_bytes=sum(s for s in sizes if s is not None),
                unknown_sizes=sum(s is None for s in sizes),
                seconds_per_cell=statistics.median(timings) if timings else None,
                timed_runs=len(timings), gpus=gpus)


def wheel_size(cell: Cell, lock: Lock) -> int | None:
    """Bytes of the cell's wheel: the lock's for a URL, the file's for a local wheel."""
    path = local_path(cell.url or "")
    if path is not None:
        try:
            return path.stat().st_size
        except OSError:
            return None
    build = lock.get(cell.id)
    return build.size if build is not None and build.url == cell.url else None


def describe(cost: Cost) -> str:
    """One sentence: "28 cells to probe; 2 already have a verdict in the store; 24.6 GB of torch
    wheels to download; about 1 h 5 min (the median of 12 stored runs, 2 min 20 s a cell, on one
    GPU)."  Cells without a wheel (the preinstalled torch) or with a local one download nothing."""
    stored = f"{cost.stored} already have a verdict in the store" if cost.stored else \
        "none stored yet"
    cells = f"{count(cost.to_probe, 'cell')} to probe; {stored}"
    if not cost.to_probe:
        return f"{cells}."
    gb = f"{cost.download_bytes / 1e9:.1f} GB of torch wheels to download" if cost.wheels else \
        "nothing to download"
    if cost.unknown_sizes:
        gb += f" plus {count(cost.unknown_sizes, 'wheel')} of unknown size"
    if cost.seconds is None:
        time = "no stored runs yet to estimate the time from"
    else:
        on = "one GPU" if cost.gpus <= 1 else f"{cost.gpus} GPUs"
        time = (f"about {duration(cost.seconds)} (the median of "
                f"{count(cost.timed_runs, 'stored run')}, {duration(cost.seconds_per_cell)} a "
                f"cell, on {on})")
    return f"{cells}; {gb}; {time}."


def duration(seconds: float) -> str:
    """"45 s", "2 min 20 s", "1 h 5 min"."""
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
