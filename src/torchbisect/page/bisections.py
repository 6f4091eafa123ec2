"""Bisections on the page: which GPU model each one belongs to, and how it is listed.

A bisection result records no GPU, but the nightlies it probed are stored runs, and those do.  A
bisection is attributed to the GPU model whose runs hold its boundary builds, so the headline of
that GPU's section, the bisection's own entry and the OSV record give the same dates.
"""

from __future__ import annotations

from ..model import CellRun
from ..outcome import BisectResult, Direction, NightlyPoint
from .headline import gpu_of
from .parts import BisectView
from .public import public_text
from .timeline import safe_url

UNATTRIBUTED = "not recorded (the store holds several GPU models)"


def gpu_of_bisection(bisection: BisectResult, runs: list[CellRun], gpus: list[str]) -> str:
    """The one GPU model the bisection ran on, or "" when the runs cannot tell."""
    if len(gpus) == 1:
        return gpus[0]
    ends = {p.version for p in (bisection.before, bisection.after) if p and p.version}
    found = {gpu_of(r) for r in runs if r.cell.version in ends}
    return found.pop() if len(found) == 1 else ""


def _commit_facts(c: BisectResult) -> list[tuple[str, str]]:
    """The commit bisection under the nightly one it narrows (`bisect --pytorch-repo`)."""
    listed = []
    for line in c.commits:
        sha, kind, subject = (line.split(" ", 2) + ["", ""])[:3]
        listed.append(f"{sha[:12]} ({kind}) {subject}")
    return [
        ("down to the commit", public_text(lead(c))),
        ("commit candidates" if not c.exact else "commit", public_text("; ".join(listed))),
        ("untestable (no nightly's binary)", ", ".join(c.missing)),
        (
            "inert (test/ or docs/ only: took the verdict before them, unprobed)",
            ", ".join(inert_commits(c)),
        ),
        ("commit probes run", str(c.probes)),
        ("commit compare", public_text(c.compare_url)),
    ]


def _sha(point: NightlyPoint | None) -> str:
    return (point.main_sha if point else "") or "unknown"


def bisect_view(b: BisectResult, gpu: str = "", *, several_gpus: bool = False) -> BisectView:
    regression = b.direction is Direction.REGRESSION
    end = b.after or b.before
    kind = "nightly" if end and end.date else "release"
    what = f"First affected {kind}" if regression else f"First fixed {kind}"
    after = (b.after.date or b.after.version) if b.after else "not found"
    answer = (
        after
        if b.exact or not b.after
        else f"one of {len(b.candidates)} ({', '.join(b.candidates)})"
    )
    before = ("last good " if regression else "last bad ") + (
        (b.before.date or b.before.version) if b.before else "—"
    )
    facts = [
        ("GPU", gpu or (UNATTRIBUTED if several_gpus else "")),
        ("range", f"{before} → {after}"),
        (
            "commits",
            f"{_sha(b.before)} … {_sha(b.after)}"
            if (b.before and b.before.main_sha) or (b.after and b.after.main_sha)
            else "",
        ),
        ("builds", f"{b.cuda} · py{b.python}"),
        ("probes run", str(b.probes)),
        ("unknown (no verdict)", ", ".join(b.unknown)),
        ("missing (no nightly that day)", ", ".join(b.missing)),
        ("flaky rule", b.rule),
        ("reproduce", public_text(b.reproduce)),
        ("finished", b.finished),
    ]
    if b.compare_url and not safe_url(b.compare_url):
        facts.append(("compare (not an https URL, not linked)", b.compare_url))
    if b.narrowed:
        facts += _commit_facts(b.narrowed)
    on = f" on {gpu}" if gpu and several_gpus else ""
    return BisectView(
        title=f"{what} for {b.case}{on}: {answer}",
        facts=tuple((k, v) for k, v in facts if v and v.strip("?… ")),
        compare_url=safe_url(b.compare_url),
        gpu=gpu,
    )


def lead(r: BisectResult) -> str:
    """The answer in one line, and how exact it is: "the first bad nightly is one of 3: …"."""
    first = "first bad" if r.direction is Direction.REGRESSION else "first fixed"
    if r.after is None:
        return f"no {first} {r.unit} found"
    if not r.exact:
        return f"the {first} {r.unit} is one of {len(r.candidates)}: {', '.join(r.candidates)}"
    if r.before is None:
        return f"the {first} {r.unit} is {_key(r.after)}"
    gap = (
        f"; no nightly was published on {', '.join(r.missing)}"
        if r.missing and r.unit == "nightly"
        else ""
    )
    if inert := inert_commits(r):
        return (
            f"the {first} {r.unit} is {r.after.key} (exact: the commit before it that can "
            f"change the package, {r.before.key}, is {r.before.verdict.value}; the "
            f"{unit_count(len(inert), 'commit')} between them "
            f"{'is' if len(inert) == 1 else 'are'} inert)"
        )
    return (
        f"the {first} {r.unit} is {_key(r.after)} (exact: the {r.unit} before it, "
        f"{_key(r.before)}, is {r.before.verdict.value}{gap})"
    )


def _key(p: NightlyPoint) -> str:
    """A build as the answer names it: a re-spin by its build tag too."""
    return p.key + (f" (build {p.build})" if p.build and not p.commit else "")


def inert_commits(r: BisectResult) -> list[str]:
    """The short shas of the inert commits between a commit answer's pair (`test/` or `docs/`
    only: they took the verdict of the commit before them)."""
    return [
        line.split(" ", 1)[0][:12] for line in r.commits if line.split(" ", 2)[1:2] == ["inert"]
    ]


def unit_count(n: int, unit: str) -> str:
    """`n` of `unit`, in the plural when not one: "1 nightly", "3 nightlies"."""
    plural = {"nightly": "nightlies"}.get(unit, unit + "s")
    return f"{n} {unit if n == 1 else plural}"
