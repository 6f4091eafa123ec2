"""affected.json: the findings as an OSV record, so scanners and advisories can consume them.

PyPI ranges are computed over released (stable) versions only, from all GPUs together (the GPUs are
named in `details` and `database_specific`).  A range opens at the first affected tested release
(a bound: older, untested releases may be affected too), closes with `fixed` at the next tested
release that is not affected, or with `last_affected` when none is.  GIT ranges come from
bisections, with the upstream commits of the boundary nightlies.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from ..model import BisectResult, CellRun, Channel, Direction
from .headline import gpu_of, release_states
from .timeline import safe_url

OSV_ID = "TORCHBISECT-lazy-clone-cuda-graph"
REPO = "https://github.com/pytorch/pytorch"
SUMMARY = ("torch._lazy_clone copies can hand stale data to kernels under CUDA Graph replay "
           "and race with side streams")
DETAILS = (
    "Materializing a copy-on-write tensor made by torch._lazy_clone runs a synchronous "
    "cudaMemcpy on the legacy default stream. During CUDA Graph capture the copy runs once and is "
    "not recorded in the graph, so every replay reads the data as of capture time; outside graphs "
    "the copy does not wait for work on PyTorch's non-blocking streams. Workaround: use "
    "tensor.clone(). A fixed build either copies in stream order or refuses at capture with a "
    "clear error. Ranges below are over the releases torchbisect tested"
)


def pypi_events(stable: list[CellRun]) -> tuple[list[dict[str, str]], list[str], list[str]]:
    """OSV events over tested releases, the affected versions and all tested versions."""
    states = release_states(stable)
    events: list[dict[str, str]] = []
    affected: list[str] = []
    last_bad = None
    for version, state in states:
        if state == "bad":
            if last_bad is None:
                events.append({"introduced": version})
            last_bad = version
            affected.append(version)
        elif state == "good" and last_bad is not None:
            events.append({"fixed": version})
            last_bad = None
    if last_bad is not None:
        events.append({"last_affected": last_bad})
    return events, affected, [v for v, _ in states]


def git_events(bisections: list[BisectResult]) -> list[dict[str, str]]:
    """First bad nightly's upstream commit as `introduced`, first good one's as `fixed`."""
    found: dict[str, str] = {}
    for b in bisections:
        sha = b.after.main_sha if b.after else ""
        if not sha:
            continue
        key = "introduced" if b.direction is Direction.REGRESSION else "fixed"
        found.setdefault(key, sha)
    if not found:
        return []
    return [{"introduced": found.get("introduced", "0")}] + (
        [{"fixed": found["fixed"]}] if "fixed" in found else [])


def osv_document(runs: list[CellRun], bisections: list[BisectResult], *,
                 generated: dt.datetime) -> dict[str, Any]:
    stable = [r for r in runs if r.cell.channel is Channel.STABLE]
    events, affected, tested = pypi_events(stable)
    gpus = sorted({gpu_of(r) for r in stable})
    ranges: list[dict[str, Any]] = [{"type": "ECOSYSTEM", "events": events}] if events else []
    commits = git_events(bisections)
    if commits:
        ranges.append({"type": "GIT", "repo": REPO, "events": commits})
    stamp = generated.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    tested_on = ", ".join(gpus) or "no GPU"
    return {
        "schema_version": "1.6.0",
        "id": OSV_ID,
        "modified": stamp,
        "published": stamp,
        "summary": SUMMARY,
        "details": f"{DETAILS} ({', '.join(tested) or 'none'}) on {tested_on}.",
        "affected": [{
            "package": {"ecosystem": "PyPI", "name": "torch", "purl": "pkg:pypi/torch"},
            "ranges": ranges,
            "versions": affected,
            "database_specific": {"tested_versions": tested, "gpus": gpus,
                                  "source": "torchbisect"},
        }],
        "references": [{"type": "WEB", "url": url} for url in sorted(
            {safe_url(b.compare_url) for b in bisections} - {""})],
    }
