""" "What to do": the answer to an affected user's second question, built from the same headlines.

The probe's workaround (its WORKAROUND) with its cost as measured by `nox -s bench` when the probe
names that benchmark and says how to quote it (WORKAROUND_BENCH, WORKAROUND_COST), the release the
fix is measured in and the first fixed nightly per GPU model when known, the fix's pull request
when the probe names one, a one-line self-check with this probe's file published beside the page
(GPU words only for a probe that says it needs one, NEEDS_GPU) and the `torchbisect probe --probe
NAME` line that runs this probe, and the upstream report: `references.upstream` in matrix.yaml,
else the probe's UPSTREAM_ISSUE, else a search of pytorch/pytorch's issues.
"""

from __future__ import annotations

import re
import shlex
from typing import Any
from urllib.parse import quote_plus, unquote_plus, urlsplit

from .. import home
from ..config.matrix import References
from .headline import Course, Headline, version_key
from .parts import Advice, Section
from .regression import Regression

NO_WORKAROUND = "The probe names no workaround."
# The self-check a reader of the page alone can follow: `report` publishes the standalone probe
# beside the page, which runs under any torch with nothing else installed.
CHECK_MEANING = (
    "with the python whose torch you want checked: it probes the first GPU and exits "
    "0 = not affected, 1 = affected, 125 = cannot tell (no GPU, say). It needs only "
    "torch."
)
# A probe that does not say it needs a GPU (NEEDS_GPU) gets no GPU words: a CPU-only check.
CHECK_MEANING_NO_GPU = (
    "with the python whose torch you want checked: it exits 0 = not "
    "affected, 1 = affected, 125 = cannot tell. It needs only torch."
)
NO_CHECK = (
    "The probe's file is not at hand where this page was drawn; `torchbisect probe "
    "--probe {name}` runs it from a clone of torchbisect, or from the folder "
    "TORCHBISECT_PROBES names."
)
# torchbisect is not on PyPI: the line a reader can follow installs it from a clone of its source.
TOOL = "pip install . && torchbisect probe --probe {name}"
TOOL_MEANING = (
    "in a clone of torchbisect's repository (it is not published on PyPI): the same "
    "check with its result stored, and the whole tool, which installs and probes a "
    "matrix of builds and bisects nightlies."
)
# A probe of the user's own is not in a clone: the variable names the folder it was saved in.
TOOL_OWN = "TORCHBISECT_PROBES=DIR torchbisect probe --probe {name}"
TOOL_OWN_MEANING = (
    "with torchbisect installed from a clone of its repository (pip install . "
    "there; it is not published on PyPI) and DIR the folder that holds {file}: "
    "the same check with its result stored, and the whole tool, which installs "
    "and probes a matrix of builds and bisects nightlies."
)


def upstream_search(regression: Regression) -> str:
    """A search of pytorch/pytorch's issues for the API the probe needs, else its title."""
    words = regression.requires_api or regression.title
    return f"https://github.com/pytorch/pytorch/issues?q=is%3Aissue+{quote_plus(words)}"


def fix_line(h: Headline) -> str:
    """ "Fixed builds", from the headline's course: every clause is what was measured."""
    c = h.course
    newest = c.newest_affected
    if not h.tested:
        release = "no release has a verdict yet"
    elif not h.affected:
        release = "no tested release is affected"
    elif h.fixed:
        release = f"fixed in {h.fixed} (the first release measured after {newest})"
    elif c.later_adjacent and c.unfixed:
        release = (
            f"{c.later_good} was measured not affected, but never on "
            f"{_listed(c.unfixed)}, where earlier releases were affected: no fix is "
            "claimed there"
        )
    elif c.later_adjacent and c.fixed_other_probe:
        release = (
            f"{c.later_good} was measured not affected, but by another version of the probe "
            f"file than {newest}: no fix is claimed"
        )
    elif c.later_good:
        release = (
            f"{c.later_good} was measured not affected, but not every release between it "
            f"and {newest} (the newest affected) was measured"
        )
        if c.unfixed:
            release += f", nor {c.later_good} on {_listed(c.unfixed)}"
    elif all(s == "bad" for v, s in c.states if v in h.tested):
        release = (
            f"no fixed release yet (every tested release up to {newest} is affected"
            f"{_no_verdict(c, '', newest)})"
        )
    elif not c.again and c.since != newest:  # measured not affected only before `since`
        release = (
            f"no fixed release yet (every tested release from {c.since} up to {newest} is "
            f"affected{_no_verdict(c, c.since, newest)})"
        )
    else:
        release = f"no fixed release yet: {newest}, the newest release measured, is affected"
        if c.again:
            release += f" again ({c.after} was measured not affected after an affected one)"
    if not h.fixed and (left := c.unmeasured_after):
        verb = "has" if len(left) == 1 else "have"
        release += f"; {_listed(left)} after {newest} {verb} no verdict"
    nightly = (
        f"first fixed nightly {h.first_fixed.text}"
        if h.first_fixed
        else f"no fixed nightly: {h.nightly_unclaimed}"
        if h.nightly_unclaimed
        else "no fixed nightly found"
        if h.first_affected
        else ""
    )
    return "; ".join(x for x in (release, nightly) if x)


def _no_verdict(c: Course, first: str, last: str) -> str:
    """ "; 2.10.0 has no verdict" for releases probed between `first` (or the oldest) and `last`
    without one: "every tested release … is affected" must not read as covering them."""
    probed = [
        v
        for v, s in c.states
        if s == "unknown"
        and (not first or version_key(first) < version_key(v))
        and version_key(v) < version_key(last)
    ]
    if not probed:
        return ""
    return f", and {_listed(tuple(probed))} {'has' if len(probed) == 1 else 'have'} no verdict"


def _listed(names: tuple[str, ...]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


# What the clone node's cost can resolve: it is the difference of two replay medians, and two H200
# runs of the 1 MiB row gave 0.79 µs and −0.05 µs, so a difference below 1 µs says only that the
# copy is too small to see.  A benchmark document may state its own (`resolution_ms`).
RESOLUTION_MS = 0.001


def duration(ms: float) -> str:
    """A time in the unit a person reads without counting zeros, to two significant digits:
    `0.79 µs`, `24 µs`, `0.77 ms`, `1.2 s`."""
    if abs(ms) >= 1000:
        return f"{_two_digits(ms / 1000)} s"
    if abs(ms) >= 0.1:
        return f"{_two_digits(ms)} ms"
    return f"{_two_digits(ms * 1000)} µs"


def _two_digits(value: float) -> str:
    text = f"{value:.2g}"
    return f"{float(text):.0f}" if "e" in text else text


def measured_cost(ms: float, resolution_ms: float = RESOLUTION_MS) -> str:
    """A measured difference, or what it is below when the timer cannot resolve it."""
    if ms < resolution_ms:
        return f"below {duration(resolution_ms)} (the timer's resolution)"
    return duration(ms)


def cost_sentence(doc: dict[str, Any], cost: dict[str, str]) -> str:
    """The workaround's cost at the smallest and largest size measured, as the probe says to
    quote it (WORKAROUND_COST): each row's `cost["key"]`, in ms, added to `cost["adds_to"]`."""
    key = cost.get("key", "")
    rows = (
        [
            r
            for r in doc.get("rows") or []
            if isinstance(r, dict) and _number(r.get(key)) and _number(r.get("size_mib"))
        ]
        if key
        else []
    )
    if not rows:
        return ""
    rows.sort(key=lambda r: r["size_mib"])
    declared = doc.get("resolution_ms")
    resolution = float(declared) if isinstance(declared, (int, float)) else RESOLUTION_MS
    small, big = rows[0], rows[-1]
    where = f"{doc.get('gpu', 'the benchmark GPU')} (torch {doc.get('torch', '?')})"
    to = f" to {cost['adds_to']}" if cost.get("adds_to") else ""
    return (
        f"Measured on {where}: the workaround adds {measured_cost(small[key], resolution)}"
        f"{to} at {small['size_mib']} MiB and {measured_cost(big[key], resolution)} "
        f"at {big['size_mib']} MiB."
    )


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def self_check(regression: Regression) -> tuple[str, str, str, str, str]:
    """(check, check_href, check_meaning, tool, tool_meaning): how a reader runs THIS probe —
    its file, published beside the page, with the python to check, and the tool's line for it:
    from a clone for one of torchbisect's own probes, else with TORCHBISECT_PROBES naming the
    folder the reader saved the file in."""
    name, file = shlex.quote(regression.probe), regression.check_file
    if regression.shipped or not file:
        tool, meaning = TOOL.format(name=name), TOOL_MEANING
    else:
        tool, meaning = TOOL_OWN.format(name=name), TOOL_OWN_MEANING.format(file=file)
    if not file:
        return "", "", NO_CHECK.format(name=name), tool, meaning
    words = CHECK_MEANING if regression.needs_gpu else CHECK_MEANING_NO_GPU
    return f"python {file}", file, words, tool, meaning


def upstream_of(regression: Regression, links: References) -> str:
    """`references.upstream`, else the probe's UPSTREAM_ISSUE, else a search."""
    return str(links.upstream or "") or regression.upstream_issue or upstream_search(regression)


def build_advice(
    sections: tuple[Section, ...],
    links: References,
    bench: dict[str, Any] | None,
    regression: Regression,
) -> Advice:
    several = len(sections) > 1
    fixes = tuple(
        f"{s.gpu}: {fix_line(s.headline)}" if several else fix_line(s.headline) for s in sections
    )
    bench = bench or {}
    upstream = upstream_of(regression, links)
    check, check_href, check_meaning, tool, tool_meaning = self_check(regression)
    return Advice(
        workaround=regression.workaround or NO_WORKAROUND,
        cost=cost_sentence(bench.get("data") or {}, regression.workaround_cost),
        cost_href=bench.get("href", ""),
        fixes=fixes,
        check=check,
        check_href=check_href,
        check_meaning=check_meaning,
        tool=tool,
        tool_meaning=tool_meaning,
        upstream=upstream,
        upstream_text=link_text(upstream),
        repository=links.repository or home(),
        fix_pr=regression.fix_pr,
        fix_pr_text=link_text(regression.fix_pr) if regression.fix_pr else "",
    )


_GITHUB_THREAD = re.compile(r"/([\w.-]+)/([\w.-]+)/(?:issues|pull)/(\d+)/?$")


def link_text(url: str) -> str:
    """What a link to `url` says instead of the URL: `pytorch/pytorch#12345` for a GitHub issue
    or pull request, the query of a GitHub issue search, else the host and path decoded."""
    parts = urlsplit(url)
    if parts.netloc == "github.com":
        if m := _GITHUB_THREAD.match(parts.path):
            return f"{m[1]}/{m[2]}#{m[3]} on GitHub"
        if parts.path.endswith("/issues") and parts.query.startswith("q="):
            repo = parts.path.strip("/").removesuffix("/issues")
            query = unquote_plus(parts.query[2:].split("&", 1)[0]).replace("is:issue", "").strip()
            return f"{repo} issues matching {query} (a GitHub search)"
    return unquote_plus(f"{parts.netloc}{parts.path}".rstrip("/")) or url
