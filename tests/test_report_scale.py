"""The page at the size of a scheduled service (issue 24): three years of daily nightlies on four
GPU kinds stay a page a phone can load, and every nightly is still one click away."""

from __future__ import annotations

import datetime as dt
import re

import pytest

from torchbisect.bench.scale import GOAL_PAGE_BYTES, KINDS, scale_runs
from torchbisect.report import render_runs

NOW = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.timezone.utc)


@pytest.mark.slow
def test_three_years_on_four_gpu_kinds_fit_a_small_page_that_reaches_every_nightly(tmp_path):
    runs, bisections = scale_runs()
    assert len(runs) > 4200
    render_runs(runs, bisections, tmp_path, generated=NOW)
    page = tmp_path / "index.html"
    html = page.read_text()
    assert page.stat().st_size <= GOAL_PAGE_BYTES
    assert html.count("<h2>NVIDIA") == len(KINDS)
    # every nightly is on the page itself or on the page of the fold that holds it
    listed = set(re.findall(r'<tr id="gpu-[^"]*?-(nightly-\d{8}-[^"]+)"', html))
    for href in set(re.findall(r'href="(nightlies/[^"]+)"', html)):
        listed |= set(re.findall(r'<tr id="gpu-[^"]*?-(nightly-\d{8}-[^"]+)"',
                                 (tmp_path / href).read_text()))
    nightly_ids = {r.cell.id for r in runs if r.cell.id.startswith("nightly-")}
    assert listed == nightly_ids
    # consecutive tested days pin an edge without a bisection
    assert "not bisected" not in html
