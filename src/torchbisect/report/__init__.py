"""The report: index.html, results.json, summary.md and affected.json (OSV) from stored runs.

`render(store, out_dir)` reads the newest run per (cell, GPU) and every bisection from the store;
`render_runs` is the pure core used by tests and the benchmarks (bench/tool.py).  The page model
(torchbisect/page/) decides what a page says; each output is a writer of `writers.WRITERS`,
rendered from that model (`page.parts.Page`); beside them go the probe's file and the JSON
Schemas.  Each file is written to a temporary name and renamed, so a reader never sees half a page.

One regression per page: the runs are grouped by the probe that made them (`CellRun.cell.probe`).
Runs of one probe draw its page into `out_dir` itself, as they always have; runs of several (or
probes the matrix names) draw each regression's page, Markdown, results.json and OSV record into
`out_dir/<probe>/` and one index page, `out_dir/index.html`, that lists them (site.py).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

from .. import cells, defaults
from ..config.matrix import References
from ..errors import ConfigError
from ..model import NO_GPU, CellRun, Channel
from ..outcome import BisectResult
from ..page.folding import FOLD_DIR
from ..page.headline import gpu_of
from ..page.parts import Page, PageView
from ..page.regression import Regression, probe_of, regression_for
from ..page.view import build_view
from ..probe import document
from ..probe.scripts import is_plain
from ..utils import owned
from ..utils.words import visible
from .documents import SCHEMA_FILES, schema_text
from .site import (
    INDEX_JSON,
    SiteEntry,
    bisections_of,
    by_probe,
    folders_of,
    render_index,
    site_entry,
)
from .writers import WRITERS
from .writers.html import render_fold_pages
from .writers.results_json import ResultsJsonWriter

if TYPE_CHECKING:
    from ..config.runners import Runners
    from ..model import Attendance

__all__ = ["PageView", "build_view", "render", "render_runs", "results_json"]


class RunSource(Protocol):
    def latest(self) -> list[CellRun]: ...
    def bisections(self) -> list[BisectResult]: ...


class AttendanceSource(RunSource, Protocol):
    def attendance(self) -> list[Attendance]: ...  # oldest first


# The committed pages rendered from real H200 results, for a reader whose own store is empty.
_EXAMPLES = (
    ("sample page (probe documents)", "sample/index.html"),
    ("the H200 matrix run's page", "h200/index.html"),
)


def render(
    store: RunSource,
    out_dir: Path,
    *,
    empty_reason: str = "",
    links: References | None = None,
    runners: Runners | None = None,
    probes: Sequence[str] = (),
) -> list[Path]:
    """With `runners` (runners.yaml, loaded), `store` is an AttendanceSource: the page says which
    declared kinds reported in the latest run.  `probes`: those the matrix names, drawn even
    before the store holds a run of theirs."""
    path = getattr(store, "path", None)  # a store's file is named on the page (never its folder)
    # a store draws a plain script's repeated answers as flaky (Store.latest_counted)
    counted = getattr(store, "latest_counted", None)
    return render_runs(
        counted() if callable(counted) else store.latest(),
        store.bisections(),
        Path(out_dir),
        generated=dt.datetime.now(dt.timezone.utc),
        empty_reason=empty_reason,
        links=links,
        runners=runners,
        attendance=cast(AttendanceSource, store).attendance() if runners else (),
        store=Path(path).name if path else "",
        probes=probes,
    )


def render_runs(
    runs: list[CellRun],
    bisections: list[BisectResult],
    out_dir: Path,
    *,
    generated: dt.datetime,
    empty_reason: str = "",
    links: References | None = None,
    runners: Runners | None = None,
    attendance: Sequence[Attendance] = (),
    store: str = "",
    probes: Sequence[str] = (),
) -> list[Path]:
    """Write each regression's files and return their paths: the four documents, the probe
    script the page's self-check runs (published beside it, so the page is enough), and the JSON
    Schemas of results.json and of a probe's document; with several regressions, each in a
    folder of its own and the index page beside them.  `store`: what the runs were read from,
    as the page names it; `probes`: those to draw even without runs (the matrix's)."""
    out_dir = Path(out_dir)
    runs = [with_probed_version(r) for r in runs]
    groups = by_probe(runs, probes)
    # two names of one folder: one sentence naming both
    folders = folders_of(list(groups) or [probe_of(runs)])
    _plain_names(groups)
    several = len(groups) > 1
    texts: dict[Path, str] = {}
    entries: list[SiteEntry] = []
    for probe, mine in groups.items() or [(probe_of(runs), runs)]:
        regression = regression_for(probe)
        folder = out_dir / folders[probe] if several else out_dir
        own = bisections_of(probe, groups, bisections) if several else bisections
        page, files_ = _page_files(
            mine,
            own,
            folder,
            regression,
            generated=generated,
            empty_reason=empty_reason or (_none_of(probe) if runs and not mine else ""),
            links=_links_for(regression, links, several),
            runners=runners,
            attendance=attendance,
            store=store,
            root=out_dir,
            site_home="../index.html" if several else "",
        )
        texts.update(files_)
        entries.append(site_entry(page, folders[probe]))
    if several:
        index_html, index_json = render_index(entries, generated=generated, store=store)
        texts[out_dir / "index.html"] = index_html
        texts[out_dir / INDEX_JSON] = index_json
    # all or nothing: each to a temporary name, renamed together (no half page, no write
    # through a link planted in the folder, a full disk one sentence: files.DiskFull); only
    # into a folder of torchbisect's, removing only pages it drew there before (utils/owned.py)
    return owned.replace_files(
        out_dir,
        {p.relative_to(out_dir).as_posix(): text for p, text in texts.items()},
        use="report",
        legacy=_older_site,
        how="choose a new or empty folder with --out",
    )


def _page_files(
    runs: list[CellRun],
    bisections: list[BisectResult],
    folder: Path,
    regression: Regression,
    *,
    generated: dt.datetime,
    empty_reason: str,
    links: References | None,
    runners: Runners | None,
    attendance: Sequence[Attendance],
    store: str,
    root: Path,
    site_home: str,
) -> tuple[PageView, dict[Path, str]]:
    """One regression's page and its files, by their paths under `folder`."""
    page = build_view(
        runs,
        bisections,
        generated=generated,
        empty_reason=empty_reason,
        examples=example_links(folder) if not measured_on_a_gpu(runs) else (),
        links=links,
        bench=workaround_bench(folder, regression.workaround_bench),
        runners=runners,
        attendance=attendance,
        store=store,
        regression=regression,
    )
    model = Page(
        view=page,
        runs=tuple(runs),
        bisections=tuple(bisections),
        generated=generated,
        links=links,
        previous=_previous(folder, root, regression.osv_id),
        site_home=site_home,
    )
    texts = {
        **{writer.name: writer.render(model) for writer in WRITERS},
        **_probe_file(regression),
        **{file: schema_text(name) for name, file in SCHEMA_FILES.items()},
        **render_fold_pages(page),
    }
    return page, {folder / name: text for name, text in texts.items()}


def _plain_names(groups: dict[str, list[CellRun]]) -> None:
    """A probe's name from a store, a shard or a document is a name, never a path: one that is
    not plain (`../home/app/settings`) is refused before any file of it is read or published."""
    for name, runs in groups.items():
        if not is_plain(name):
            where = f" (cell {runs[0].cell.id})" if runs else ""
            raise ConfigError(
                f"the runs name their probe {visible(repr(name[:80]))}{where}, "
                "which is not a probe's name (a plain file stem: letters, digits, "
                "'_' and '-', dots only between them): no page is drawn from "
                "them; report from a store whose runs torchbisect made"
            )


def _none_of(probe: str) -> str:
    """Why a regression's page is empty when the store holds runs of other probes."""
    return (
        f"The store holds no run of the probe {probe} yet: `nox -s matrix` with it in "
        "matrix.yaml, on a machine with an NVIDIA GPU, adds them."
    )


def _probe_file(regression: Regression) -> dict[str, str]:
    """The probe's file by its name, published for the page's self-check; none when the file is
    not at hand (a store from elsewhere) or cannot be read."""
    if regression.file is None:
        return {}
    try:
        return {regression.file.name: regression.file.read_text(encoding="utf-8")}
    except (OSError, UnicodeDecodeError):
        return {}


def _links_for(
    regression: Regression, links: References | None, several: bool
) -> References | None:
    """On a site of several regressions the matrix's `references.upstream` is one regression's
    report: a probe that names its own (UPSTREAM_ISSUE) keeps it."""
    if several and links is not None and links.upstream and regression.upstream_issue:
        return links.model_copy(update={"upstream": None})
    return links


_GENERATOR = b'<meta name="generator" content="torchbisect">'


def _older_site(out_dir: Path) -> list[str] | None:
    """A folder an older torchbisect drew its pages into (no ownership mark yet): its index.html
    says torchbisect made it.  The pages of folded nightlies it drew there (beside a page, or
    in a regression's folder), which this render may remove; None when not recognised."""
    if not _drawn(out_dir / "index.html"):
        return None
    return [
        p.relative_to(out_dir).as_posix()
        for p in (*out_dir.glob(f"{FOLD_DIR}/*.html"), *out_dir.glob(f"*/{FOLD_DIR}/*.html"))
        if _drawn(p) and not any(owned.is_link(q) for q in p.parents if out_dir in q.parents)
    ]


def _drawn(path: Path) -> bool:
    """Whether `path` is a page torchbisect drew (a regular file, not a link, saying so)."""
    if owned.is_link(path) or not path.is_file():
        return False
    with path.open("rb") as page:
        return _GENERATOR in page.read(4096)


def results_json(runs: list[CellRun], bisections: list[BisectResult]) -> str:
    """results.json's text for these runs alone: what `matrix`, `probe` and `merge --json` write."""
    runs = [with_probed_version(r) for r in runs]
    now = dt.datetime.now(dt.timezone.utc)
    page = build_view(runs, bisections, generated=now)
    return ResultsJsonWriter().render(
        Page(view=page, runs=tuple(runs), bisections=tuple(bisections), generated=now)
    )


def measured_on_a_gpu(runs: list[CellRun]) -> bool:
    """Whether any run here has a GPU's verdicts; a page without one links to pages that do."""
    return any(gpu_of(r) != NO_GPU for r in runs)


def example_links(out_dir: Path) -> tuple[tuple[str, str], ...]:
    """Links, relative to `out_dir`, to the committed example pages of a checkout: beside the
    page (out_dir is the checkout's reports/) or under ./reports/ (any other --out)."""
    links = []
    for title, rel in _EXAMPLES:
        for base in (out_dir, defaults.OUT):
            if (base / rel).is_file():
                links.append((title, Path(os.path.relpath(base / rel, out_dir)).as_posix()))
                break
    return tuple(links)


def workaround_bench(out_dir: Path, name: str) -> dict[str, Any] | None:
    """The workaround's measured cost (`nox -s bench`: reports/bench/<name>.json, as the probe's
    WORKAROUND_BENCH names it), linked when the page is published beside it (reports/,
    reports/<page>/ or reports/<page>/<probe>/), else only quoted; None when the probe names
    no benchmark or none is at hand."""
    if not name:
        return None
    for base in (out_dir, out_dir.parent, out_dir.parent.parent, defaults.OUT):
        found = base / "bench" / f"{name}.json"
        try:
            data = _bounded_json(found)
        except (OSError, ValueError):  # document.Rejected is a ValueError
            continue
        plot = found.with_suffix(".svg") if found.with_suffix(".svg").is_file() else found
        beside = base in (out_dir, out_dir.parent, out_dir.parent.parent)
        return {
            "data": data,
            "href": Path(os.path.relpath(plot, out_dir)).as_posix() if beside else "",
        }
    return None


def _previous(folder: Path, root: Path, osv_id: str) -> dict[str, Any] | None:
    """The OSV record this render replaces, whose `published` (and `modified`) it keeps: the
    folder's own, else (a site that drew one regression and now draws several) the record at
    the root when it is this regression's."""
    for path in dict.fromkeys((folder / "affected.json", root / "affected.json")):
        try:
            doc = _bounded_json(path)
        except (OSError, ValueError):  # a hostile or broken file is no record: a new one starts
            continue
        if isinstance(doc, dict) and (path.parent == folder or doc.get("id") == osv_id):
            return doc
    return None


def _bounded_json(path: Path) -> object:
    """A JSON file of the report folder, read within bounds (16 MiB, 64 levels): a file planted
    there 100,000 levels deep is ignored like any unreadable one, never a RecursionError."""
    limit = 16 * 1024 * 1024
    return document.parse(document.read_text(path, max_bytes=limit), max_bytes=limit, max_depth=64)


def with_probed_version(run: CellRun) -> CellRun:
    """A preinstalled cell whose torch was read only by the probe (an image's, say) gets that
    version and CUDA tag, so the page, results.json and summary.md name the torch they tested."""
    cell = run.cell
    torch = run.result.env.get("torch") if run.result else None
    if cell.channel is not Channel.PREINSTALLED or cell.version or not isinstance(torch, str):
        return run
    cuda = cell.cuda or cells.build_tag(torch)
    return dataclasses.replace(run, cell=dataclasses.replace(cell, version=torch, cuda=cuda))
