"""Several GPU models in one store: the verdicts side by side, what holds across them, and where
they disagree.

Results of different GPU models are never merged into one verdict per build: each model keeps its
section and headline.  Across them the page says what a scanner's record says (a release is
affected when it was measured affected on at least one model, as affected.json counts it), names
the models that were measured, and calls out every release and nightly edge whose verdict differs
between models, so a reader on one model does not take another's answer for theirs.
"""

from __future__ import annotations

from collections.abc import Callable

from ..model import CellRun, Channel
from .headline import (
    NightlyEdge,
    affected_ranges,
    course_of,
    is_release,
    marks_by,
    nightly_date,
    public_version,
    ranges_text,
    release_states,
    since_sentence,
    state_of,
    unmeasured_clause,
    version_key,
)
from .parts import Comparison, ComparisonRow, Section

_WORDS = {
    "bad": ("aff", "affected"),
    "good": ("ok", "not affected"),
    "absent": ("na", "without the API"),
    "unknown": ("na", "no verdict"),
    "": ("none", "not tested"),
}


def compare(
    sections: tuple[Section, ...],
    runs: list[CellRun],
    gpu_of: Callable[[CellRun], str],
    api: str = "",
) -> Comparison | None:
    """The comparison of the models in `sections`, or None with fewer than two; `api`: the
    probe's REQUIRES_API, named where a release was measured without it."""
    if len(sections) < 2:
        return None
    gpus = tuple(s.gpu for s in sections)
    states = {
        g: dict(release_states([r for r in runs if gpu_of(r) == g and is_release(r)], api))
        for g in gpus
    }
    versions = sorted({v for by in states.values() for v in by}, key=version_key)
    rows = [_release_row(v, [states[g].get(v, "") for g in gpus], api) for v in versions]
    last = {g: _last_tested_nightly([r for r in runs if gpu_of(r) == g]) for g in gpus}
    rows += [
        _edge_row(name, [_edge_of(s, attr, last[s.gpu]) for s in sections])
        for name, attr in (
            ("first affected nightly", "first_affected"),
            ("first fixed nightly", "first_fixed"),
        )
        if any(getattr(s.headline, attr) for s in sections)
    ]
    differences = tuple(_difference(row, gpus) for row in rows if row.differs)
    told = {g for g in gpus if any(state != "unknown" for state in states[g].values())}
    return Comparison(
        headline=_headline(gpus, runs, told, api, by_model=states),
        gpus=gpus,
        rows=tuple(rows),
        differences=differences,
    )


def _release_row(version: str, states: list[str], api: str) -> ComparisonRow:
    said = {s for s in states if s in ("bad", "good")}
    words = {**_WORDS, "absent": ("na", f"no {api}")} if api else _WORDS
    return ComparisonRow(
        label=version, cells=tuple(words[s] for s in states), differs=len(said) > 1
    )


def _last_tested_nightly(runs: list[CellRun]) -> str:
    """The newest nightly date with a verdict: how far a model's nightlies were looked at."""
    dated = [r for r in runs if r.cell.channel is Channel.NIGHTLY and nightly_date(r)]
    return max(
        (d for d, marks in marks_by(dated, nightly_date) if state_of(marks) != "unknown"),
        default="",
    )


def _edge_of(section: Section, attr: str, last: str) -> tuple[NightlyEdge | None, str, str]:
    """(the model's edge, its newest tested nightly, what it says without one): a model whose
    nightlies never turned affected has no fix to compare."""
    if attr == "first_fixed" and section.headline.first_affected is None:
        return None, "", "never affected"
    if attr == "first_fixed" and section.headline.nightly_unclaimed:
        return None, "", "no fix claimed"  # measured on other tags only: no span to compare
    return getattr(section.headline, attr), last, "not tested"


def _edge_row(name: str, edges: list[tuple[NightlyEdge | None, str, str]]) -> ComparisonRow:
    """One nightly edge per model.  A tested edge is a span of dates, (the last nightly measured
    the other way, date]: one day when exact, wider when the nightlies between were not tested
    (or not on the configurations that changed).  A model whose
    nightlies never crossed it ("none found") spans the days after its newest tested nightly; a
    model with nothing to compare (no nightly tested, or no fix of a change it never showed)
    says so and is left out.  Models disagree only when two spans share no day: different dates
    inside one span are bounds of the same edge, not a disagreement."""
    cells, spans = [], []
    for edge, last, silent in edges:
        if edge is not None:
            cells.append(("edge", edge.date))
            spans.append((edge.previous, edge.date))
        elif last:
            cells.append(("none", "none found"))
            spans.append((last, _END))
        else:
            cells.append(("none", silent))
    disjoint = max((lo for lo, _ in spans), default="") >= min(
        (hi for _, hi in spans), default=_END
    )
    return ComparisonRow(label=name, cells=tuple(cells), differs=len(spans) > 1 and disjoint)


_END = "9999-12-31"  # after every nightly


def _difference(row: ComparisonRow, gpus: tuple[str, ...]) -> str:
    by_text: dict[str, list[str]] = {}
    for gpu, (_, text) in zip(gpus, row.cells, strict=True):
        by_text.setdefault(text, []).append(gpu)
    parts = [f"{text} on {', '.join(names)}" for text, names in by_text.items()]
    return f"{row.label}: {'; '.join(parts)}"


def _headline(
    gpus: tuple[str, ...],
    runs: list[CellRun],
    told: set[str],
    api: str,
    *,
    by_model: dict[str, dict[str, str]],
) -> str:
    """What affected.json says: a release measured affected on any model is affected.  The
    models are named, and those without a verdict for any release (`told` holds the others) are
    said apart: "no tested release is affected" must never read as covering a model that has
    no release verdict.  "On each of" only where every model measured every affected release
    affected (`by_model`: model -> release -> state); else "on at least one of"."""
    releases = [r for r in runs if is_release(r)]
    course = course_of(releases, api)
    states = list(course.states)
    ranges = affected_ranges(states)
    models = f"{len(gpus)} GPU models measured ({', '.join(gpus)})"
    without = [g for g in gpus if g not in told]
    if not told:
        return f"No verdict for a stable release on any of {models}"
    note = f"; no release verdict on {_listed(without)}" if without else ""
    if not ranges:
        verdicts = [v for v, state in states if state == "good"]  # on every model tested
        span = (
            f" ({verdicts[0]} tested)"
            if len(verdicts) == 1
            else f" ({verdicts[0]} – {verdicts[-1]} tested)"
            if verdicts
            else ""
        )
        return f"No tested stable release is affected on any of {models}{span}{note}"
    probed = sorted({public_version(r.cell.version) for r in releases}, key=version_key)
    said = ranges_text(ranges)
    holes = unmeasured_clause(ranges, course)
    covered = since_sentence(course, api) or f"releases before {probed[0]} were not tested"
    fixed = f", fixed in {course.fixed}" if course.fixed else ""
    bad = {v for by in by_model.values() for v, state in by.items() if state == "bad"}
    every = all(by.get(v) == "bad" for by in by_model.values() for v in bad)
    which = "each" if every else "at least one"
    return f"{said} affected on {which} of {models}{holes}{fixed} ({covered}){note}"


def _listed(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
