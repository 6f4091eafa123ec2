"""Several GPU models in one store: the verdicts side by side, what holds across them, and where
they disagree.

Results of different GPU models are never merged into one verdict per build: each model keeps its
section and headline.  Across them the page says what a scanner's record says (a release is
affected when it was measured affected on at least one model, as affected.json counts it), names
the models that were measured, and calls out every release and nightly edge whose verdict differs
between models, so a reader on one model does not take another's answer for theirs.
"""

from __future__ import annotations

from ..model import CellRun
from .headline import affected_ranges, is_release, public_version, release_states, version_key
from .page import Comparison, ComparisonRow, Section

_WORDS = {"bad": ("aff", "affected"), "good": ("ok", "not affected"),
          "unknown": ("na", "no verdict"), "": ("none", "not tested")}


def compare(sections: tuple[Section, ...], runs: list[CellRun],
            gpu_of) -> Comparison | None:
    """The comparison of the models in `sections`, or None with fewer than two."""
    if len(sections) < 2:
        return None
    gpus = tuple(s.gpu for s in sections)
    states = {g: dict(release_states([r for r in runs if gpu_of(r) == g and is_release(r)]))
              for g in gpus}
    versions = sorted({v for by in states.values() for v in by}, key=version_key)
    rows = [_release_row(v, [states[g].get(v, "") for g in gpus]) for v in versions]
    rows += [_edge_row(name, [getattr(s.headline, attr) for s in sections])
             for name, attr in (("first affected nightly", "first_affected"),
                                ("first fixed nightly", "first_fixed"))
             if any(getattr(s.headline, attr) for s in sections)]
    differences = tuple(_difference(row, gpus) for row in rows if row.differs)
    return Comparison(headline=_headline(gpus, runs), gpus=gpus, rows=tuple(rows),
                      differences=differences)


def _release_row(version: str, states: list[str]) -> ComparisonRow:
    said = {s for s in states if s in ("bad", "good")}
    return ComparisonRow(label=version, cells=tuple(_WORDS[s] for s in states),
                         differs=len(said) > 1)


def _edge_row(name: str, edges: list) -> ComparisonRow:
    dates = [e.date if e else "" for e in edges]
    return ComparisonRow(label=name, cells=tuple(("edge", d) if d else ("none", "none found")
                                                 for d in dates),
                         differs=len(set(dates)) > 1)


def _difference(row: ComparisonRow, gpus: tuple[str, ...]) -> str:
    by_text: dict[str, list[str]] = {}
    for gpu, (_, text) in zip(gpus, row.cells, strict=True):
        by_text.setdefault(text, []).append(gpu)
    parts = [f"{text} on {', '.join(names)}" for text, names in by_text.items()]
    return f"{row.label}: {'; '.join(parts)}"


def _headline(gpus: tuple[str, ...], runs: list[CellRun]) -> str:
    """What affected.json says: a release measured affected on any model is affected."""
    states = release_states([r for r in runs if is_release(r)])
    ranges = affected_ranges(states)
    models = f"{len(gpus)} GPU models measured ({', '.join(gpus)})"
    probed = sorted({public_version(r.cell.version) for r in runs if is_release(r)},
                    key=version_key)
    untested = f"releases before {probed[0]} were not tested" if probed else "no release tested"
    if not ranges:
        return f"No tested stable release is affected on any of {models}"
    said = " and ".join(a if a == b else f"{a} – {b}" for a, b in ranges)
    return f"{said} affected on at least one of {models} ({untested})"
