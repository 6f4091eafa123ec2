"""Several regressions, one site: which runs are whose, where each page goes, and the index.

A store holds the runs of every probe the matrix ran (`CellRun.cell.probe`); each probe is one
regression with a page of its own.  With one regression its page is the site, drawn into the
output folder itself (where every link to it already points); with several, each goes into
`<out>/<probe>/` and `<out>/index.html` lists them: title, headline, GPU models, newest run.
`regressions.json` beside it says the same for a machine (`notify` finds each summary there).
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import ConfigError
from ..model import CellRun
from ..outcome import BisectResult
from ..page.parts import PageView
from ..utils.words import visible

INDEX_JSON = "regressions.json"
_FOLDER = re.compile(r"[^A-Za-z0-9._-]+")


def probe_name(run: CellRun) -> str:
    """The probe a run belongs to; "" for the runs no page draws (`bisect --script`'s)."""
    stem, _, _ = run.cell.probe.partition(":")
    return "" if run.cell.probe.startswith("script:") else stem


def by_probe(runs: list[CellRun], probes: Sequence[str] = ()) -> dict[str, list[CellRun]]:
    """Each regression's runs, probes named in `probes` first (in that order, with or without
    runs), then those found in the runs by name."""
    groups: dict[str, list[CellRun]] = {name: [] for name in probes}
    found: dict[str, list[CellRun]] = {}
    for run in runs:
        if name := probe_name(run):
            (groups if name in groups else found).setdefault(name, []).append(run)
    return {**groups, **dict(sorted(found.items()))}


# What else a published site holds beside the pages (the store, the manual, folds, benchmarks)
# and the site's own files: a regression's folder never takes one of these names.
_TAKEN = {
    "data",
    "docs",
    "bench",
    "logs",
    "nightlies",
    "evidence",
    "index.html",
    INDEX_JSON.lower(),
}


def folder_of(probe: str) -> str:
    """A regression's folder on a site of several: the probe's name, as a plain file name (one
    the site uses for something else gets `-probe` after it)."""
    name = _FOLDER.sub("-", probe).strip(".-") or "probe"
    return f"{name}-probe" if name.lower() in _TAKEN else name


def folders_of(probes: Sequence[str]) -> dict[str, str]:
    """Each regression's folder, checked: two probes whose names give one folder (`a` and `a.`,
    or `A` and `a` on a disk that folds case) would share one page, and the index would link
    one of them to the other's page and OSV record, so that is one sentence naming both."""
    folders: dict[str, str] = {}
    taken: dict[str, str] = {}
    for probe in probes:
        folder = folder_of(probe)
        other = taken.setdefault(folder.lower(), probe)
        if other != probe:
            raise ConfigError(
                f"the probes {visible(repr(other))} and {visible(repr(probe))} would "
                f"share one regression folder ({folder}/) and so one page: rename "
                "one of them, or draw the page from runs of one"
            )
        folders[probe] = folder
    return folders


def bisections_of(
    probe: str, groups: dict[str, list[CellRun]], bisections: list[BisectResult]
) -> list[BisectResult]:
    """The bisections that belong to `probe`: those of a case its runs have (an exit-status
    script's one case is named after it), else those whose command names its file; a bisection
    no probe claims stays with the first regression listed."""

    def owner(b: BisectResult) -> str:
        for name, runs in groups.items():
            if name == b.case or any(r.result and r.result.case(b.case) for r in runs):
                return name
        named = [name for name in groups if re.search(rf"\b{re.escape(name)}\b", b.reproduce)]
        return named[0] if named else next(iter(groups), "")

    return [b for b in bisections if owner(b) == probe]


@dataclass(frozen=True, kw_only=True)
class SiteEntry:
    """One regression as the index lists it."""

    probe: str
    title: str
    headline: str
    gpus: tuple[str, ...]
    newest_run: str
    runs: int
    href: str  # the page, relative to the index


def site_entry(page: PageView, folder: str) -> SiteEntry:
    return SiteEntry(
        probe=page.regression.probe if page.regression else folder,
        title=page.heading,
        headline=page.title,
        gpus=tuple(s.gpu for s in page.sections),
        newest_run=page.newest_run,
        runs=page.runs,
        href=f"{folder}/index.html",
    )


def render_index(
    entries: list[SiteEntry], *, generated: dt.datetime, store: str = ""
) -> tuple[str, str]:
    """The index page and regressions.json."""
    from .writers.html import environment

    stamp = generated.astimezone(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    html = (
        environment()
        .get_template("site.html.j2")
        .render(entries=entries, generated=stamp, store=store)
    )
    doc = {
        "generated": generated.astimezone(dt.timezone.utc).isoformat(timespec="seconds"),
        "regressions": [
            {
                "probe": e.probe,
                "title": e.title,
                "headline": e.headline,
                "gpus": list(e.gpus),
                "newest_run": e.newest_run,
                "runs": e.runs,
                "page": e.href,
                "folder": e.href.rsplit("/", 1)[0],
            }
            for e in entries
        ],
    }
    return visible(html), json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
