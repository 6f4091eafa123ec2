"""summary.md: the headline and a compact table that paste cleanly into a GitHub issue.

Nightlies with the same verdicts on consecutive tested dates fold into one row, so a year of
nightlies stays a few lines.  Untrusted text (`md_text`) is escaped for GitHub's Markdown: no
pipes to break the table, no raw HTML, no links, images, mentions or issue references.
"""

from __future__ import annotations

import re
from collections import Counter
from functools import cache

from ...page.marks import Mark
from ...page.parts import (
    Advice,
    Comparison,
    Environment,
    KindView,
    Page,
    PageView,
    Row,
    Section,
)
from ...utils.words import visible

_CHANNEL = {
    "stable": "stable",
    "test": "rc",
    "nightly": "nightly",
    "dev": "dev",
    "preinstalled": "preinstalled",
}
_SHORT = {"ok": "ok", "refused": "refused", "ctl": "as expected", "na": "n/a", "none": "—"}


def md_text(text: str) -> str:
    """One table cell's worth of untrusted text: one line, no table breaks, no HTML, and nothing
    GitHub would turn into a link, an image, a mention or an issue reference."""
    text = " ".join(str(text).split())
    text = _MD_SPECIAL.sub(lambda m: _MD_ESCAPES.get(m[0], "\\" + m[0]), text)
    # A zero-width space keeps autolinks (https://, www.), @mentions and #123 from forming;
    # the text still reads the same.
    return _MD_AUTOLINK.sub(lambda m: m[0][0] + "\u200b" + m[0][1:], text)


# no `[`: no link, no image; no `*`: no bold; no `~`: no strikethrough; no `$`: no math
_MD_SPECIAL = re.compile(r"[\\|`\[\]<>&*~$]")
_MD_ESCAPES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
_MD_AUTOLINK = re.compile(r"(?i):(?=//)|@(?=\w)|\bw(?=ww\.)|#(?=\d)")


def md_spans(text: str) -> str:
    """One of our sentences whose commands are marked with backticks: they stay code spans,
    the rest is escaped like any text."""
    parts = str(text).split("`")
    if len(parts) % 2 == 0:
        return md_text(text)
    return "".join(
        "`" + " ".join(p.split()) + "`" if i % 2 else _padded(p) for i, p in enumerate(parts)
    )


def _padded(text: str) -> str:
    """md_text, keeping one space at either end where the text had one (beside a code span)."""
    inner = md_text(text)
    return (
        (" " if text[:1].isspace() else "") + inner + (" " if text[-1:].isspace() and inner else "")
    )


def md_url(url: str) -> str:
    """An https URL inside `(…)` or bare: characters that would end the link, or that GitHub
    reads as formatting (code, bold, a link, strikethrough, math, an escape), are
    percent-encoded; the URL still names the same page."""
    return url.translate(_URL_ESCAPES)


_URL_ESCAPES = str.maketrans({c: f"%{ord(c):02X}" for c in "()<> `*[]~$\\|"})


@cache  # a handful of distinct marks recur thousands of times
def md_mark(mark: Mark) -> str:
    if mark.kind in ("aff", "flaky") and mark.note:
        word = f"{mark.word} {mark.note}"
    elif mark.kind == "infra":
        word = f"infra failure: {mark.note}" if mark.note else "infra failure"
    elif mark.word == "skipped":
        word = f"skipped {mark.note}".strip()  # "skipped (no GPU)": not the legend's "n/a"
    else:
        word = _SHORT.get(mark.kind, mark.word)
    return md_text(f"{mark.icon.rstrip(chr(0xFE0E))} {word}")


def _cells(row: Row) -> list[str]:
    return [md_mark(row.mark)] + [md_mark(c.mark) for c in row.cases]


def _table_rows(section: Section, ncols: int) -> list[str]:
    """One line per build; a folded run of nightlies (the page's folds) is one line, each column
    saying how many of its nightlies had which verdict when they differ."""
    lines: list[str] = []
    labels = Counter(row.label for group in section.groups for row in group.rows)
    twice = {label for label, n in labels.items() if n > 1}
    for group in section.groups:
        for fold in group.folds:
            cells = (
                _cells(fold.head)
                if not fold.folded
                else [md_mark(fold.head.mark)] + [_summary(column) for column in fold.cases]
            )
            lines.append(_line(_CHANNEL[group.channel], list(fold.rows), cells, ncols, twice))
    return lines


def _name(row: Row, twice: set[str]) -> str:
    """The build's label, with its second line (CUDA tag, python) where another build of the
    table has the same label: two lines "| 2.8.0 | stable |" said nothing of which was which."""
    return f"{row.label} ({row.sub})" if row.label in twice else row.label


def _summary(column: tuple[tuple[Mark, int], ...]) -> str:
    if len(column) == 1:
        return md_mark(column[0][0])
    return ", ".join(f"{md_mark(mark)} ×{n}" for mark, n in column)


def _line(channel: str, rows: list[Row], cells: list[str], ncols: int, twice: set[str]) -> str:
    first, last = _name(rows[0], twice), _name(rows[-1], twice)
    build = first if len(rows) == 1 else f"{first} … {last} ({len(rows)} builds)"
    if len(rows) == 1 and rows[0].origin and channel != "preinstalled":  # a release, preinstalled
        channel = f"{channel}, preinstalled"
    padded = cells + [""] * (ncols + 1 - len(cells))
    return "| " + " | ".join([md_text(build), md_text(channel)] + padded) + " |"


def render_markdown(page: PageView) -> str:
    out = [f"## {md_text(page.heading)}", "", f"**{md_text(page.title)}**", ""]
    if page.source:  # what sets this page apart from a sibling of the same GPU
        out += [md_text(page.source[:1].upper() + page.source[1:]) + ".", ""]
    head = ["build", "channel", "verdict"] + [c.title for c in page.columns]
    if not page.sections:
        out += [md_spans(page.empty_reason), ""]
    if page.comparison or page.kinds:
        out += comparison_lines(page.comparison, page.kinds)
    if page.advice:
        out += advice_lines(page.advice)
    for section in page.sections:
        h = section.headline
        out += [f"### {md_text(section.gpu)}", ""]
        if len(page.sections) > 1:  # with one GPU the title already is this headline
            out += [f"**{md_text(h.text)}**", ""]
        if h.unclear:
            out.append(f"- probed without a verdict: {md_text(', '.join(h.unclear))}")
        if h.first_affected:
            out.append(f"- first affected nightly: {md_text(h.first_affected.text)}")
        if h.first_fixed:
            out.append(f"- first fixed nightly: {md_text(h.first_fixed.text)}")
        envs = "; ".join(
            f"{e.gpu}, {'driver ' + e.driver if e.driver else 'driver not recorded'}, {_runtime(e)}"
            for e in section.environments
        )
        out += [
            f"- newest run: {md_text(h.newest_run or page.newest_run)}",
            f"- environment: {md_text(envs)}",
            "",
        ]
        out.append("| " + " | ".join(md_text(x) for x in head) + " |")
        out.append("|" + "---|" * len(head))
        out += _table_rows(section, len(page.columns))
        out.append("")
    for b in page.bisections:
        link = f" ([compare]({md_url(b.compare_url)}))" if b.compare_url else ""
        out.append(f"- {md_text(b.title)}{link}")
    out += ["", f"<sub>Generated {page.generated} by torchbisect.</sub>", ""]
    return visible("\n".join(out))  # pasted into issues and `cat`: no control code raw


def advice_lines(a: Advice) -> list[str]:
    """The page's "What to do", as a short list."""
    cost = f" {md_text(a.cost)}" if a.cost else ""
    bench = f" ([benchmark]({md_url(a.cost_href)}))" if a.cost_href else ""
    fixes = " ".join(f"{md_text(line)}." for line in a.fixes)
    if a.fix_pr:
        fixes += f" The fix, as the probe names it: {md_url(a.fix_pr)}"
    check = (
        f"download [{md_text(a.check_href)}]({md_url(a.check_href)}) and run "
        f"`{a.check}` {md_text(a.check_meaning)}"
        if a.check_href
        else md_spans(a.check_meaning)
    )
    return [
        "### What to do",
        "",
        f"- **Workaround:** {md_text(a.workaround)}{cost}{bench}",
        f"- **Fixed builds:** {fixes}",
        f"- **Check your own torch:** {check} The whole tool: `{a.tool}` {md_text(a.tool_meaning)}",
        f"- **Upstream report:** {md_url(a.upstream)}",
        "",
    ]


def comparison_lines(c: Comparison | None, kinds: tuple[KindView, ...] = ()) -> list[str]:
    """The GPU models side by side, the differences first; then the runner kinds, those that did
    not all report in the latest run first."""
    out = ["### Across GPU models", ""]
    if c is not None:
        out += _side_by_side(c)
    missing = [md_text(k.name) for k in kinds if k.state not in ("reported", "unknown")]
    if missing:
        out += [
            f"**Not every runner kind reported in the latest run: {', '.join(missing)}** "
            "(a kind that did not run is no verdict for its GPU model).",
            "",
        ]
    if kinds:
        out += ["Runner kinds (runners.yaml):", ""]
        out += [f"- {_kind(k)}" for k in kinds] + [""]
    return out


def _kind(k: KindView) -> str:
    where = " · ".join(md_text(x) for x in (k.gpu or "GPU not recorded", k.platform) if x)
    return f"**{md_text(k.name)}** ({where}): {md_text(k.text)}"


def _side_by_side(c: Comparison) -> list[str]:
    out = []  # (its headline is the summary's title)
    if c.differences:
        out += ["**The verdict differs between GPU models:**", ""]
        out += [f"- {md_text(d)}" for d in c.differences] + [""]
    out.append("| release | " + " | ".join(md_text(g) for g in c.gpus) + " |")
    out.append("|" + "---|" * (len(c.gpus) + 1))
    for row in c.rows:
        label = f"**{md_text(row.label)}** (differs)" if row.differs else md_text(row.label)
        out.append(f"| {label} | " + " | ".join(md_text(t) for _, t in row.cells) + " |")
    return out + [""]


def _runtime(env: Environment) -> str:
    if env.cuda_runtime:
        return "CUDA " + env.cuda_runtime
    return "no CUDA runtime" if env.cuda_reported else "CUDA runtime not reported by the probe"


class MarkdownWriter:
    """summary.md, the headline and table for a GitHub issue or a job summary."""

    name = "summary.md"

    def render(self, page: Page) -> str:
        return render_markdown(page.view)
