"""affected.json: the findings as an OSV record that validates against the official schema.

The id carries the `x_` prefix the schema reserves for databases not registered with OSV.  PyPI
ranges are over measured releases (stable rows, and a preinstalled final release), from all GPU
models together (`database_specific.gpus` names them); each model's own findings, the same ones
its headline shows, are in `database_specific.per_gpu`, and every release or nightly edge whose
verdict differs between models is named in `details` and `database_specific.differs_between_gpus`.

A scanner expands a range over every PyPI release of torch (osv.dev's library does exactly that),
so each range claims only the span between two measured affected releases: it opens with
`introduced` at the first one and closes with `last_affected` at the last one, never at "0",
because that would claim releases nobody tested.  The last range closes with `fixed` instead when
the fix is measured: the first release measured not affected after the last one measured
affected, with no release the store knows of left unmeasured between them (headline.py's
`fixed_release`), so the `fixed` event claims nothing untested either.
The releases outside the tested span are named in `database_specific.not_tested`.  GIT ranges come
from bisections, between commits a nightly was measured on, or the exact commit a commit-level
bisection (`bisect --pytorch-repo`) found; a bisection whose answer is a range of nightlies (or
commits) claims none of the unjudged ones (the range's `database_specific` names them), and a
fix that a later build was measured affected again does not close it.  A first
affected (fixed) nightly in `per_gpu` is named only when it is exact, else the span it lies in.

`published` is the first time the record said anything (kept from the previous record, else the
earliest affected run); `modified` moves only when the content changes.  The id, summary and the
words of `details` are the probe's (page/regression.py): its OSV_ID, title, description and
workaround; the API it needs names the releases measured without it.
"""

from __future__ import annotations

import datetime as dt
import html
import json
from typing import Any

from ...config.matrix import References
from ...model import CellRun, Channel
from ...outcome import BisectResult, Direction
from ...page.advice import upstream_of, upstream_search
from ...page.headline import (
    Course,
    Headline,
    NightlyEdge,
    affected_ranges,
    course_of,
    gpu_of,
    is_release,
    nightly_date,
    public_version,
    version_key,
)
from ...page.marks import mark_for_run
from ...page.parts import Page
from ...page.regression import Regression, probe_of, regression_for
from ...page.timeline import safe_url

REPO = "https://github.com/pytorch/pytorch"
TESTED = "Ranges below are over the releases torchbisect tested"
_STAMPS = ("modified", "published")
_MEASURED = {"good": "not affected", "unknown": "without a verdict"}


def pypi_events(
    releases: list[CellRun], api: str = ""
) -> tuple[list[dict[str, str]], list[str], list[str], dict[str, str]]:
    """OSV events over tested releases, the affected versions, all tested versions and what
    each `introduced` rests on.

    One `introduced`/`last_affected` pair per run of consecutive affected releases (a release
    without a verdict ends a run, as on the page): between two measured affected releases a
    scanner may count the untested ones in between, but nothing before the first or after the
    last, and nothing across a release measured not affected; the last pair's `last_affected`
    is a `fixed` at the release the fix is measured in, when it is (headline.fixed_release).  An
    `introduced` is where the regression begins only when the release before it was measured
    without `api` (the probe's REQUIRES_API); else it is the first affected release that was
    tested, and the record says which."""
    course = course_of(releases, api)
    states = list(course.states)
    ranges = affected_ranges(states)
    events = [
        {key: version}
        for first, last in ranges
        for key, version in (("introduced", first), ("last_affected", last))
    ]
    if course.fixed:
        events[-1] = {"fixed": course.fixed}
    affected = [v for v, s in states if s == "bad"]
    measured = [v for v, _ in states]
    basis = {}
    for first, _ in ranges:
        before = measured[measured.index(first) - 1] if measured.index(first) else ""
        # the first release with the API only when the one just before it, with nothing the
        # store knows of between them, was measured without it (and no older one was affected)
        since = (
            before
            if (
                before
                and course.state(before) == "absent"
                and not course.between(before, first)
                and course.since == first
                and course.exact
                and not course.again
            )
            else ""
        )
        measured_as = _measured(dict(states)[before], api) if before else ""
        basis[first] = (
            f"the first release with {api}: {since} was measured without it"
            if (since)
            else (
                f"the oldest affected release tested; {before} before it was measured {measured_as}"
                if before and first == ranges[0][0]
                else f"the first affected release tested after {before}, which was measured "
                f"{measured_as}"
                if before
                else "the oldest release tested: older ones were not tested"
            )
        )
    return events, affected, [v for v, s in states if s != "unknown"], basis


def _measured(state: str, api: str) -> str:
    return f"without {api}" if state == "absent" else _MEASURED[state]


def not_tested(tested: list[str]) -> str:
    """The releases the record says nothing about, named by the tested span's ends."""
    if not tested:
        return "no release was tested"
    if len(tested) == 1:
        return f"releases other than {tested[0]} were not tested"
    return (
        f"releases before {tested[0]} and after {tested[-1]} were not tested, nor those "
        "between the tested ones"
    )


def git_events(
    bisections: list[BisectResult], runs: list[CellRun] | None = None
) -> tuple[list[dict[str, str]], dict[str, Any]]:
    """Upstream commits of nightlies that were measured, and what the range cannot say.

    A regression bisection opens the range at its first bad nightly's commit (or, for a fix
    only, the last bad one), or at the first bad commit itself when a commit-level bisection
    found it exactly.  A fix closes it with `fixed` at the first good commit when the commit
    bisection found it exactly, else at the first good nightly's commit when that answer is
    exact, else with `last_affected` at the last nightly measured bad: nightlies the fix search
    could not judge lie between and are claimed neither way.  Without a fix it closes at the
    newest commit measured bad.  Never from "0".  A commit answer that is a range of commits
    changes nothing: the nightly's measured commit stays the bound.

    An inexact answer (unknown nightlies hide the change) still names only measured commits;
    `database_specific` says between which commits the change lies and which nightlies can be it.
    """
    # the newest bisection of each direction (bisections come oldest first), as the page's
    # headline takes it: the record and the page never tell two different edges
    regression = next(
        (
            b
            for b in reversed(bisections)
            if b.direction is Direction.REGRESSION and b.after and b.after.main_sha
        ),
        None,
    )
    fix = next(
        (
            b
            for b in reversed(bisections)
            if b.direction is Direction.FIX and b.after and b.after.main_sha
        ),
        None,
    )
    start = _culprit(regression) or (
        regression.after.main_sha
        if regression and regression.after
        else (fix.before.main_sha if fix and fix.before else "")
    )
    if not start:
        return [], {}
    said = {
        key: _inexact(b)
        for key, b in (("introduced", regression), ("fixed", fix))
        if b and not b.exact and not _culprit(b)
    }
    again = _affected_after(fix, runs or []) if fix else ""
    if again:  # the fix did not hold: the range stays open, as the newest measurement says
        said["fixed"] = {**said.get("fixed", {}), "affected_again": again}
        return [{"introduced": start}], said
    if fix and _culprit(fix):
        end = {"fixed": _culprit(fix)}
    elif fix and fix.exact and fix.after:
        end = {"fixed": fix.after.main_sha}
    elif fix and fix.before and fix.before.main_sha:
        end = {"last_affected": fix.before.main_sha}
    else:
        end = {"last_affected": _newest_bad_sha(regression or fix)}
    return [{"introduced": start}, end], said


def _affected_after(fix: BisectResult, runs: list[CellRun]) -> str:
    """The first build of the fix's kind (a release after a release, a nightly after a nightly)
    measured affected after the fix a bisection found, or "": the commits after the fix are then
    no "not affected" of the record."""
    after = fix.after
    if after is None:
        return ""
    later: list[str] = []
    for run in runs:
        if not mark_for_run(run).is_affected:
            continue
        if after.date and run.cell.channel is Channel.NIGHTLY and nightly_date(run) > after.date:
            later.append(nightly_date(run))
        elif not after.date and is_release(run):
            version = public_version(run.cell.version)
            if version_key(version) > version_key(public_version(after.version)):
                later.append(version)
    return min(later, key=version_key, default="")


def _culprit(bisection: BisectResult | None) -> str:
    """The commit that brought (or fixed) the change, when the commit bisection found exactly
    one: its first bad (good) commit, the one before it measured the other way; else ""."""
    commits = bisection.narrowed if bisection else None
    if commits is None or not commits.exact or commits.after is None:
        return ""
    return commits.after.main_sha


def _inexact(bisection: BisectResult) -> dict[str, Any]:
    """The bounds of a change the bisection could not pin to one nightly."""
    before, after = bisection.before, bisection.after
    return {
        "exact": False,
        "after_commit": before.main_sha if before else None,
        "at_or_before_commit": after.main_sha if after else None,
        "candidates": list(bisection.candidates),
        "unit": bisection.unit,
    }


def _newest_bad_sha(bisection: BisectResult | None) -> str:
    """The newest nightly the bisection measured bad (a regression's --bad end, usually)."""
    if bisection is None:
        return ""
    bad = [p for p in bisection.points if p.main_sha and p.verdict.value == "bad"]
    if bad:
        return max(bad, key=lambda p: p.date).main_sha
    end = bisection.after if bisection.direction is Direction.REGRESSION else bisection.before
    return end.main_sha if end else ""


def _per_gpu(h: Headline) -> dict[str, Any]:
    return {
        "affected_versions": list(h.affected),
        "tested_versions": list(h.tested),
        "fixed_version": h.fixed or None,
        **_edge("first_affected_nightly", h.first_affected),
        **_edge("first_fixed_nightly", h.first_fixed),
    }


def _edge(key: str, edge: NightlyEdge | None) -> dict[str, Any]:
    """The nightly only when the edge is exact; otherwise null, and the span it lies in: after
    `previous` (null: no nightly before it was measured the other way), at or before `date`."""
    if edge is None or edge.exact:
        return {key: edge.date if edge else None}
    return {
        key: None,
        f"{key}_span": {
            "after": edge.previous or None,
            "at_or_before": edge.date,
            "candidates": list(edge.could_be),
        },
    }


def references(
    links: References, bisections: list[BisectResult], regression: Regression
) -> list[dict[str, str]]:
    # The default upstream link is a search, not a report: typed WEB until an issue is named.
    upstream = upstream_of(regression, links)
    kind = "WEB" if upstream == upstream_search(regression) else "REPORT"
    refs = [
        {"type": "EVIDENCE", "url": safe_url(str(links.page or ""))},
        {"type": kind, "url": safe_url(upstream)},
    ]
    if regression.fix_pr:
        refs.append({"type": "FIX", "url": regression.fix_pr})
    refs += [
        {"type": "WEB", "url": url}
        for url in sorted({safe_url(b.compare_url) for b in bisections} - {""})
    ]
    return [r for r in refs if r["url"]]


def osv_document(
    runs: list[CellRun],
    bisections: list[BisectResult],
    *,
    generated: dt.datetime,
    headlines: tuple[Headline, ...] = (),
    differences: tuple[str, ...] = (),
    links: References | None = None,
    previous: dict[str, Any] | None = None,
    regression: Regression | None = None,
) -> dict[str, Any]:
    """The record; `headlines` (the page's, one per GPU model) fill `per_gpu`; `differences`
    (the page's, one sentence per release or nightly edge the models disagree on) are called out
    in `details` and `database_specific.differs_between_gpus`; `previous` is the record this one
    replaces; `regression`: what the runs' probe says it is (by default read from its file)."""
    regression = regression or regression_for(probe_of(runs))
    releases = [r for r in runs if is_release(r)]
    events, affected, tested, basis = pypi_events(releases, regression.requires_api)
    ranges = _ecosystem_ranges(events, basis)
    commits, inexact = git_events(bisections, runs)
    if commits:
        said = {"database_specific": inexact} if inexact else {}
        ranges.append({"type": "GIT", "repo": REPO, "events": commits, **said})
    gpus = sorted({gpu_of(r) for r in releases})
    tested_on = ", ".join(gpus) or "no GPU"
    each = {
        tuple(pypi_events([r for r in releases if gpu_of(r) == g], regression.requires_api)[2])
        for g in gpus
    }
    if len(each) > 1:  # a release tested on one model is not tested on each
        tested_on = f"at least one of {tested_on} (per_gpu lists each model's)"
    doc = {
        "schema_version": "1.6.0",
        "id": regression.osv_id,
        "summary": regression.title,
        "details": f"{_described(regression)}{TESTED} ({', '.join(tested) or 'none'}) on "
        f"{tested_on}." + _differ(differences),
        "affected": [
            {
                "package": {"ecosystem": "PyPI", "name": "torch", "purl": "pkg:pypi/torch"},
                "ranges": ranges,
                "versions": affected,
                "database_specific": {
                    "tested_versions": tested,
                    "not_tested": not_tested(tested),
                    "gpus": gpus,
                    "differs_between_gpus": list(differences),
                    "per_gpu": {h.gpu: _per_gpu(h) for h in headlines},
                    "fixed_version": _fixed(events),
                    **_fix_unmeasured(course_of(releases, regression.requires_api)),
                    "probe": regression.probe,
                    "source": "torchbisect",
                },
            }
        ],
        "references": references(links or References(), bisections, regression),
    }
    head = {k: doc.pop(k) for k in ("schema_version", "id")}
    return {**head, **_stamps({**head, **doc}, previous or {}, runs, generated), **doc}


def _ecosystem_ranges(events: list[dict[str, str]], basis: dict[str, str]) -> list[dict[str, Any]]:
    """The ECOSYSTEM ranges of `events`: one, unless an earlier stretch closes with
    `last_affected` and the newest with `fixed`, which OSV's schema allows in no one range (a
    regression fixed after it had come and gone): then the fixed stretch is a range of its own."""
    if not events:
        return []
    groups = [events]
    if "fixed" in events[-1] and any("last_affected" in e for e in events):
        groups = [events[:-2], events[-2:]]
    return [
        {
            "type": "ECOSYSTEM",
            "events": group,
            "database_specific": {
                "introduced": {
                    e["introduced"]: basis[e["introduced"]] for e in group if "introduced" in e
                }
            },
        }
        for group in groups
    ]


def _fix_unmeasured(course: Course) -> dict[str, Any]:
    """Why a release measured not affected right after the newest affected one is no `fixed`:
    the GPU models and CUDA tags that were affected and that it was not measured on."""
    if course.fixed or not course.later_adjacent or not course.unfixed:
        return {}
    return {
        "fix_not_measured_on": {
            "release": course.later_good,
            "configurations": list(course.unfixed),
        }
    }


def _described(regression: Regression) -> str:
    """The probe's description and workaround, each a sentence, with a space after them.
    `details` is CommonMark, which passes raw HTML through: the probe's `<`, `>` and `&` are
    written as entities (they read the same), its other words as they are (a `#123`, a URL)."""
    said = [
        regression.description,
        f"Workaround: {regression.workaround}" if regression.workaround else "",
    ]
    return "".join(
        f"{html.escape(s, quote=False)}{'' if s.endswith(('.', '!', '?')) else '.'} "
        for s in said
        if s
    )


def _fixed(events: list[dict[str, str]]) -> str | None:
    """The release the fix is measured in, as the last event says it, or None."""
    return events[-1].get("fixed") if events else None


def _differ(differences: tuple[str, ...]) -> str:
    """A scanner's reader is on one GPU model: where the models disagree is said in so many
    words, since the ranges count a release affected on any of them."""
    if not differences:
        return ""
    return (
        " The verdict differs between GPU models (a result on one model is no answer for "
        "another): " + " ".join(f"({i}) {d}." for i, d in enumerate(differences, 1))
    )


def _stamps(
    doc: dict[str, Any], previous: dict[str, Any], runs: list[CellRun], generated: dt.datetime
) -> dict[str, str]:
    now = _stamp(generated)
    same = previous and {k: v for k, v in previous.items() if k not in _STAMPS} == doc
    first = min(
        (
            s
            for r in runs
            if r.verdict and r.verdict.value == "affected"
            if (s := _stamp_of(r.started))
        ),
        default=now,
    )
    return {
        "modified": previous.get("modified", now) if same else now,
        "published": previous.get("published") or first,
    }


def _stamp(when: dt.datetime) -> str:
    return when.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _stamp_of(text: str) -> str:
    try:
        when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except (TypeError, ValueError):
        return ""
    return _stamp(when if when.tzinfo else when.replace(tzinfo=dt.timezone.utc))


class OsvWriter:
    """affected.json, the findings as an OSV record for a scanner: the headlines of the page's
    GPU models and the edges they disagree on, as the page says them."""

    name = "affected.json"

    def render(self, page: Page) -> str:
        view = page.view
        record = osv_document(
            list(page.runs),
            list(page.bisections),
            generated=page.generated,
            headlines=tuple(s.headline for s in view.sections),
            differences=view.comparison.differences if view.comparison else (),
            links=page.links,
            previous=page.previous,
            regression=view.regression,
        )
        return json.dumps(record, indent=2, ensure_ascii=False) + "\n"
