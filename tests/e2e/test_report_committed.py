"""Every committed page is current: drawn again from its own data by today's code, it differs
from what is committed in nothing but its timestamps (`nox -s pages` redraws them)."""

from __future__ import annotations

import datetime as dt
import hashlib
import re

import pytest
from helpers import REPO, committed

from torchbisect.pages.committed import PAGES, render_fresh, stale_files, without_stamps

NOW = dt.datetime(2030, 1, 2, 3, 4, tzinfo=dt.timezone.utc)


def test_every_committed_page_is_in_the_list_that_is_redrawn():
    pages = {
        p.parent.relative_to(REPO).as_posix() for p in committed(REPO / "reports", "index.html")
    }
    assert pages == {p.folder for p in PAGES}, (
        "a page under reports/ that `nox -s pages` does not redraw would go stale unseen: add it "
        "to torchbisect.pages.committed.PAGES, or remove it"
    )


def test_no_gpu_harness_renders_a_page_under_reports_that_is_not_redrawn():
    """A GPU run brings back what its harness writes under reports/: a page rendered into a
    folder outside PAGES (reports/evidence holds only measured data) would fail the test above
    on the next run of the suite.  Such a harness stores with --no-report instead."""
    strays = []
    for script in sorted((REPO / "tests" / "gpu").glob("*.sh")):
        for command in script.read_text().replace("\\\n", " ").splitlines():
            if not re.search(r"(-s|torchbisect) (matrix|report)\b", command):
                continue
            out = re.search(r"--out (reports/\S+)", command)
            if out and "--no-report" not in command and out[1] not in {p.folder for p in PAGES}:
                strays.append(f"{script.name}: --out {out[1]}")
    assert not strays, strays


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.folder)
def test_a_committed_page_equals_a_fresh_render_of_its_data_but_for_timestamps(page, tmp_path):
    evidence = {
        p: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in (REPO / "reports" / "evidence").rglob("*")
        if p.is_file()
    }
    fresh, names = render_fresh(REPO, page, tmp_path, generated=NOW)
    assert stale_files(REPO, page, fresh, names) == [], (
        f"{page.folder} is stale: the code that draws it changed since it was rendered from "
        f"{page.source}; run `nox -s pages` and commit the result"
    )
    # the measured data it was drawn from is read, never written
    assert evidence == {
        p: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in (REPO / "reports" / "evidence").rglob("*")
        if p.is_file()
    }


def test_only_timestamps_are_ignored():
    page = 'Generated 2026-11-30 11:17 UTC by torchbisect "generated": "2026-11-30T11:17:34+00:00"'
    assert without_stamps(page) == without_stamps(page.replace("11:17", "12:00"))
    assert without_stamps(page) != without_stamps(page.replace("torchbisect", "someone"))
    assert without_stamps('"modified": "x", "published": "y"') != without_stamps(
        '"modified": "x", "published": "z"'
    )
