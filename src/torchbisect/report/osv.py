"""affected.json: the findings as an OSV record that validates against the official schema.

The id carries the `x_` prefix the schema reserves for databases not registered with OSV.  PyPI
ranges are over measured releases (stable rows, and a preinstalled final release), from all GPU
models together; each model's own findings, the same ones its headline shows, are in
`database_specific.per_gpu`.  When the oldest tested release is affected the range opens at "0":
a scanner must not call older, untested releases safe.  A range closes with `fixed` at the next
tested release that is not affected, or with `last_affected`.  GIT ranges come from bisections.

`published` is the first time the record said anything (kept from the previous record, else the
earliest affected run); `modified` moves only when the content changes.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from ..model import CellRun
from ..outcome import BisectResult, Direction
from .headline import Headline, gpu_of, is_release, release_states
from .page import Links
from .timeline import safe_url

OSV_ID = "x_TORCHBISECT-lazy-clone-cuda-graph"
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
_STAMPS = ("modified", "published")


def pypi_events(releases: list[CellRun]) -> tuple[list[dict[str, str]], list[str], list[str]]:
    """OSV events over tested releases, the affected versions and all tested versions."""
    states = [(v, s) for v, s in release_states(releases) if s != "unknown"]
    events: list[dict[str, str]] = []
    affected = [v for v, s in states if s == "bad"]
    last_bad = None
    for i, (version, state) in enumerate(states):
        if state == "bad":
            if last_bad is None:  # the oldest tested release affected: so may be all before it
                events.append({"introduced": "0" if i == 0 else version})
            last_bad = version
        elif last_bad is not None:
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


def _per_gpu(h: Headline) -> dict[str, Any]:
    edge = lambda e: e.date if e else None  # noqa: E731
    return {"affected_versions": list(h.affected), "tested_versions": list(h.tested),
            "first_affected_nightly": edge(h.first_affected),
            "first_fixed_nightly": edge(h.first_fixed)}


def references(links: Links, bisections: list[BisectResult]) -> list[dict[str, str]]:
    refs = [{"type": "EVIDENCE", "url": safe_url(links.page)},
            {"type": "REPORT", "url": safe_url(links.upstream)}]
    refs += [{"type": "WEB", "url": url}
             for url in sorted({safe_url(b.compare_url) for b in bisections} - {""})]
    return [r for r in refs if r["url"]]


def osv_document(runs: list[CellRun], bisections: list[BisectResult], *, generated: dt.datetime,
                 headlines: tuple[Headline, ...] = (), links: Links | None = None,
                 previous: dict | None = None) -> dict[str, Any]:
    """The record; `headlines` (the page's, one per GPU model) fill `per_gpu`; `previous` is the
    record this one replaces."""
    releases = [r for r in runs if is_release(r)]
    events, affected, tested = pypi_events(releases)
    ranges: list[dict[str, Any]] = [{"type": "ECOSYSTEM", "events": events}] if events else []
    if commits := git_events(bisections):
        ranges.append({"type": "GIT", "repo": REPO, "events": commits})
    gpus = sorted({gpu_of(r) for r in releases})
    tested_on = ", ".join(gpus) or "no GPU"
    doc = {
        "schema_version": "1.6.0",
        "id": OSV_ID,
        "summary": SUMMARY,
        "details": f"{DETAILS} ({', '.join(tested) or 'none'}) on {tested_on}.",
        "affected": [{
            "package": {"ecosystem": "PyPI", "name": "torch", "purl": "pkg:pypi/torch"},
            "ranges": ranges,
            "versions": affected,
            "database_specific": {"tested_versions": tested, "gpus": gpus,
                                  "per_gpu": {h.gpu: _per_gpu(h) for h in headlines},
                                  "source": "torchbisect"},
        }],
        "references": references(links or Links(), bisections),
    }
    head = {k: doc.pop(k) for k in ("schema_version", "id")}
    return {**head, **_stamps({**head, **doc}, previous or {}, runs, generated), **doc}


def _stamps(doc: dict[str, Any], previous: dict, runs: list[CellRun],
            generated: dt.datetime) -> dict[str, str]:
    now = _stamp(generated)
    same = previous and {k: v for k, v in previous.items() if k not in _STAMPS} == doc
    first = min((s for r in runs if r.verdict and r.verdict.value == "affected"
                 if (s := _stamp_of(r.started))), default=now)
    return {"modified": previous.get("modified", now) if same else now,
            "published": previous.get("published") or first}


def _stamp(when: dt.datetime) -> str:
    return when.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _stamp_of(text: str) -> str:
    try:
        when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except (TypeError, ValueError):
        return ""
    return _stamp(when if when.tzinfo else when.replace(tzinfo=dt.timezone.utc))
