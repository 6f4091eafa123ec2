"""affected.json as a scanner reads it: the official OSV schema, ranges that do not call untested
releases safe, stable timestamps, references, and the same findings per GPU model as the page.

The schema is ossf/osv-schema's validation/schema.json at commit
51b8156b69b9e2e9ff2301e649db61636067fcfa (2026-07-01), read from ../shared/osv/ beside the clone
(CI has it there); it is not copied into this repository, and the tests that need it skip,
with the reason, where it is absent (as the act rehearsal does without ../shared/actions).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import re
from pathlib import Path

import pytest
from helpers import IN_CI, REPO, committed
from helpers.indexserver import serve
from packaging.version import Version

from torchbisect.bench.synthetic import synthetic_run as run
from torchbisect.config.matrix import References
from torchbisect.model import Channel, Verdict
from torchbisect.outcome import BisectResult, Direction, NightlyPoint
from torchbisect.report import build_view, render_runs
from torchbisect.report.writers.osv import osv_document

NOW = dt.datetime(2026, 3, 20, 12, 0, tzinfo=dt.timezone.utc)
BAD = {"capture_data_ptr": (5, 5), "capture_write": (5, 5)}
GOOD = {"capture_data_ptr": (0, 5), "capture_write": (0, 5)}
# Every record committed under reports/ (the pages `nox -s pages` draws).
COMMITTED = committed(REPO / "reports", "affected.json")


def _fix(gpu_version: str, before: str, after: str) -> BisectResult:
    def point(date, verdict):
        return NightlyPoint(
            date=date,
            version=f"2.16.0.dev{date.replace('-', '')}+cu132",
            verdict=verdict,
            main_sha=date.replace("-", "") * 5,
        )

    return BisectResult(
        direction=Direction.FIX,
        case="capture_data_ptr",
        cuda="cu132",
        python="3.12",
        before=point(before, "bad"),
        after=point(after, "good"),
        probes=4,
        compare_url="https://github.com/pytorch/pytorch/compare/a...b",
    )


def _nightly(day: int, outcome, gpu="NVIDIA H200"):
    return run(f"2.16.0.dev202603{day:02d}+cu132", outcome, gpu=gpu)


SCENARIOS = {
    "all affected": ([run("2.11.0+cu130", BAD), run("2.15.0+cu132", BAD)], []),
    "fixed": (
        [
            run("2.2.0+cu121", GOOD),
            run("2.3.0+cu121", BAD),
            run("2.16.0+cu132", {"capture_data_ptr": Verdict.REFUSED}),
        ],
        [],
    ),
    "two gpus and a bisection": (
        [
            run("2.15.0+cu132", BAD),
            run("2.15.0+cu132", BAD, gpu="NVIDIA A100"),
            _nightly(3, BAD),
            _nightly(4, GOOD),
            _nightly(1, BAD, "NVIDIA A100"),
            _nightly(9, GOOD, "NVIDIA A100"),
        ],
        [_fix("NVIDIA H200", "2026-03-03", "2026-03-04")],
    ),
    "empty": ([], []),
}


@pytest.mark.parametrize("name", SCENARIOS)
def test_every_rendered_record_validates_against_the_official_schema(name, validator, tmp_path):
    runs, bisections = SCENARIOS[name]
    render_runs(
        runs,
        bisections,
        tmp_path,
        generated=NOW,
        links=References(page="https://example.org/torchbisect/"),
    )
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


def test_an_affected_oldest_tested_release_opens_the_range_there_and_names_the_untested():
    doc = osv_document([run("2.11.0+cu130", BAD), run("2.15.0+cu132", BAD)], [], generated=NOW)
    # "0" would claim 1.0.0 … 2.10.0 affected, though nobody tested them
    assert _pypi(doc) == [{"introduced": "2.11.0"}, {"last_affected": "2.15.0"}]
    found = doc["affected"][0]["database_specific"]
    assert found["tested_versions"] == ["2.11.0", "2.15.0"]
    assert found["not_tested"] == (
        "releases before 2.11.0 and after 2.15.0 were not tested, nor those between the tested ones"
    )
    assert doc["affected"][0]["versions"] == ["2.11.0", "2.15.0"]


def test_the_details_name_the_tested_releases_on_each_model_only_where_each_tested_them():
    both = [
        run(v, BAD, gpu=g)
        for v in ("2.14.0+cu130", "2.15.0+cu132")
        for g in ("NVIDIA H100", "NVIDIA H200")
    ]
    doc = osv_document(both, [], generated=NOW)
    assert doc["details"].endswith("tested (2.14.0, 2.15.0) on NVIDIA H100, NVIDIA H200.")
    # 2.13.0 on the H200 alone (as 2.2.2 was): the list is not each model's
    one = both + [run("2.13.0+cu130", GOOD, gpu="NVIDIA H200")]
    doc = osv_document(one, [], generated=NOW)
    assert doc["details"].endswith(
        "tested (2.13.0, 2.14.0, 2.15.0) on at least one of NVIDIA H100, NVIDIA H200 "
        "(per_gpu lists each model's)."
    )


def test_a_range_closes_at_the_last_affected_release_not_at_a_later_fixed_one():
    runs, _ = SCENARIOS["fixed"]
    # `fixed: 2.16.0` would claim 2.4 … 2.15, which were not tested
    assert _pypi(osv_document(runs, [], generated=NOW)) == [
        {"introduced": "2.3.0"},
        {"last_affected": "2.3.0"},
    ]


def test_a_preinstalled_final_release_counts_as_that_release_everywhere(tmp_path):
    mine = run("2.11.0+cu130", BAD, channel=Channel.PREINSTALLED, cell_id="preinstalled")
    ngc = run("2.11.0a0+git70d99e9", BAD, channel=Channel.PREINSTALLED, cell_id="preinstalled-ngc")
    render_runs([mine, ngc, run("2.12.0+cu130", BAD)], [], tmp_path, generated=NOW)
    osv = json.loads((tmp_path / "affected.json").read_text())
    results = json.loads((tmp_path / "results.json").read_text())
    assert osv["affected"][0]["versions"] == ["2.11.0", "2.12.0"]  # the NGC build is no release
    assert results["headlines"][0]["text"] == (
        "2.11.0 – 2.12.0 affected on NVIDIA H200 (releases before 2.11.0 were not tested)"
    )
    assert "**2.11.0 – 2.12.0 affected" in (tmp_path / "summary.md").read_text()
    assert "2.11.0 – 2.12.0 affected on NVIDIA H200" in (tmp_path / "index.html").read_text()


def test_published_stays_and_modified_moves_only_when_the_content_changes(tmp_path):
    runs = [dataclasses.replace(run("2.15.0+cu132", BAD), started="2026-03-01T08:00:00+00:00")]
    stamps = []
    for when, extra in (
        (NOW, []),
        (NOW + dt.timedelta(days=1), []),
        (NOW + dt.timedelta(days=2), [run("2.16.0+cu132", GOOD)]),
    ):
        render_runs(runs + extra, [], tmp_path, generated=when)
        doc = json.loads((tmp_path / "affected.json").read_text())
        stamps.append((doc["published"], doc["modified"]))
    assert [p for p, _ in stamps] == ["2026-03-01T08:00:00Z"] * 3  # the first affected run
    assert stamps[1][1] == stamps[0][1] == "2026-03-20T12:00:00Z"  # same content: same record
    assert stamps[2][1] == "2026-03-22T12:00:00Z"  # a fixed release was added


def test_references_name_the_page_the_upstream_report_and_the_bisected_range():
    links = References(
        page="https://example.org/tb/", upstream="https://github.com/pytorch/pytorch/issues/1"
    )
    runs, bisections = SCENARIOS["two gpus and a bisection"]
    doc = osv_document(runs, bisections, generated=NOW, links=links)
    assert doc["references"] == [
        {"type": "EVIDENCE", "url": "https://example.org/tb/"},
        {"type": "REPORT", "url": "https://github.com/pytorch/pytorch/issues/1"},
        {"type": "WEB", "url": "https://github.com/pytorch/pytorch/compare/a...b"},
    ]


def test_by_default_the_upstream_reference_is_a_search_of_pytorchs_issues_typed_web():
    [ref] = osv_document([run("2.15.0+cu132", BAD)], [], generated=NOW)["references"]
    assert ref["type"] == "WEB"  # a search is no report: REPORT once matrix.yaml names one
    assert ref["url"].startswith("https://github.com/pytorch/pytorch/issues?q=")


def test_each_gpu_model_gets_the_same_fix_date_in_headline_bisection_and_record():
    runs, bisections = SCENARIOS["two gpus and a bisection"]
    page = build_view(runs, bisections, generated=NOW)
    headlines = {s.gpu: s.headline for s in page.sections}
    per_gpu = osv_document(runs, bisections, generated=NOW, headlines=tuple(headlines.values()))[
        "affected"
    ][0]["database_specific"]["per_gpu"]
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
    # 2026-03-09 is only the first nightly measured fixed (03-01 is the one before it): the
    # record names no first fixed nightly, only the span it lies in.
    assert per_gpu["NVIDIA A100"]["first_fixed_nightly"] is None
    assert per_gpu["NVIDIA A100"]["first_fixed_nightly_span"] == {
        "after": "2026-03-01",
        "at_or_before": "2026-03-09",
        "candidates": [],
    }
    assert per_gpu["NVIDIA A100"]["affected_versions"] == ["2.15.0"]


def test_the_osv_git_range_comes_from_bisected_upstream_commits():
    runs, bisections = SCENARIOS["two gpus and a bisection"]
    doc = osv_document(runs, bisections, generated=NOW)
    [git] = [r for r in doc["affected"][0]["ranges"] if r["type"] == "GIT"]
    assert git == {
        "type": "GIT",
        "repo": "https://github.com/pytorch/pytorch",
        "events": [{"introduced": "20260303" * 5}, {"fixed": "20260304" * 5}],
    }


def test_a_newer_bisection_of_the_same_edge_is_the_one_record_and_page_tell(validator):
    """Bisections come oldest first; the page's headline takes the newest of each direction,
    and so does the record's GIT range (it took the oldest, and the two told different fixes)."""
    older = _bisection(Direction.FIX, {"2026-03-01": "bad", "2026-03-04": "good"})
    newer = _bisection(
        Direction.FIX, {"2026-03-01": "bad", "2026-03-05": "bad", "2026-03-06": "good"}
    )
    git = _git([older, newer], validator)
    assert git["events"][-1] == {"fixed": "20260306" * 5}
    from torchbisect.page.headline import build_headline

    assert build_headline("NVIDIA H200", [], [older, newer]).first_fixed.date == "2026-03-06"


def _bisection(direction: Direction, verdicts: dict[str, str]) -> BisectResult:
    """A bisection over nightlies of 2026-03 whose points are `verdicts` (date: good/bad/unknown);
    the pair is the nearest judged nightlies around the change."""
    points = tuple(
        NightlyPoint(
            date=d,
            version=f"2.16.0.dev{d.replace('-', '')}+cu132",
            verdict=v,
            main_sha=d.replace("-", "") * 5,
        )
        for d, v in sorted(verdicts.items())
    )
    old, new = ("good", "bad") if direction is Direction.REGRESSION else ("bad", "good")
    after = next(p for p in points if p.verdict.value == new)
    before = [p for p in points if p.verdict.value == old and p.date < after.date][-1]
    return BisectResult(
        direction=direction,
        case="capture_data_ptr",
        cuda="cu132",
        python="3.12",
        before=before,
        after=after,
        probes=len(points),
        points=points,
    )


def _git(bisections, validator):
    doc = osv_document([], bisections, generated=NOW)
    assert list(validator.iter_errors(doc)) == []
    [git] = [r for r in doc["affected"][0]["ranges"] if r["type"] == "GIT"]
    return git


def test_a_regression_hidden_by_unknown_nightlies_opens_at_the_first_measured_bad_commit(validator):
    found = _bisection(
        Direction.REGRESSION,
        {
            "2026-03-01": "good",
            "2026-03-02": "unknown",
            "2026-03-03": "unknown",
            "2026-03-04": "bad",
            "2026-03-09": "bad",
        },
    )
    assert not found.exact
    git = _git([found], validator)
    # No commit of an unjudged nightly is named as where it began: 03-04 was measured bad.
    assert git["events"] == [{"introduced": "20260304" * 5}, {"last_affected": "20260309" * 5}]
    assert git["database_specific"] == {
        "introduced": {
            "exact": False,
            "after_commit": "20260301" * 5,
            "at_or_before_commit": "20260304" * 5,
            "candidates": ["2026-03-02", "2026-03-03", "2026-03-04"],
            "unit": "nightly",
        }
    }


def test_a_fix_hidden_by_unknown_nightlies_ends_at_the_last_measured_bad_commit(validator):
    regression = _bisection(Direction.REGRESSION, {"2026-03-01": "good", "2026-03-02": "bad"})
    fix = _bisection(
        Direction.FIX, {"2026-03-05": "bad", "2026-03-06": "unknown", "2026-03-07": "good"}
    )
    git = _git([regression, fix], validator)
    # `fixed` at 03-07 would call 03-06 affected; nobody could tell.
    assert git["events"] == [{"introduced": "20260302" * 5}, {"last_affected": "20260305" * 5}]
    assert git["database_specific"]["fixed"]["candidates"] == ["2026-03-06", "2026-03-07"]
    assert "introduced" not in git["database_specific"]  # the regression is exact
    exact_fix = _bisection(Direction.FIX, {"2026-03-05": "bad", "2026-03-06": "good"})
    assert _git([regression, exact_fix], validator) == {
        "type": "GIT",
        "repo": "https://github.com/pytorch/pytorch",
        "events": [{"introduced": "20260302" * 5}, {"fixed": "20260306" * 5}],
    }


def _down_to(nightly: BisectResult, *verdicts: str) -> BisectResult:
    """`nightly` with a commit bisection over commits "1…", "2…", … (40 hex digits each) between
    its pair, judged `verdicts` (good/bad/unknown, oldest first; a fix's answer turns good)."""
    points = tuple(
        NightlyPoint(
            date="2026-03-04", version="v", verdict=v, commit=f"{i}" * 40, main_sha=f"{i}" * 40
        )
        for i, v in enumerate(verdicts, 1)
    )
    new = "bad" if nightly.direction is Direction.REGRESSION else "good"
    after = next(p for p in points if p.verdict.value == new)
    before = [p for p in points[: points.index(after)] if p.verdict.value != "unknown"][-1]
    between = points[points.index(before) + 1 : points.index(after) + 1]
    commits = dataclasses.replace(
        nightly, before=before, after=after, points=points, candidates=tuple(p.key for p in between)
    )
    return dataclasses.replace(nightly, narrowed=commits)


def test_an_exact_first_bad_commit_opens_the_git_range_at_that_commit(validator):
    nightly = _bisection(
        Direction.REGRESSION, {"2026-03-01": "good", "2026-03-04": "bad", "2026-03-09": "bad"}
    )
    found = _down_to(nightly, "good", "good", "bad", "bad")
    assert found.narrowed.exact
    # the commit itself, not the first bad nightly's main commit three commits later
    assert _git([found], validator) == {
        "type": "GIT",
        "repo": "https://github.com/pytorch/pytorch",
        "events": [{"introduced": "3" * 40}, {"last_affected": "20260309" * 5}],
    }


def test_an_exact_commit_under_an_inexact_nightly_answer_is_the_answer(validator):
    # unknown nightlies hid the change; the commits between the pair found it
    nightly = _bisection(
        Direction.REGRESSION, {"2026-03-01": "good", "2026-03-02": "unknown", "2026-03-04": "bad"}
    )
    assert not nightly.exact
    git = _git([_down_to(nightly, "good", "unknown", "good", "bad")], validator)
    assert git["events"] == [{"introduced": "4" * 40}, {"last_affected": "20260304" * 5}]
    assert "database_specific" not in git  # nothing left unjudged to name


def test_an_exact_fixing_commit_closes_the_git_range_with_fixed_there(validator):
    regression = _bisection(Direction.REGRESSION, {"2026-03-01": "good", "2026-03-02": "bad"})
    fix = _bisection(
        Direction.FIX, {"2026-03-05": "bad", "2026-03-06": "unknown", "2026-03-07": "good"}
    )
    git = _git([regression, _down_to(fix, "bad", "bad", "good", "good")], validator)
    assert git["events"] == [{"introduced": "20260302" * 5}, {"fixed": "3" * 40}]
    assert "database_specific" not in git
    both = _git([_down_to(regression, "good", "bad"), _down_to(fix, "bad", "good")], validator)
    assert both["events"] == [{"introduced": "2" * 40}, {"fixed": "2" * 40}]


@pytest.mark.parametrize("direction", list(Direction))
def test_a_commit_answer_that_is_a_range_claims_no_unjudged_commit(direction, validator):
    """ "One of N commits" (compiled commits no binary could run): the range stays on the
    nightlies' measured commits, as without the commit bisection."""
    old, new = ("good", "bad") if direction is Direction.REGRESSION else ("bad", "good")
    regression = _bisection(Direction.REGRESSION, {"2026-03-01": "good", "2026-03-02": "bad"})
    nightly = _bisection(direction, {"2026-03-05": old, "2026-03-06": "unknown", "2026-03-07": new})
    others = [regression] if direction is Direction.FIX else []
    commits = _down_to(nightly, old, "unknown", "unknown", new)
    assert not commits.narrowed.exact
    assert _git([*others, commits], validator) == _git([*others, nightly], validator)


def test_results_json_names_the_first_affected_nightly_only_as_far_as_it_was_measured(tmp_path):
    found = _bisection(
        Direction.REGRESSION, {"2026-03-01": "good", "2026-03-02": "unknown", "2026-03-04": "bad"}
    )
    runs = [_nightly(1, GOOD), _nightly(4, BAD), _nightly(9, GOOD)]
    render_runs(runs, [found], tmp_path, generated=NOW)
    [headline] = json.loads((tmp_path / "results.json").read_text())["headlines"]
    affected, fixed = headline["first_affected_nightly"], headline["first_fixed_nightly"]
    assert (affected["date"], affected["exact"]) == ("2026-03-04", False)
    assert affected["candidates"] == ["2026-03-02", "2026-03-04"]
    assert affected["text"].startswith("one of 2: 2026-03-02, 2026-03-04")
    # Not bisected, days untested in between: no nightly is named as the first fixed one.
    assert (fixed["date"], fixed["exact"], fixed["candidates"]) == ("2026-03-09", False, [])
    assert "not bisected" in fixed["text"]
    per_gpu = json.loads((tmp_path / "affected.json").read_text())["affected"][0][
        "database_specific"
    ]["per_gpu"]["NVIDIA H200"]
    assert per_gpu["first_affected_nightly"] is None
    assert per_gpu["first_affected_nightly_span"] == {
        "after": "2026-03-01",
        "at_or_before": "2026-03-04",
        "candidates": ["2026-03-02", "2026-03-04"],
    }


# --- A scanner's reading: osv.dev's own library expands each range over PyPI's torch releases ---

# Run inside osv's own venv (its pins clash with ours): PyPI's JSON API is answered from
# tests/data/pypi/ on 127.0.0.1, the one thing changed; the expansion is the library's.
EXPAND = """
import json, sys
from osv import ecosystems, impact, vulnerability_pb2
ecosystems.PyPI._API_PACKAGE_URL = sys.argv[1] + "/pypi/{package}.json"
out = {}
for path in sys.argv[2:]:
    doc = json.load(open(path))
    found = set()
    for affected in doc["affected"]:
        for rng in affected["ranges"]:
            if rng["type"] == "ECOSYSTEM":
                events = [vulnerability_pb2.Event(**e) for e in rng["events"]]
                found.update(impact.enumerate_versions(
                    "torch", ecosystems.get("PyPI"), vulnerability_pb2.Range(events=events)))
    out[path] = sorted(found)
print(json.dumps(out))
"""
PYPI = REPO / "tests" / "data" / "pypi"
RELEASES = list(json.loads((PYPI / "torch.json").read_text())["releases"])  # ascending


@pytest.fixture(scope="module")
def osv_python(tmp_path_factory):
    """A venv with PyPI's `osv` package (osv.dev's library), built once per module."""
    import shutil
    import subprocess
    import sys

    uv = shutil.which("uv") or str(Path(sys.executable).with_name("uv"))
    venv = tmp_path_factory.mktemp("osv") / "venv"
    python = venv / "bin" / "python"
    steps = [
        [uv, "venv", "-q", "--python", sys.executable, str(venv)],
        [uv, "pip", "install", "-q", "--python", str(python), "osv"],
    ]
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            why = f"cannot install osv.dev's library ({' '.join(step[:3])}): {done.stderr[-500:]}"
            if IN_CI:
                pytest.fail(why)
            pytest.skip(why)
    return python


def _expand(python, records: list[Path]) -> dict[str, list[str]]:
    import subprocess

    with serve(PYPI.parent) as url:
        done = subprocess.run(
            [str(python), "-c", EXPAND, url, *map(str, records)],
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def measured_span(results: dict) -> set[str]:
    """PyPI releases from a measured affected release to the next ones measured affected, with no
    release measured not affected between them: what a record may claim, read from results.json."""
    state: dict[str, str] = {}
    for r in results["runs"]:
        version = Version(r["cell"]["version"])
        release = r["cell"]["channel"] == "stable" or (
            r["cell"]["channel"] == "preinstalled"
            and not version.is_prerelease
            and re.fullmatch(r"(cu|rocm|cpu)\d*[\d.]*", version.local or "cpu")
        )
        if not release or r["verdict"] in (None, "skipped", "error", "not_applicable"):
            continue
        bad = r["verdict"] == "affected"
        state[version.public] = "bad" if bad or state.get(version.public) == "bad" else "good"
    measured = sorted(state, key=Version)
    span, start = set(), None
    for i, version in enumerate(measured):
        if state[version] != "bad":
            start = None
            continue
        start = start or version
        if i + 1 == len(measured) or state[measured[i + 1]] != "bad":
            span |= {v for v in RELEASES if Version(start) <= Version(v) <= Version(version)}
            start = None
    return span


# Scenarios over releases PyPI has, so the expansion can be compared with what was measured.
SPANS = {
    "all affected": [run("2.11.0+cu130", BAD), run("2.15.0+cu132", BAD)],
    "a fix between": [
        run("2.2.0+cu121", GOOD),
        run("2.3.0+cu121", BAD),
        run("2.5.1+cu124", BAD),
        run("2.6.0+cu124", {"capture_data_ptr": Verdict.REFUSED}),
        run("2.12.0+cu130", BAD),
        run("2.13.0+cu130", BAD),
    ],
    "one release": [run("2.9.1+cu128", BAD), run("2.10.0+cu128", GOOD)],
    "preinstalled and a gap without a verdict": [
        run("2.11.0+cu130", BAD, channel=Channel.PREINSTALLED, cell_id="preinstalled"),
        run("2.12.1+cu130", infra="HTTP 503"),
        run("2.14.1+cu130", BAD),
    ],
    "two gpus": [
        run("2.13.0+cu130", BAD),
        run("2.14.0+cu130", GOOD, gpu="NVIDIA A100"),
        run("2.14.0+cu130", BAD),
    ],
    "nothing affected": [run("2.15.0+cu132", GOOD)],
    # a `fixed` event: the next release after the last affected one, measured not affected
    "a measured fix": [run("2.4.1+cu124", BAD), run("2.5.0+cu124", BAD), run("2.5.1+cu124", GOOD)],
    "a fix behind an unmeasured release": [
        run("2.4.0+cu124", BAD),
        run("2.4.1+cu124", infra="x"),
        run("2.5.0+cu124", GOOD),
    ],
    # issue 53.3: a fix measured on another GPU model, or on another CUDA tag, is no fix of the
    # one that was affected: `fixed: 2.15.0` would have a scanner count 2.14.1 as well
    "a fix on another gpu only": [
        run("2.14.0+cu130", BAD),
        run("2.15.0+cu130", GOOD, gpu="NVIDIA A100"),
    ],
    "a fix on another tag only": [
        run("2.14.0+cu126", BAD),
        run("2.14.0+cu130", BAD),
        run("2.15.0+cu130", GOOD),
    ],
}


@pytest.mark.slow
def test_a_scanner_expanding_each_record_gets_exactly_the_measured_span(osv_python, tmp_path):
    records, spans = [], {}
    for name, runs in SPANS.items():
        out = tmp_path / name.replace(" ", "-")
        render_runs(runs, [], out, generated=NOW)
        records.append(out / "affected.json")
    records += COMMITTED
    for record in records:
        spans[str(record)] = measured_span(json.loads((record.parent / "results.json").read_text()))
    expanded = _expand(osv_python, records)
    for record in records:
        doc = json.loads(record.read_text())
        claimed = set(expanded[str(record)])
        assert claimed == spans[str(record)], record
        # every release measured affected is in the record, by name and inside a range
        listed = set(doc["affected"][0]["versions"])
        assert listed <= claimed | (listed - set(RELEASES)), record
        assert all(
            e.get("introduced") != "0" for r in doc["affected"][0]["ranges"] for e in r["events"]
        )
    assert expanded[str(records[0])] == [
        "2.11.0",
        "2.12.0",
        "2.12.1",
        "2.13.0",
        "2.14.0",
        "2.14.1",
        "2.15.0",
    ]
    ranges = {
        r.parent.name: json.loads(r.read_text())["affected"][0]["ranges"]
        for r in records[: len(SPANS)]
    }
    assert ranges["a-measured-fix"][0]["events"][-1] == {"fixed": "2.5.1"}
    assert ranges["a-fix-behind-an-unmeasured-release"][0]["events"][-1] == {
        "last_affected": "2.4.0"
    }
    for name in ("a-fix-on-another-gpu-only", "a-fix-on-another-tag-only"):
        assert ranges[name][0]["events"] == [{"introduced": "2.14.0"}, {"last_affected": "2.14.0"}]


# --- since when: a release measured without torch._lazy_clone (issue 31) -------------------------

ABSENT = {
    name: Verdict.NOT_APPLICABLE
    for name in (
        "capture_data_ptr",
        "capture_write",
        "side_stream",
        "compile_reduce_overhead",
        "raw_pointer_triton",
    )
}


def _ecosystem(doc):
    [pypi] = [r for r in doc["affected"][0]["ranges"] if r["type"] == "ECOSYSTEM"]
    return pypi


def _since(detail: str, *newer: str):
    return [run("2.2.2+cu121", ABSENT, detail=detail)] + [run(v, BAD) for v in newer]


def test_a_release_measured_without_the_api_just_before_the_first_affected_one_says_since_when(
    validator,
):
    from torchbisect.page.headline import build_headline

    runs = _since("torch._lazy_clone is absent in this build", "2.3.0+cu121", "2.15.0+cu132")
    doc = osv_document(runs, [], generated=NOW)
    validator.validate(doc)
    assert _ecosystem(doc)["events"] == [{"introduced": "2.3.0"}, {"last_affected": "2.15.0"}]
    assert _ecosystem(doc)["database_specific"]["introduced"] == {
        "2.3.0": "the first release with torch._lazy_clone: 2.2.2 was measured without it"
    }
    found = doc["affected"][0]
    assert found["versions"] == ["2.3.0", "2.15.0"]
    assert found["database_specific"]["tested_versions"] == ["2.2.2", "2.3.0", "2.15.0"]
    assert build_headline("NVIDIA H200", runs, [], api="torch._lazy_clone").text == (
        "2.3.0 – 2.15.0 affected on NVIDIA H200, not measured between 2.3.0 and 2.15.0 "
        "(releases before 2.3.0 have no torch._lazy_clone: 2.2.2 was measured without it)"
    )


def test_without_that_measurement_the_first_affected_release_is_only_the_oldest_tested():
    from torchbisect.page.headline import build_headline

    runs = [run("2.3.0+cu121", BAD), run("2.15.0+cu132", BAD)]
    assert _ecosystem(osv_document(runs, [], generated=NOW))["database_specific"] == {
        "introduced": {"2.3.0": "the oldest release tested: older ones were not tested"}
    }
    assert build_headline("NVIDIA H200", runs, []).text.endswith(
        "(releases before 2.3.0 were not tested)"
    )


def test_not_applicable_for_want_of_another_api_is_no_sign_the_bug_begins_after_it():
    from torchbisect.page.headline import build_headline

    runs = _since("torch.cuda.graph is absent in this build", "2.3.0+cu121")
    assert _ecosystem(osv_document(runs, [], generated=NOW))["database_specific"] == {
        "introduced": {
            "2.3.0": "the oldest affected release tested; 2.2.2 before it was "
            "measured without a verdict"
        }
    }
    assert build_headline("NVIDIA H200", runs, []).text.endswith(
        "(releases before 2.2.2 were not tested)"
    )


def test_a_release_between_that_was_not_measured_keeps_the_range_open_at_the_first_tested():
    runs = _since("torch._lazy_clone is absent in this build", "2.3.0+cu121")
    runs.insert(1, run("2.2.9+cu121", infra="wheel download: HTTP 503"))
    basis = _ecosystem(osv_document(runs, [], generated=NOW))["database_specific"]["introduced"]
    # an infrastructure failure says nothing either way: 2.2.9 may have the API, so 2.3.0 is
    # not called the first release with it (issue 52.3: a gap never measured)
    assert basis == {
        "2.3.0": "the oldest affected release tested; 2.2.2 before it was measured "
        "without torch._lazy_clone"
    }


def test_a_fix_affected_again_leaves_the_git_range_open(validator):
    """A fix bisection found 03-06, and the 03-09 nightly is measured affected again: the range
    had closed at the fix, and a scanner took every commit after it as not affected."""
    regression = _bisection(Direction.REGRESSION, {"2026-03-01": "good", "2026-03-02": "bad"})
    fix = _bisection(Direction.FIX, {"2026-03-05": "bad", "2026-03-06": "good"})
    runs = [_nightly(1, GOOD), _nightly(2, BAD), _nightly(6, GOOD), _nightly(9, BAD)]
    doc = osv_document(runs, [regression, fix], generated=NOW)
    validator.validate(doc)
    [git] = [r for r in doc["affected"][0]["ranges"] if r["type"] == "GIT"]
    assert git["events"] == [{"introduced": "20260302" * 5}]
    assert git["database_specific"]["fixed"]["affected_again"] == "2026-03-09"
    held = osv_document(runs[:3], [regression, fix], generated=NOW)
    [git] = [r for r in held["affected"][0]["ranges"] if r["type"] == "GIT"]
    assert git["events"] == [{"introduced": "20260302" * 5}, {"fixed": "20260306" * 5}]
