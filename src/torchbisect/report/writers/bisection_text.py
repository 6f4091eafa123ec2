"""A finished bisection as text: the terminal report and the Markdown for a CI job summary.

(The page's view of a bisection, and its answer in one line, `lead`, are `bisections.py`.)
Everything a probe reported reaches Markdown through `md_text` or a code span, and only a GitHub
compare URL becomes a link.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from ...bisect.commits import is_sha
from ...outcome import BisectResult, NightlyPoint
from ...page.bisections import inert_commits, lead, unit_count
from .markdown import md_text, md_url

if TYPE_CHECKING:
    from ...bisect.run import Bisection


def _line(name: str, p: NightlyPoint | None) -> str:
    if p is None:
        return f"{name}: -"
    main = p.main_sha[:12] or "unknown"
    when = p.date or "release"
    yanked = "  (yanked on the index)" if p.yanked is not None else ""
    git = p.git_version[:12] if is_sha(p.git_version) else "not a sha" if p.git_version else "?"
    return f"{name + ':':11} {when}  {p.named}  git {git}  main {main}{yanked}"


def render_text(r: BisectResult, *, new_runs: int, commit_runs: int = 0) -> str:
    """The terminal report; `new_runs` of the result's probes were run now, the rest reused
    (`commit_runs` of the commit bisection's, when there is one)."""
    names = r.pair_names
    lines = [lead(r), _line(names[0], r.before), _line(names[1], r.after)]
    if not r.exact:
        n = len(r.candidates) - 1
        lines.append(f"not exact:  {unit_count(n, r.unit)} between them could not be judged")
    lines.append(f"compare:    {r.compare_url or 'unavailable (main sha unknown)'}")
    if r.commits:
        lines.append(f"commits:    {len(r.commits)}")
        lines += [f"  {c}" for c in r.commits[:30]]
    lines.append(
        f"probes:     {r.probes} ({new_runs} run now, {r.probes - new_runs} from the store)"
    )
    tried = f"{', '.join(r.unknown)} (no verdict)" if r.unknown else "none"
    lines.append(f"unknown:    {tried}")
    if r.missing:
        lines.append(f"missing:    {', '.join(r.missing)} ({_why_missing(r)})")
    if r.yanked:
        said = ", ".join(f"{k} ({why})" if why else k for k, why in r.yanked.items())
        lines.append(
            f"yanked:     {said} (yanked on the index, probed: pip installs a yanked "
            "file for an == pin)"
        )
    lines.append(f"rule:       {r.rule}")
    lines.append(f"reproduce:  {r.reproduce}")
    if r.narrowed:
        lines += ["", *commit_lines(r.narrowed, new_runs=commit_runs)]
    return "\n".join(lines)


def _why_missing(r: BisectResult) -> str:
    return (
        "no nightly that day"
        if r.unit == "nightly"
        else "listed on the index without a build for this runner"
    )


def commit_lines(c: BisectResult, *, new_runs: int) -> list[str]:
    """The commit-level answer under the nightlies' (`bisect --pytorch-repo`): each candidate
    with its subject and link, and, when no nightly's binary could run it, how to build it."""
    lines = [f"down to the commit: {lead(c)}"]
    for line in c.commits:
        sha, kind, subject = (line.split(" ", 2) + ["", ""])[:3]
        lines.append(f"  {sha[:12]} {kind:8} {subject}")
        lines.append(f"    {commit_url(sha)}")
        if not c.exact and kind != "inert":
            lines.append(f"    build: {build_recipe(sha)}")
    if inert := inert_commits(c):
        lines.append(
            f"inert:      {', '.join(inert)} (only test/ or docs/: they cannot change "
            "the installed package, so each took the verdict of the commit before it, "
            "unprobed)"
        )
    if c.missing:
        lines.append(
            f"untestable: {', '.join(c.missing)} (no nightly's binary has their "
            "compiled part: build them from source)"
        )
    if c.unknown:
        lines.append(f"unknown:    {', '.join(c.unknown)} (no verdict)")
    lines.append(f"compare:    {c.compare_url}")
    lines.append(
        f"probes:     {c.probes} over the commits ({new_runs} run now, "
        f"{c.probes - new_runs} from the store)"
    )
    return lines


def commit_url(sha: str) -> str:
    return f"https://github.com/pytorch/pytorch/commit/{sha}"


def build_recipe(sha: str) -> str:
    """One commit from source, in the clone: PyTorch's README's steps ("Install PyTorch" from
    source), short — `setup.py develop` is no longer what it says."""
    return (
        f"git checkout {sha} && git submodule sync && git submodule update --init "
        "--recursive && python -m pip install -r requirements.txt && "
        "python -m pip install --no-build-isolation -v -e ."
    )


def render_markdown(r: BisectResult) -> str:
    """The result for a CI job summary.  What a probe reported (git versions, shas, the compare
    URL built from them) goes through `md_text` or a code span: no link, image, HTML or mention
    of its making reaches GitHub."""
    names = r.pair_names
    rows = ["| | date | version | git_version | main sha |", "|---|---|---|---|---|"]
    for name, p in zip(names, (r.before, r.after), strict=True):
        if p:
            rows.append(
                f"| {name} | {md_text(p.date or 'release')} | {_code(p.named)} | "
                f"{_code(p.git_version[:12])} | {_code(p.main_sha[:12])} |"
            )
    compare = (
        f"[compare]({md_url(r.compare_url)})"
        if _COMPARE.fullmatch(r.compare_url)
        else "compare URL unavailable"
    )
    return "\n".join(
        [
            f"### Bisection ({r.direction.value}) of {_code(r.case)}, {md_text(r.cuda)}, "
            f"Python {md_text(r.python)}",
            "",
            f"**{md_text(_capital(lead(r)))}**",
            "",
            *rows,
            "",
            f"{compare} · {r.probes} probes · unknown (no verdict): "
            f"{md_text(', '.join(r.unknown) or 'none')} · missing ({_why_missing(r)}): "
            f"{md_text(', '.join(r.missing) or 'none')}"
            + (
                f" · yanked on the index, probed: {md_text(', '.join(r.yanked))}"
                if r.yanked
                else ""
            ),
            "",
            f"Rule: {md_text(r.rule)}",
            "",
            f"Reproduce with: {_code(r.reproduce)}",
            *(_commit_markdown(r.narrowed) if r.narrowed else ()),
        ]
    )


def _commit_markdown(c: BisectResult) -> list[str]:
    """The commit bisection under the nightlies' (`bisect --pytorch-repo`)."""
    rows = ["| commit | kind | subject |", "|---|---|---|"]
    for line in c.commits:
        sha, kind, subject = (line.split(" ", 2) + ["", ""])[:3]
        rows.append(f"| {_code(sha[:12])} | {md_text(kind)} | {md_text(subject)} |")
    compare = (
        f"[compare]({md_url(c.compare_url)})"
        if _COMPARE.fullmatch(c.compare_url)
        else "compare URL unavailable"
    )
    untestable = (
        f" · untestable (no nightly's binary): {md_text(', '.join(c.missing))}" if c.missing else ""
    )
    return [
        "",
        f"**Down to the commit: {md_text(lead(c))}**",
        "",
        *rows,
        "",
        f"{compare} · {c.probes} probes over the commits{untestable}",
    ]


_COMPARE = re.compile(
    r"https://github\.com/[\w.-]+/[\w.-]+/compare/[0-9a-f]{7,40}\.\.\.[0-9a-f]{7,40}"
)


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _code(text: str) -> str:
    """A one-line code span: inside one, GitHub makes no link, HTML or mention.  Nothing known
    is said as "unknown", not drawn as an empty span."""
    inner = " ".join(str(text).split()).replace("`", "'").replace("|", "\\|")
    return f"`{inner}`" if inner else "unknown"


class BisectionTextWriter:
    """The terminal's report of a finished bisection (`bisect` prints it)."""

    name = "text"

    def render(self, done: Bisection) -> str:
        return render_text(done.result, new_runs=done.new_runs, commit_runs=done.commit_runs)


class BisectionMarkdownWriter:
    """A finished bisection for a CI job summary (`bisect --markdown` appends it)."""

    name = "markdown"

    def render(self, done: Bisection) -> str:
        return render_markdown(done.result)


def render_stopped_markdown(so_far: dict[str, Any], message: str, status: int) -> str:
    """A bisection that stopped without an answer (exit 7, 9 or 10), for a CI job summary: why
    it stopped, and the range the builds judged before pin.  The message quotes a script and
    its output: it goes through `md_text` like everything a probe reported."""
    return "\n".join(
        [
            f"### Bisection ({md_text(str(so_far.get('direction', '')))}) of "
            f"{_code(str(so_far.get('case', '')))} stopped (exit {status})",
            "",
            md_text(message),
            "",
            f"**{md_text(_capital(str(so_far.get('range_so_far', ''))))}**",
        ]
    )
