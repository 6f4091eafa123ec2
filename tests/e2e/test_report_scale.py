"""The page at the size of a scheduled service (issue 24): three years of daily nightlies on four
GPU kinds stay a page a phone can load, and every nightly is still one click away."""

from __future__ import annotations

import datetime as dt
import re

import pytest

from torchbisect.bench.scale import (
    GOAL_PAGE_BYTES,
    KINDS,
    RUNNER_KINDS,
    runners_yaml,
    scale_attendance,
    scale_runs,
)
from torchbisect.config.runners import load_runners
from torchbisect.report import render_runs

NOW = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.timezone.utc)


@pytest.mark.slow
def test_three_years_on_four_gpu_kinds_fit_a_small_page_that_reaches_every_nightly(tmp_path):
    runs, bisections = scale_runs()
    assert len(runs) > 4200
    (tmp_path / "runners.yaml").write_text(runners_yaml())
    site = tmp_path / "site"
    render_runs(
        runs,
        bisections,
        site,
        generated=NOW,
        runners=load_runners(tmp_path / "runners.yaml"),
        attendance=scale_attendance(),
    )
    page = site / "index.html"
    html = page.read_text()
    assert page.stat().st_size <= GOAL_PAGE_BYTES
    assert html.count("<h2>NVIDIA") == len(KINDS)
    # the declared kinds, each said; the one whose runners went offline first, as not reporting
    offline = RUNNER_KINDS[-1][0]
    assert "did not report in the latest run" in html and offline in html
    assert all(name in html for name, _, _ in RUNNER_KINDS)
    # every nightly is on the page itself or on the page of the fold that holds it
    listed = set(re.findall(r'<tr id="gpu-[^"]*?-(nightly-\d{8}-[^"]+)"', html))
    for href in set(re.findall(r'href="(nightlies/[^"]+)"', html)):
        listed |= set(
            re.findall(r'<tr id="gpu-[^"]*?-(nightly-\d{8}-[^"]+)"', (site / href).read_text())
        )
    nightly_ids = {r.cell.id for r in runs if r.cell.id.startswith("nightly-")}
    assert listed == nightly_ids
    # consecutive tested days pin an edge without a bisection
    assert "not bisected" not in html


@pytest.mark.slow
@pytest.mark.chromium
def test_the_page_of_a_service_at_scale_and_its_fold_pages_hold_on_a_phone(tmp_path):
    """The figure `bench --parts scale` records, kept true by a test: at 390×844 neither the
    page nor a fold page scrolls sideways (the declared kinds' list included)."""
    from torchbisect.pages.chromium import Browser

    runs, bisections = scale_runs()
    (tmp_path / "runners.yaml").write_text(runners_yaml())
    render_runs(
        runs,
        bisections,
        tmp_path / "site",
        generated=NOW,
        runners=load_runners(tmp_path / "runners.yaml"),
        attendance=scale_attendance(),
    )
    folds = sorted((tmp_path / "site" / "nightlies").glob("*.html"))
    with Browser(390, 844, mobile=True) as browser:
        for page in (tmp_path / "site" / "index.html", folds[0], folds[-1]):
            browser.open(page)
            width = browser.eval(
                "Math.max(document.documentElement.scrollWidth, document.body.scrollWidth)"
            )
            assert width <= 390, page.name
