"""affected.json as a scanner reads it: the official OSV schema, ranges that do not call untested
releases safe, stable timestamps, references, and the same findings per GPU model as the page.

The schema is ossf/osv-schema's validation/schema.json at commit
51b8156b69b9e2e9ff2301e649db61636067fcfa (2026-07-01), read from ../shared/osv/ beside the clone
(CI has it there); it is not copied into this repository.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json

import pytest
from conftest import IN_CI, REPO

from torchbisect.model import Channel, Verdict
from torchbisect.outcome import BisectResult, Direction, NightlyPoint
from torchbisect.report import Links, build_view, render_runs
from torchbisect.report.osv import osv_document
from torchbisect.report.synthetic import synthetic_run as run

SCHEMA = REPO / ".." / "shared" / "osv" / "schema.json"
SCHEMA_COMMIT = "51b8156b69b9e2e9ff2301e649db61636067fcfa"
NOW = dt.datetime(2026, 3, 20, 12, 0, tzinfo=dt.timezone.utc)
BAD = {"capture_data_ptr": (5, 5), "capture_write": (5, 5)}
GOOD = {"capture_data_ptr": (0, 5), "capture_write": (0, 5)}
# reports/evidence/ is kept exactly as the H200 run of 2026-11-29 wrote it (its record predates
# the x_ id); reports/h200/ is the same store drawn by today's renderer, so that one is checked.
COMMITTED = [REPO / "reports" / d / "affected.json" for d in ("sample", "h200")]


@pytest.fixture(scope="module")
def validator():
    if not SCHEMA.is_file():
        if IN_CI:
            pytest.fail(f"{SCHEMA} is absent: CI must have ../shared/osv/ beside the clone")
        pytest.skip(f"{SCHEMA} is absent (osv-schema {SCHEMA_COMMIT[:12]}; CI has ../shared)")
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(SCHEMA.read_text())
    assert SCHEMA_COMMIT in (SCHEMA.parent / "README.md").read_text()
    return jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())


def _fix(gpu_version: str, before: str, after: str) -> BisectResult:
    def point(date, verdict):
        return NightlyPoint(date=date, version=f"2.16.0.dev{date.replace('-', '')}+cu132",
                            verdict=verdict, main_sha=date.replace("-", "") * 5)
    return BisectResult(direction=Direction.FIX, case="capture_data_ptr", cuda="cu132",
                        python="3.12", before=point(before, "bad"), after=point(after, "good"),
                        probes=4, compare_url="https://github.com/pytorch/pytorch/compare/a...b")


def _nightly(day: int, outcome, gpu="NVIDIA H200"):
    return run(f"2.16.0.dev202603{day:02d}+cu132", outcome, gpu=gpu)


SCENARIOS = {
    "all affected": ([run("2.11.0+cu130", BAD), run("2.15.0+cu132", BAD)], []),
    "fixed": ([run("2.2.0+cu121", GOOD), run("2.3.0+cu121", BAD),
               run("2.16.0+cu132", {"capture_data_ptr": Verdict.REFUSED})], []),
    "two gpus and a bisection": (
        [run("2.15.0+cu132", BAD), run("2.15.0+cu132", BAD, gpu="NVIDIA A100"),
         _nightly(3, BAD), _nightly(4, GOOD), _nightly(1, BAD, "NVIDIA A100"),
         _nightly(9, GOOD, "NVIDIA A100")], [_fix("NVIDIA H200", "2026-03-03", "2026-03-04")]),
    "empty": ([], []),
}


@pytest.mark.parametrize("name", SCENARIOS)
def test_every_rendered_record_validates_against_the_official_schema(name, validator, tmp_path):
    runs, bisections = SCENARIOS[name]
    render_runs(runs, bisections, tmp_path, generated=NOW,
                links=Links(page="https://example.org/torchbisect/"))
    doc = json.loads((tmp_path / "affected.json").read_text())
    validator.validate(doc)
    assert doc["id"].startswith("x_")  # not a registered OSV database


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: p.parent.name)
def test_every_committed_record_validates_against_the_official_schema(path, validator):
    if not path.is_file():
        pytest.skip(f"{path} is not committed")
    validator.validate(json.loads(path.read_text()))


def _pypi(doc):
    [pypi] = [r for r in doc["affected"][0]["ranges"] if r["type"] == "ECOSYSTEM"]
    return pypi["events"]


def test_an_affected_oldest_tested_release_opens_the_range_at_zero():
    doc = osv_document([run("2.11.0+cu130", BAD), run("2.15.0+cu132", BAD)], [], generated=NOW)
    # a scanner would otherwise call 2.3 … 2.10 safe, though nobody tested them
    assert _pypi(doc) == [{"introduced": "0"}, {"last_affected": "2.15.0"}]
    assert doc["affected"][0]["database_specific"]["tested_versions"] == ["2.11.0", "2.15.0"]
    assert doc["affected"][0]["versions"] == ["2.11.0", "2.15.0"]


def test_a_range_after_a_tested_good_release_opens_there_and_closes_at_the_fix():
    runs, _ = SCENARIOS["fixed"]
    assert _pypi(osv_document(runs, [], generated=NOW)) == [{"introduced": "2.3.0"},
                                                            {"fixed": "2.16.0"}]


def test_a_preinstalled_final_release_counts_as_that_release_everywhere(tmp_path):
    mine = run("2.11.0+cu130", BAD, channel=Channel.PREINSTALLED, cell_id="preinstalled")
    ngc = run("2.11.0a0+git70d99e9", BAD, channel=Channel.PREINSTALLED, cell_id="preinstalled-ngc")
    render_runs([mine, ngc, run("2.12.0+cu130", BAD)], [], tmp_path, generated=NOW)
    osv = json.loads((tmp_path / "affected.json").read_text())
    results = json.loads((tmp_path / "results.json").read_text())
    assert osv["affected"][0]["versions"] == ["2.11.0", "2.12.0"]  # the NGC build is no release
    assert results["headlines"][0]["text"] == "2.11.0 – 2.12.0 affected on NVIDIA H200"
    assert "## torch._lazy_clone stale data: 2.11.0 – 2.12.0 affected" in (
        tmp_path / "summary.md").read_text()
    assert "2.11.0 – 2.12.0 affected on NVIDIA H200" in (tmp_path / "index.html").read_text()


def test_published_stays_and_modified_moves_only_when_the_content_changes(tmp_path):
    runs = [dataclasses.replace(run("2.15.0+cu132", BAD), started="2026-03-01T08:00:00+00:00")]
    stamps = []
    for when, extra in ((NOW, []), (NOW + dt.timedelta(days=1), []),
                        (NOW + dt.timedelta(days=2), [run("2.16.0+cu132", GOOD)])):
        render_runs(runs + extra, [], tmp_path, generated=when)
        doc = json.loads((tmp_path / "affected.json").read_text())
        stamps.append((doc["published"], doc["modified"]))
    assert [p for p, _ in stamps] == ["2026-03-01T08:00:00Z"] * 3  # the first affected run
    assert stamps[1][1] == stamps[0][1] == "2026-03-20T12:00:00Z"  # same content: same record
    assert stamps[2][1] == "2026-03-22T12:00:00Z"  # a fixed release was added


def test_references_name_the_page_the_upstream_report_and_the_bisected_range():
    links = Links(page="https://example.org/tb/", upstream="https://github.com/pytorch/pytorch/issues/1")
    runs, bisections = SCENARIOS["two gpus and a bisection"]
    doc = osv_document(runs, bisections, generated=NOW, links=links)
    assert doc["references"] == [
        {"type": "EVIDENCE", "url": "https://example.org/tb/"},
        {"type": "REPORT", "url": "https://github.com/pytorch/pytorch/issues/1"},
        {"type": "WEB", "url": "https://github.com/pytorch/pytorch/compare/a...b"}]


def test_by_default_the_upstream_reference_is_a_search_of_pytorchs_issues():
    [ref] = osv_document([run("2.15.0+cu132", BAD)], [], generated=NOW)["references"]
    assert ref["type"] == "REPORT"
    assert ref["url"].startswith("https://github.com/pytorch/pytorch/issues?q=")


def test_each_gpu_model_gets_the_same_fix_date_in_headline_bisection_and_record():
    runs, bisections = SCENARIOS["two gpus and a bisection"]
    page = build_view(runs, bisections, generated=NOW)
    headlines = {s.gpu: s.headline for s in page.sections}
    per_gpu = osv_document(runs, bisections, generated=NOW, headlines=tuple(headlines.values()))[
        "affected"][0]["database_specific"]["per_gpu"]
    [bisection] = page.bisections
    # The bisected builds ran on the H200: its fix date is the bisection's everywhere.
    assert bisection.gpu == "NVIDIA H200"
    assert bisection.title == "First fixed nightly for capture_data_ptr on NVIDIA H200: 2026-03-04"
    assert headlines["NVIDIA H200"].first_fixed.date == "2026-03-04"
    assert headlines["NVIDIA H200"].first_fixed.bisected
    assert per_gpu["NVIDIA H200"]["first_fixed_nightly"] == "2026-03-04"
    # The A100 keeps its own, unbisected bound, and says so.
    assert headlines["NVIDIA A100"].first_fixed.date == "2026-03-09"
    assert not headlines["NVIDIA A100"].first_fixed.bisected
    assert per_gpu["NVIDIA A100"]["first_fixed_nightly"] == "2026-03-09"
    assert per_gpu["NVIDIA A100"]["affected_versions"] == ["2.15.0"]


def test_the_osv_git_range_comes_from_bisected_upstream_commits():
    runs, bisections = SCENARIOS["two gpus and a bisection"]
    doc = osv_document(runs, bisections, generated=NOW)
    [git] = [r for r in doc["affected"][0]["ranges"] if r["type"] == "GIT"]
    assert git == {"type": "GIT", "repo": "https://github.com/pytorch/pytorch",
                   "events": [{"introduced": "0"}, {"fixed": "20260304" * 5}]}

