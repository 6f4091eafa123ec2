"""Runs from probe JSON documents on disk, for a page without a store (`report --probe-json`).

A probe run by hand (or recorded for the tests) has no cell: the cell is inferred from the probe's
own `env`: channel from the version string, CUDA tag from its local label, date from
`.devYYYYMMDD`.  A recorded document passes the same gate as a live probe's
(`probe/document.py`: size, depth, types, capped and masked strings); one that fails is one
sentence naming the file.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from pathlib import Path

from .. import cells
from ..errors import ConfigError
from ..model import Cell, CellRun, Channel, ProbeResult, RunStatus
from ..outcome import BisectResult
from ..probe import document

_DEV = re.compile(r"\.dev(\d{4})(\d{2})(\d{2})")


def cell_for(version: str, python: str) -> Cell:
    """`2.15.0+cu132` → stable-2.15.0-cu132-cp312; `2.11.0a0+git…` (an NGC image) → preinstalled."""
    py = ".".join(python.split(".")[:2])
    cuda = cells.build_tag(version)
    if m := _DEV.search(version):
        day = "-".join(m.groups())
        return Cell(
            id=cells.nightly(day, cuda or "unknown", py),
            channel=Channel.NIGHTLY,
            version=version,
            cuda=cuda,
            python=py,
            date=day,
        )
    base = version.split("+", 1)[0]
    if cuda and re.fullmatch(r"\d+(\.\d+)*", base):
        return Cell(
            id=cells.release(Channel.STABLE, base, cuda, py),
            channel=Channel.STABLE,
            version=version,
            cuda=cuda,
            python=py,
        )
    return Cell(
        id=cells.preinstalled(version, py),
        channel=Channel.PREINSTALLED,
        version=version,
        cuda=cuda,
        python=py,
    )


def run_from_document(path: Path) -> CellRun:
    try:
        result = ProbeResult.from_json(document.check_text(document.read_text(path)))
    except OSError as err:
        raise ConfigError(
            f"{path}: cannot read this probe JSON document ({err.strerror})"
        ) from None
    except (ValueError, KeyError, TypeError, AttributeError) as err:  # Rejected is a ValueError
        raise ConfigError(
            f"{path}: not a probe JSON document this report can draw "
            f"({_why(err)}); pass the JSON file a probe wrote"
        ) from None
    env = result.env
    cell = cell_for(str(env.get("torch", "unknown")), str(env.get("python", "?")))
    # the probe the document names: its page, on a site of several regressions
    cell = dataclasses.replace(cell, probe=result.probe) if result.probe else cell
    return CellRun(
        cell=cell,
        status=RunStatus.OK,
        result=result,
        probe_version=result.probe_version,
        gpu=str(env.get("gpu", "")),
        driver=str(env.get("driver", "")),
        backend="recorded probe JSON",
        seconds_probe=float(result.raw.get("seconds", 0)),
        started=str(result.raw.get("finished") or result.raw.get("started") or ""),
    )


def bisection_from_document(path: Path) -> BisectResult:
    try:
        doc = document.check_bisection(document.parse(document.read_text(path)))
        return BisectResult.from_json(doc)
    except OSError as err:
        raise ConfigError(f"{path}: cannot read this bisection result ({err.strerror})") from None
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        raise ConfigError(
            f"{path}: not a bisection result JSON document this report can draw "
            f"({_why(err)}); pass the file `torchbisect bisect --json` wrote"
        ) from None


def _why(err: Exception) -> str:
    text = str(err) if isinstance(err, document.Rejected) else f"{type(err).__name__}: {err}"
    return text[:200]


class DocumentSource:
    """Stands in for the store: `latest()` and `bisections()` read from JSON files."""

    def __init__(self, probe_files: list[Path], bisection_files: Sequence[Path] = ()):
        self._probe_files = sorted(probe_files)
        self._bisection_files = list(bisection_files)

    def latest(self) -> list[CellRun]:
        return [run_from_document(p) for p in self._probe_files]

    def bisections(self) -> list[BisectResult]:
        return [bisection_from_document(p) for p in self._bisection_files]
