"""The pages committed to this repository, each drawn again from its own data by today's code.

    torchbisect pages [--check]     # what `nox -s pages` runs (commands/pages.py)

A committed page is derived: `reports/h200/` from the H200 run's store (reports/evidence/
results.sqlite, read from a copy so the evidence stays byte-identical), `reports/sample/` from the
probe documents run by hand on that H200 (reports/evidence/hand/, beside their logs); nothing is
read from tests/.  Each is one regression's page: the runs of its probe (`CommittedPage.probe`)
and the bisections of it, so one store of several probes gives a committed page per probe, each
in a folder of its own.  Whenever the code that
draws a page changes, this regenerates them all; a page whose files differ from a fresh render in
anything but their timestamps is rewritten (with a new screenshot when Chromium is at hand), the
others are left alone, so a run with nothing to change changes nothing.  `--check` only says
which are stale (exit 6), which is what the test of the committed pages asserts.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .. import defaults
from ..config.matrix import References
from ..errors import CommandFailed, ConfigError
from ..model import CellRun
from ..outcome import BisectResult
from ..page.folding import FOLD_DIR
from ..report import RunSource, render_runs
from ..report.site import bisections_of, by_probe
from ..utils import owned, proc

# What may differ between two renders of the same data: when each was drawn.
_STAMPS = re.compile(
    r"(Generated \d{4}-\d\d-\d\d \d\d:\d\d UTC"
    r'|"generated": "[^"]*"|"modified": "[^"]*")'
)
# (file, size, what is clicked first): the page as it opens, and with its first build opened (a
# desk's pop-up over the table, a phone's sheet).
_FIRST_BUILD = ".matrix tbody:not(.fold) th[scope=row] summary"
SCREENSHOTS = (
    ("screenshot.png", "1400x1000", ""),
    ("screenshot-390x844.png", "390x844", ""),
    ("screenshot-opened.png", "1400x1000", _FIRST_BUILD),
    ("screenshot-390x844-opened.png", "390x844", _FIRST_BUILD),
)


@dataclass(frozen=True, kw_only=True)
class CommittedPage:
    folder: str  # relative to the repository root
    source: str  # what it is drawn from, as the README says it
    open_source: Callable[[Path, Path], RunSource]  # (repo root, a scratch folder) -> runs
    probe: str = defaults.PROBE  # the regression it draws: its probe's runs only


def _store_copy(store: str) -> Callable[[Path, Path], RunSource]:
    def open_store(repo: Path, scratch: Path) -> RunSource:
        from ..store.db import Store

        copy = scratch / "results.sqlite"  # opening a store may write to it: never the evidence
        if not (repo / store).is_file():
            raise ConfigError(
                f"{repo / store} is missing, and the page is drawn from it: "
                f"restore it (`git checkout -- {store}`), or "
                "pass --repo with a whole clone"
            )
        shutil.copyfile(repo / store, copy)
        with Store(copy) as store_:
            return _Loaded(store_.latest_counted(), store_.bisections())

    return open_store


def _probe_documents(pattern: str) -> Callable[[Path, Path], RunSource]:
    def open_documents(repo: Path, scratch: Path) -> RunSource:
        from ..report.probe_files import DocumentSource

        return DocumentSource(sorted(repo.glob(pattern)))

    return open_documents


class _Loaded:
    def __init__(self, runs: list[CellRun], bisections: list[BisectResult]) -> None:
        self._runs, self._bisections = runs, bisections

    def latest(self) -> list[CellRun]:
        return self._runs

    def bisections(self) -> list[BisectResult]:
        return self._bisections


EVIDENCE = "reports/evidence/results.sqlite"


def _from_evidence(folder: str, probe: str = defaults.PROBE) -> CommittedPage:
    """A page of one probe's runs in the H200 evidence store."""
    return CommittedPage(
        folder=folder, source=EVIDENCE, open_source=_store_copy(EVIDENCE), probe=probe
    )


PAGES = (
    _from_evidence("reports/h200"),
    # the cumsum regression (probes/cumsum_64bit.py, pytorch/pytorch#143486), same evidence
    _from_evidence("reports/h200-cumsum", probe="cumsum_64bit"),
    CommittedPage(
        folder="reports/docker-h200",
        source="reports/docker-h200/results.sqlite",
        open_source=_store_copy("reports/docker-h200/results.sqlite"),
    ),
    CommittedPage(
        folder="reports/sample",
        source="reports/evidence/hand/h200-torch-*.json",
        open_source=_probe_documents("reports/evidence/hand/h200-torch-*.json"),
    ),
)


def without_stamps(text: str) -> str:
    return _STAMPS.sub("<stamp>", text)


def render_fresh(
    repo: Path, page: CommittedPage, out_root: Path, *, generated: dt.datetime
) -> tuple[Path, list[str]]:
    """Render `page` into `out_root/<folder>`, as it would be drawn beside the repository's
    reports/bench/ (the cost it quotes) and on top of its committed record (whose `published`
    date a new render keeps); returns that folder and the files written, relative to it."""
    out = out_root / page.folder
    owned.claim(out, "report")  # a fresh folder, the render's own before the record goes in
    bench = out_root / "reports" / "bench"
    if not bench.exists() and (repo / "reports" / "bench").is_dir():
        shutil.copytree(repo / "reports" / "bench", bench)
    record = repo / page.folder / "affected.json"
    if record.is_file():
        shutil.copyfile(record, out / "affected.json")
    with tempfile.TemporaryDirectory() as scratch:
        source = page.open_source(repo, Path(scratch))
        groups = by_probe(source.latest(), [page.probe])
        written = render_runs(
            groups[page.probe],
            bisections_of(page.probe, groups, source.bisections()),
            out,
            generated=generated,
            links=References(),
            store=page.source,
            probes=[page.probe],
        )
    return out, sorted(p.relative_to(out).as_posix() for p in written)


def stale_files(repo: Path, page: CommittedPage, fresh: Path, names: list[str]) -> list[str]:
    """The page's files whose committed text differs from `fresh` in more than timestamps, and
    committed pages of folded nightlies a render no longer draws.  Anything else in the folder
    (a store, logs: what a GPU run measured beside its page) is not the page's and is left out."""
    committed = repo / page.folder
    stale = [
        name
        for name in names
        if not (committed / name).is_file()
        or (
            without_stamps((committed / name).read_text(encoding="utf-8"))
            != without_stamps((fresh / name).read_text(encoding="utf-8"))
        )
    ]
    return stale + _old_folds(committed, names)


def _old_folds(folder: Path, names: list[str]) -> list[str]:
    return sorted(
        p.relative_to(folder).as_posix()
        for p in (folder / FOLD_DIR).glob("*.html")
        if p.relative_to(folder).as_posix() not in names
    )


def regenerate(
    repo: Path, *, check: bool = False, say: Callable[[str], object] = print
) -> list[str]:
    """Bring every committed page up to date (or, with `check`, only list the stale ones)."""
    changed = []
    now = dt.datetime.now(dt.timezone.utc)
    with tempfile.TemporaryDirectory() as tmp:
        for page in PAGES:
            fresh, names = render_fresh(repo, page, Path(tmp), generated=now)
            stale = stale_files(repo, page, fresh, names)
            if not stale:
                say(f"{page.folder}: current")
                continue
            changed.append(page.folder)
            say(
                f"{page.folder}: {'stale' if check else 'redrawn'} from {page.source} "
                f"({', '.join(stale)} changed)"
            )
            if not check:
                _replace(repo / page.folder, fresh, names)
                if "index.html" in stale:
                    _screenshots(repo / page.folder, say)
    return changed


def _replace(folder: Path, fresh: Path, names: list[str]) -> None:
    """The committed page becomes the fresh render: its files copied over, pages of folds it no
    longer draws removed; nothing else in the folder is touched."""
    for old in _old_folds(folder, names):
        (folder / old).unlink()
    for name in names:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(fresh / name, folder / name)


def _screenshots(folder: Path, say: Callable[[str], object]) -> None:
    """Retake the page's screenshots with headless Chromium (chromium.py, the tests' driver too),
    when present."""
    helper = Path(__file__).with_name("chromium.py")  # run as a script: the standard library only
    if not (shutil.which("chromium") or shutil.which("chromium-browser")) or not helper.is_file():
        say(f"{folder}: screenshots not retaken: no chromium on PATH (apt-get install chromium)")
        return
    for name, size, click in SCREENSHOTS:
        argv = [
            sys.executable,
            str(helper),
            str(folder / "index.html"),
            str(folder / name),
            size,
            *([click] if click else []),
        ]
        done = proc.run(argv, stdout=Path(os.devnull), check=False)
        sys.stderr.write(done.output)  # its stderr, shown as before (once it ended)
        if done.returncode:
            raise CommandFailed(argv, done.returncode, done.output)
        say(f"{folder / name}: retaken at {size}{', opened' if click else ''}")
