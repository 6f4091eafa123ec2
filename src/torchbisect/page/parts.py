"""The page's types: what `build_view` decides, and the `Page` every writer of report/writers/
renders.

Plain frozen data, decided by view.py (rows, sections), folding.py (folds), bisections.py
(bisections) and advice.py ("What to do"); each of those imports its types from here, so no
module of the page model needs another's to name what it builds.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from ..config.matrix import References
from ..model import CellRun, Verdict
from ..outcome import BisectResult
from .headline import Headline
from .logs import LogExcerpt
from .marks import Mark
from .regression import Regression
from .timeline import Timeline

Fact = tuple[str, str]  # (name, value) in a row's or a bisection's details


@dataclass(frozen=True, kw_only=True)
class Column:
    name: str
    title: str
    note: str = ""
    expected: Verdict | None = None  # a control case: the verdict it must show (the probe's)
    variants: tuple[tuple[str, str], ...] = ()  # the probe's VARIANTS: how its variants count


@dataclass(frozen=True, kw_only=True)
class CaseCell:
    mark: Mark
    rate: str  # "flaky: affected on 7/20 trials (35%)", or ""
    time: str
    detail: str  # untrusted: the probe's message


@dataclass(frozen=True, kw_only=True)
class Row:
    cell_id: str
    label: str
    sub: str
    mark: Mark
    cases: tuple[CaseCell, ...]  # one per page column; empty for an infrastructure failure
    run_line: str  # GPU · driver · torch git, repeated in every case cell's details
    facts: tuple[Fact, ...]
    log: LogExcerpt
    summary: str = ""  # the cases in a line ("all 5 cases affected; controls as expected")
    origin: str = ""  # a preinstalled torch: where it came from

    @property
    def log_excerpt(self) -> str:
        return self.log.text


@dataclass(frozen=True, kw_only=True)
class Fold:
    """Rows drawn as one: a single row is drawn as itself, several as one summary row that links
    to a page of their own (`href`, relative to index.html) listing them in full."""

    rows: tuple[Row, ...]
    # Per page column, the members' verdicts with how many members have each, commonest first.
    cases: tuple[tuple[tuple[Mark, int], ...], ...] = ()
    href: str = ""

    @property
    def folded(self) -> bool:
        return len(self.rows) > 1

    @property
    def head(self) -> Row:
        return self.rows[0]

    @property
    def label(self) -> str:
        return f"{self.rows[0].label} … {self.rows[-1].label}"

    @property
    def sub(self) -> str:
        same = all(len(c) == 1 for c in self.cases)
        return f"{len(self.rows)} nightlies, {'identical verdicts' if same else 'same run verdict'}"


@dataclass(frozen=True, kw_only=True)
class Group:
    channel: str
    title: str
    rows: tuple[Row, ...]
    folds: tuple[Fold, ...] = ()  # the rows again, long runs of identical nightlies folded


NOT_REPORTED = "not reported by the probe"  # a runtime the probe's documents do not name


NOT_REPORTED = "not reported by the probe"  # a runtime the probe's documents do not name


@dataclass(frozen=True, kw_only=True)
class Environment:
    """One GPU and driver; the CUDA runtimes are the builds' own (each wheel brings its own)."""

    gpu: str
    driver: str
    capability: str
    runs: int
    # (runtime, runs): "" for a CPU-only torch, NOT_REPORTED where the probe did not say
    cuda_runtimes: tuple[tuple[str, int], ...] = ()

    @property
    def cuda_runtime(self) -> str:
        return ", ".join(c for c, _ in self.cuda_runtimes if c and c != NOT_REPORTED)

    @property
    def cuda_reported(self) -> bool:
        return any(c != NOT_REPORTED for c, _ in self.cuda_runtimes)


@dataclass(frozen=True, kw_only=True)
class Section:
    gpu: str
    anchor: str
    headline: Headline
    groups: tuple[Group, ...]
    timeline: Timeline | None
    environments: tuple[Environment, ...]
    tally: tuple[tuple[Mark, int], ...]


@dataclass(frozen=True, kw_only=True)
class BisectView:
    title: str
    facts: tuple[Fact, ...]
    compare_url: str  # https only, else ""
    gpu: str = ""  # the GPU model its boundary builds ran on, "" when that is not known


@dataclass(frozen=True, kw_only=True)
class Advice:
    workaround: str
    cost: str  # the measured cost of the workaround, "" when no benchmark is at hand
    cost_href: str  # the benchmark's plot, relative to the page
    fixes: tuple[str, ...]  # one line per GPU model: first fixed release and nightly
    check: str
    check_href: str  # the probe file, published beside the page
    check_meaning: str
    tool: str
    tool_meaning: str
    upstream: str
    upstream_text: str = ""  # what the link says: never the raw, percent-encoded URL
    repository: str = ""  # where the tool lives, linked after tool_meaning when known
    fix_pr: str = ""  # the pull request the probe names as the fix (https), or ""
    fix_pr_text: str = ""


@dataclass(frozen=True, kw_only=True)
class ComparisonRow:
    label: str  # a release, or "first affected nightly" / "first fixed nightly"
    cells: tuple[tuple[str, str], ...]  # per GPU model, in Comparison.gpus order: (kind, text)
    differs: bool  # the models that have a verdict disagree


@dataclass(frozen=True, kw_only=True)
class Comparison:
    """The GPU models side by side, when a store holds several."""

    headline: str  # what holds across the models measured, and which they are
    gpus: tuple[str, ...]
    rows: tuple[ComparisonRow, ...]
    differences: tuple[str, ...]  # one sentence per release or nightly edge the models disagree on


@dataclass(frozen=True, kw_only=True)
class KindView:
    """A runner kind (runners.yaml) and what the store's attendance says of it."""

    name: str
    platform: str  # "" for a kind the store names but runners.yaml does not declare
    gpu: str  # the GPU name it declares (undeclared: the names its runners reported)
    state: str  # "reported", "partial" (some shards missing), "absent", "never", "unknown"
    text: str  # the sentence the page, summary.md and results.json say
    gpus: tuple[str, ...]  # the page's GPU models (sections) it names
    declared: bool = True


@dataclass(frozen=True, kw_only=True)
class PageView:
    title: str
    generated: str
    newest_run: str
    columns: tuple[Column, ...]
    sections: tuple[Section, ...]
    bisections: tuple[BisectView, ...]
    bisection_timeline: Timeline | None  # when several GPUs: bisections are drawn on their own
    legend: tuple[tuple[Mark, str], ...]  # the states this page shows
    runs: int
    legend_more: tuple[tuple[Mark, str], ...] = ()  # the other states, one click away
    source: str = ""  # what sets the page apart: how the runs were made, from which store
    advice: Advice | None = None  # "What to do"; None on a page without results
    # For a page with no results: why there are none, and pages with real results to look at.
    empty_reason: str = ""
    examples: tuple[tuple[str, str], ...] = ()
    comparison: Comparison | None = None  # with several GPU models
    kinds: tuple[KindView, ...] = ()  # with runners.yaml: each kind and whether it reported
    regression: Regression | None = None  # what the page is about, as its probe says

    @property
    def heading(self) -> str:
        return self.regression.title if self.regression else "a regression"

    @property
    def missing_kinds(self) -> tuple[KindView, ...]:
        """Kinds that are not all there in the latest run: said before anything else."""
        return tuple(k for k in self.kinds if k.state not in ("reported", "unknown"))


@dataclass(frozen=True, kw_only=True)
class Page:
    """One regression's page as every writer takes it (report/writers/): the view decided from
    the runs, the runs and bisections themselves (results.json and the OSV record list them),
    and where the page is published."""

    view: PageView
    runs: tuple[CellRun, ...]
    bisections: tuple[BisectResult, ...]
    generated: dt.datetime
    links: References | None = None  # `references:` of the matrix
    previous: dict[str, Any] | None = None  # the OSV record this render replaces (its dates kept)
    site_home: str = ""  # on a site of several regressions: its index, relative to the page
