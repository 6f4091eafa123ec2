"""A finished bisection as text: the terminal report and the Markdown for a CI job summary.

(The page's view of a bisection is `bisections.py`.)  Everything a probe reported reaches Markdown
through `md_text` or a code span, and only a GitHub compare URL becomes a link.
"""

from __future__ import annotations

import re

from ..outcome import BisectResult, Direction, NightlyPoint
from .markdown import md_text, md_url


def _pair_names(result: BisectResult) -> tuple[str, str]:
    if result.direction is Direction.REGRESSION:
        return "last good", "first bad"
    return "last bad", "first good"


def _line(name: str, p: NightlyPoint | None) -> str:
    if p is None:
        return f"{name}: -"
    main = p.main_sha[:12] or "unknown"
    when = p.date or "release"
    return f"{name + ':':11} {when}  {p.version}  git {p.git_version[:12] or '?'}  main {main}"


def render_text(r: BisectResult, *, new_runs: int) -> str:
    """The terminal report; `new_runs` of the result's probes were run now, the rest reused."""
    names = _pair_names(r)
    lines = [_line(names[0], r.before), _line(names[1], r.after)]
    between = [p for p in r.points
               if r.before and r.after and r.before.date < p.date < r.after.date]
    if between:
        lines.append(f"not pinned to one nightly: {len(between)} unknown between them")
    lines.append(f"compare:    {r.compare_url or 'unavailable (main sha unknown)'}")
    if r.commits:
        lines.append(f"commits:    {len(r.commits)}")
        lines += [f"  {c}" for c in r.commits[:30]]
    lines.append(f"probes:     {r.probes} ({new_runs} run now, "
                 f"{r.probes - new_runs} from the store)")
    lines.append(f"skipped:    {', '.join(r.skipped) or 'none'}")
    lines.append(f"rule:       {r.rule}")
    lines.append(f"reproduce:  {r.reproduce}")
    return "\n".join(lines)


def render_markdown(r: BisectResult) -> str:
    """The result for a CI job summary.  What a probe reported (git versions, shas, the compare
    URL built from them) goes through `md_text` or a code span: no link, image, HTML or mention
    of its making reaches GitHub."""
    names = _pair_names(r)
    rows = ["| | date | version | git_version | main sha |", "|---|---|---|---|---|"]
    for name, p in zip(names, (r.before, r.after), strict=True):
        if p:
            rows.append(f"| {name} | {md_text(p.date or 'release')} | {_code(p.version)} | "
                        f"{_code(p.git_version[:12])} | {_code(p.main_sha[:12])} |")
    compare = f"[compare]({md_url(r.compare_url)})" if _COMPARE.fullmatch(r.compare_url) else \
        "compare URL unavailable"
    return "\n".join([
        f"### Bisection ({r.direction.value}) of {_code(r.case)}, {md_text(r.cuda)}, "
        f"Python {md_text(r.python)}", "",
        *rows, "",
        f"{compare} · {r.probes} probes · skipped: {md_text(', '.join(r.skipped) or 'none')}",
        "", f"Rule: {md_text(r.rule)}", "", f"Reproduce with: {_code(r.reproduce)}",
    ])


_COMPARE = re.compile(r"https://github\.com/[\w.-]+/[\w.-]+/compare/[0-9a-f]{7,40}\.\.\.[0-9a-f]{7,40}")


def _code(text: str) -> str:
    """A one-line code span: inside one, GitHub makes no link, HTML or mention."""
    return "`" + " ".join(str(text).split()).replace("`", "'").replace("|", "\\|") + "`"
