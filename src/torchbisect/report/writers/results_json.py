"""results.json: every run the page shows, its verdicts per case, and the headline, as JSON.

A machine reads this instead of scraping the page: same rows, same order, raw strings (with the
runner's absolute paths made relative, as everything published: `public.py`).
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from ...model import Cell, CellRun
from ...outcome import BisectResult
from ...page.headline import Headline, NightlyEdge, gpu_of
from ...page.parts import Page, PageView
from ...page.public import public_text, public_url

RESULTS_SCHEMA = 1


def _cell_json(cell: Cell) -> dict[str, Any]:
    """The build, not the plan's knobs (timeouts, images): `Cell.to_json` is deep and slow."""
    return {
        "id": cell.id,
        "channel": cell.channel.value,
        "version": cell.version,
        "cuda": cell.cuda,
        "python": cell.python,
        "date": cell.date,
        "url": public_url(cell.url),
        "sha256": cell.sha256,
        "probe": cell.probe,
    } | ({"yanked": cell.yanked} if cell.yanked is not None else {})


def run_json(run: CellRun) -> dict[str, Any]:
    result = run.result
    return {
        "cell": _cell_json(run.cell),
        "gpu": gpu_of(run),
        "driver": run.driver,
        "status": run.status.value,
        "reason": public_text(run.reason),
        "verdict": run.verdict.value if run.verdict else None,
        "cases": {}
        if result is None
        else {
            c.name: {
                "verdict": c.verdict.value,
                "detail": public_text(c.detail),
                "seconds": c.seconds,
                "stale_trials": c.stale_trials,
                "trials": c.trials,
                "flaky": c.flaky,
            }
            for c in result.cases
        },
        "env": result.env if result else {},
        "probe": result.probe if result else "",
        "probe_version": run.probe_version or (result.probe_version if result else ""),
        "wheel_sha256": run.wheel_sha256,
        "backend": run.backend,
        "started": run.started,
        "seconds_install": run.seconds_install,
        "seconds_probe": run.seconds_probe,
        "log_excerpt": public_text(run.log_excerpt),
    }


def _bisection_json(b: BisectResult) -> dict[str, Any]:
    doc = b.to_json()
    if isinstance(doc.get("reproduce"), str):  # a --script's path is the runner's
        doc["reproduce"] = public_text(doc["reproduce"])
    return doc


def _edge(edge: NightlyEdge | None) -> dict[str, Any] | None:
    """`date` is the first nightly measured on the new side; it is the first one there only
    when `exact`: `candidates` and `text` say what else it can be, in the page's words."""
    if edge is None:
        return None
    return {
        "date": edge.date,
        "version": edge.version,
        "previous": edge.previous,
        "bisected": edge.bisected,
        "exact": edge.exact,
        "candidates": list(edge.could_be),
        "text": edge.text,
        "case": edge.case,
        "compare_url": edge.compare_url,
    }


def _headline(h: Headline) -> dict[str, Any]:
    return {
        "gpu": h.gpu,
        "text": h.text,
        "tested": list(h.tested),
        "unclear": list(h.unclear),
        "affected_ranges": [list(r) for r in h.affected_ranges],
        "first_affected_nightly": _edge(h.first_affected),
        "first_fixed_nightly": _edge(h.first_fixed),
        "fixed_in": h.fixed or None,
        "since": _since(h),
        "newest_run": h.newest_run,
    }


def _since(h: Headline) -> dict[str, Any] | None:
    """Where the newest affected stretch began: `release` is its first affected release, `after`
    the release before it measured not affected (or without the API); `exact` when nothing
    lies between them unmeasured and `after` was measured on every GPU model affected at
    `release`.  None without an affected release or one measured not affected before it."""
    c = h.course
    if not c.newest_affected or not c.after:
        return None
    return {"release": c.since, "after": c.after, "exact": c.exact, "again": c.again}


def _models(page: PageView) -> dict[str, Any]:
    c = page.comparison
    return {
        "measured": [s.gpu for s in page.sections],
        "headline": c.headline if c else "",
        "differences": list(c.differences) if c else [],
        "kinds": [
            {
                "name": k.name,
                "gpu": k.gpu,
                "platform": k.platform,
                "declared": k.declared,
                "state": k.state,
                "text": k.text,
                "gpus": list(k.gpus),
            }
            for k in page.kinds
        ],
    }


def results_document(
    page: PageView, runs: list[CellRun], bisections: list[BisectResult], *, generated: dt.datetime
) -> dict[str, Any]:
    """Runs in page order (GPU, channel, version or date), so diffs between renders stay small."""
    order = {
        (s.gpu, r.cell_id): i
        for i, (s, r) in enumerate((s, r) for s in page.sections for g in s.groups for r in g.rows)
    }
    ordered = sorted(runs, key=lambda r: order.get((gpu_of(r), r.cell.id), len(order)))
    return {
        "schema": RESULTS_SCHEMA,
        "generated": generated.astimezone(dt.timezone.utc).isoformat(timespec="seconds"),
        "headlines": [_headline(s.headline) for s in page.sections],
        "models": _models(page),
        "cases": [c.name for c in page.columns],
        "runs": [run_json(r) for r in ordered],
        "bisections": [_bisection_json(b) for b in bisections],
    }


class ResultsJsonWriter:
    """results.json, every run the page shows, for a machine."""

    name = "results.json"

    def render(self, page: Page) -> str:
        return as_json(
            results_document(
                page.view, list(page.runs), list(page.bisections), generated=page.generated
            )
        )


def as_json(doc: dict[str, Any]) -> str:
    """Indented at the top, one line per list item: readable, diffable, and fast (the C encoder
    only runs without `indent`, and a 2,000-run store indented took most of the render budget)."""
    parts = []
    for key, value in doc.items():
        if isinstance(value, list) and value:
            items = ",\n    ".join(json.dumps(v, ensure_ascii=False) for v in value)
            text = f"[\n    {items}\n  ]"
        else:
            text = json.dumps(value, ensure_ascii=False)
        parts.append(f"  {json.dumps(key)}: {text}")
    return "{\n" + ",\n".join(parts) + "\n}\n"
