"""Any regression, one site: the report knows no bug of its own.  Each probe's page, Markdown and
OSV record say what its own file says (title, workaround, fix PR, case labels); a store of two
probes draws a page each and an index; a measured fix is said as `fixed in X` and as an OSV
`fixed` event only when no release between was left unmeasured; what a probe file says is
escaped like anything else a probe writes."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import re
import shutil
from html import unescape
from pathlib import Path

import pytest
from helpers.cli import call

from torchbisect.bench.synthetic import synthetic_run
from torchbisect.exits import Exit
from torchbisect.model import PROBE_SCHEMA, CellRun, ProbeResult, RunStatus
from torchbisect.report import build_view, render_runs
from torchbisect.report.probe_files import cell_for
from torchbisect.report.writers.osv import osv_document
from torchbisect.store.db import Store

REPO = Path(__file__).resolve().parents[2]
NOW = dt.datetime(2026, 3, 20, 12, 0, tzinfo=dt.timezone.utc)
BAD = {"capture_data_ptr": (5, 5), "capture_write": (5, 5)}

LEAK = '''"""torch.nn.functional.leaky_thing leaks 1 MiB per call on CUDA

Each call keeps a workspace alive; memory grows until the process dies.
"""
PROBE_OUTPUT = "exit_status"
UPSTREAM_ISSUE = "https://github.com/pytorch/pytorch/issues/111111"
FIX_PR = "https://github.com/pytorch/pytorch/pull/222222"
WORKAROUND = "Call torch.cuda.empty_cache() after each batch."
CASE_LABELS = {"leaky_thing": "1,000 calls, memory measured"}
'''


def one_case_run(
    probe: str,
    version: str,
    verdict: str,
    *,
    started: str = "",
    status: RunStatus = RunStatus.OK,
    case: str = "",
) -> CellRun:
    """A run of an exit-status probe: one case, named after the probe."""
    cell = dataclasses.replace(cell_for(version, "3.12"), probe=probe)
    common = dict(cell=cell, gpu="NVIDIA H200", driver="580.159.04", started=started)
    if status is RunStatus.INFRA_FAILURE:
        return CellRun(status=status, reason="install: no wheel", **common)
    doc = {
        "schema": PROBE_SCHEMA,
        "probe": probe,
        "probe_version": "1+abc",
        "verdict": verdict,
        "cases": {case or probe: {"verdict": verdict, "detail": f"exit status of {probe}"}},
        "env": {"torch": version, "gpu": "NVIDIA H200", "python": "3.12.3"},
    }
    return CellRun(
        status=status, result=ProbeResult.from_json(doc), probe_version="1+abc", **common
    )


@pytest.fixture
def probes(tmp_path, monkeypatch):
    """A probes folder of the user's: their leak probe and torchbisect's own two."""
    folder = tmp_path / "probes"
    folder.mkdir()
    (folder / "leaky_thing.py").write_text(LEAK)
    for name in ("stale_replay.py", "cumsum_64bit.py"):
        shutil.copyfile(REPO / "probes" / name, folder / name)
    monkeypatch.setenv("TORCHBISECT_PROBES", str(folder))
    return folder


def _text(path: Path) -> str:
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", path.read_text())).split())


def test_a_store_of_two_probes_draws_a_page_each_and_an_index(probes, tmp_path):
    # (other builds than the leak's: a store of before issue 47 keeps one run per build and GPU)
    runs = [
        synthetic_run("2.10.0+cu130", BAD, started="2026-03-01T10:00:00+00:00"),
        one_case_run(
            "leaky_thing", "2.11.0+cu130", "affected", started="2026-03-02T10:00:00+00:00"
        ),
        one_case_run(
            "leaky_thing", "2.12.0+cu130", "not_affected", started="2026-03-03T10:00:00+00:00"
        ),
    ]
    with Store(tmp_path / "results.sqlite") as store:
        store.add_many(runs)
    site = tmp_path / "site"
    assert (
        call(
            "report",
            "--store",
            str(tmp_path / "results.sqlite"),
            "--out",
            str(site),
            "--matrix",
            str(tmp_path / "no-matrix.yaml"),
        )
        == Exit.OK
    )

    index = _text(site / "index.html")
    assert "2 regressions measured" in index
    assert (
        "torch.nn.functional.leaky_thing leaks 1 MiB per call on CUDA leaky_thing "
        "2.11.0 affected on NVIDIA H200, fixed in 2.12.0"
    ) in index
    assert "torch._lazy_clone copies can hand stale data" in index
    assert 'href="leaky_thing/index.html"' in (site / "index.html").read_text()
    listed = json.loads((site / "regressions.json").read_text())["regressions"]
    assert [(r["probe"], r["folder"], r["gpus"], r["newest_run"]) for r in listed] == [
        ("leaky_thing", "leaky_thing", ["NVIDIA H200"], "2026-03-03"),
        ("stale_replay", "stale_replay", ["NVIDIA H200"], "2026-03-01"),
    ]

    for probe in ("leaky_thing", "stale_replay"):
        for name in ("index.html", "summary.md", "results.json", "affected.json", f"{probe}.py"):
            assert (site / probe / name).is_file(), (probe, name)
        assert 'href="../index.html"' in (site / probe / "index.html").read_text()
    # each page holds its own probe's runs only, and its record is its own
    leak = json.loads((site / "leaky_thing" / "results.json").read_text())
    assert {r["cell"]["probe"] for r in leak["runs"]} == {"leaky_thing"}
    lazy = json.loads((site / "stale_replay" / "affected.json").read_text())
    assert lazy["id"] == "x_TORCHBISECT-lazy-clone-cuda-graph"
    assert lazy["affected"][0]["versions"] == ["2.10.0"]
    assert json.loads((site / "leaky_thing" / "affected.json").read_text())["id"] == (
        "x_TORCHBISECT-leaky-thing"
    )
    # a single page, as before, is not what this store draws
    assert not (site / "summary.md").exists()


def test_a_probe_s_fix_pr_workaround_and_case_labels_are_shown(probes, tmp_path, validator):  # noqa: F811
    runs = [
        one_case_run("leaky_thing", "2.11.0+cu130", "affected"),
        one_case_run("leaky_thing", "2.12.0+cu130", "not_affected"),
    ]
    render_runs(runs, [], tmp_path / "page", generated=NOW)
    html = (tmp_path / "page" / "index.html").read_text()
    text = _text(tmp_path / "page" / "index.html")
    assert (
        "<h1>torchbisect · torch.nn.functional.leaky_thing leaks 1 MiB per call on CUDA</h1>"
    ) in html
    assert "Each call keeps a workspace alive; memory grows until the process dies." in text
    assert "Workaround Call torch.cuda.empty_cache() after each batch." in text
    assert (
        'The fix, as the probe names it: <a href="https://github.com/pytorch/pytorch/pull/'
        '222222" rel="noopener noreferrer">pytorch/pytorch#222222 on GitHub</a>'
    ) in html
    assert "1,000 calls, memory measured" in text  # the case's column, as CASE_LABELS names it
    assert "pytorch/pytorch#111111 on GitHub" in text  # the upstream issue it names
    assert "run python leaky_thing.py" in text
    summary = (tmp_path / "page" / "summary.md").read_text()
    assert summary.startswith("## torch.nn.functional.leaky_thing leaks 1 MiB per call on CUDA\n")
    assert "- **Workaround:** Call torch.cuda.empty_cache() after each batch." in summary
    assert "The fix, as the probe names it: https://github.com/pytorch/pytorch/pull/222222" in (
        summary
    )
    assert "| 1,000 calls, memory measured |" in summary
    osv = json.loads((tmp_path / "page" / "affected.json").read_text())
    validator.validate(osv)
    assert osv["summary"] == "torch.nn.functional.leaky_thing leaks 1 MiB per call on CUDA"
    assert "Workaround: Call torch.cuda.empty_cache() after each batch." in osv["details"]
    assert {"type": "FIX", "url": "https://github.com/pytorch/pytorch/pull/222222"} in (
        osv["references"]
    )
    assert {"type": "REPORT", "url": "https://github.com/pytorch/pytorch/issues/111111"} in (
        osv["references"]
    )


# The lazy-clone bug's words (a "clone of torchbisect" is git's, a "control case" any probe's).
_LAZY_WORDS = re.compile(
    r"lazy|clone\(\)|copy-on-write|cuda graph|graph replay|capture|"
    r"stale (data|copy)|control_|side.stream|triton",
    re.IGNORECASE,
)


def test_a_report_without_the_lazy_clone_probe_says_nothing_of_that_bug(tmp_path):
    runs = [
        one_case_run("cumsum_64bit", "2.5.1+cu124", "affected"),
        one_case_run("cumsum_64bit", "2.6.0+cu124", "not_affected"),
    ]
    written = render_runs(runs, [], tmp_path, generated=NOW)
    names = sorted(p.name for p in written)
    assert "cumsum_64bit.py" in names and "stale_replay.py" not in names
    for path in written:
        if path.suffix == ".py" or path.name.endswith(".schema.json"):
            continue  # the probe itself, and the document formats
        # the probe document's field name `stale_trials` is its format, not the bug's words
        text = path.read_text().replace("stale_trials", "")
        assert not _LAZY_WORDS.search(text), (path.name, _LAZY_WORDS.search(text)[0])
    page = _text(tmp_path / "index.html")
    assert "torch.cumsum over the last dimension is silently wrong past 2**32 elements" in page
    assert "2.5.1 affected on NVIDIA H200, fixed in 2.6.0" in page
    # the title's `2**32` stays text in Markdown, never the start of bold
    assert (
        (tmp_path / "summary.md")
        .read_text()
        .startswith(
            "## torch.cumsum over the last dimension is silently wrong past 2\\*\\*32 elements "
            "on CUDA\n"
        )
    )


def _pypi(doc: dict) -> list[dict]:
    return doc["affected"][0]["ranges"][0]["events"]


@pytest.mark.parametrize(
    ("between", "fixed"),
    [
        ([], "2.6.0"),  # nothing between: 2.6.0 is the first release after 2.5.1
        ([("2.5.2+cu124", "not_affected")], "2.5.2"),  # the first one measured not affected
        ([("2.5.2+cu124", "infra")], ""),  # not measured: the fix could be there
        ([("2.5.2+cu124", "skipped")], ""),  # probed without a verdict: no measurement either
        ([("2.5.2+cu124", "affected")], "2.6.0"),  # the last affected one moves, the fix follows
    ],
)
def test_the_osv_fixed_event_appears_only_when_every_release_between_was_measured(
    between, fixed, validator
):  # noqa: F811
    runs = [
        one_case_run("cumsum_64bit", "2.5.1+cu124", "affected"),
        one_case_run("cumsum_64bit", "2.6.0+cu124", "not_affected"),
    ]
    runs += [
        one_case_run("cumsum_64bit", v, "error", status=RunStatus.INFRA_FAILURE)
        if state == "infra"
        else one_case_run("cumsum_64bit", v, state)
        for v, state in between
    ]
    doc = osv_document(runs, [], generated=NOW)
    validator.validate(doc)
    page = build_view(runs, [], generated=NOW)
    if fixed:
        assert _pypi(doc)[-1] == {"fixed": fixed}
        assert doc["affected"][0]["database_specific"]["fixed_version"] == fixed
        assert page.sections[0].headline.claim.endswith(
            f"affected on NVIDIA H200, fixed in {fixed}"
        )
    else:
        assert _pypi(doc)[-1] == {"last_affected": "2.5.1"}
        assert "fixed" not in page.sections[0].headline.claim
        assert (
            "2.6.0 was measured not affected, but not every release between it and 2.5.1"
            in (page.advice.fixes[0])
        )


def test_a_skipped_minor_series_is_never_called_fixed():
    runs = [
        one_case_run("cumsum_64bit", "2.4.0+cu124", "affected"),
        one_case_run("cumsum_64bit", "2.6.0+cu124", "not_affected"),
    ]  # 2.5.x never listed
    assert _pypi(osv_document(runs, [], generated=NOW))[-1] == {"last_affected": "2.4.0"}


HOSTILE = '''"""<script>alert(1)</script> \x1b[31mred\x1b[0m \u202eevil title

The <img src=x onerror=alert(2)> description [link](javascript:alert(3)) @someone #123.
"""
PROBE_OUTPUT = "exit_status"
FIX_PR = "javascript:alert(4)"
UPSTREAM_ISSUE = "https://github.com/pytorch/pytorch/issues/1\\"><script>alert(5)</script>"
WORKAROUND = "Use <b>this</b>\\x07 | and that |"
CASE_LABELS = {"hostile": "<i>case</i> | label"}
'''


def test_hostile_metadata_in_a_probe_file_is_escaped_on_the_page(tmp_path, monkeypatch):
    folder = tmp_path / "probes"
    folder.mkdir()
    (folder / "hostile.py").write_text(HOSTILE)
    monkeypatch.setenv("TORCHBISECT_PROBES", str(folder))
    runs = [one_case_run("hostile", "2.11.0+cu130", "affected")]
    render_runs(runs, [], tmp_path / "page", generated=NOW)
    html = (tmp_path / "page" / "index.html").read_text()
    assert "<script>" not in html and "<img" not in html and "<b>this" not in html
    assert "<i>case" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "\x1b" not in html and "\u202e" not in html and "\x07" not in html
    assert 'href="javascript' not in html  # FIX_PR is no https link: not linked at all
    assert "The fix, as the probe names it" not in html
    summary = (tmp_path / "page" / "summary.md").read_text()
    assert "<script>" not in summary and "<b>" not in summary and "\x1b" not in summary
    assert "](javascript" not in summary
    table = [line for line in summary.splitlines() if line.startswith("| build")]
    assert table == ["| build | channel | verdict | &lt;i&gt;case&lt;/i&gt; \\| label |"]
    osv = json.loads((tmp_path / "page" / "affected.json").read_text())
    assert "\x1b" not in osv["summary"] and all(
        r["url"].startswith("https://") for r in osv["references"]
    )
    assert not any(r["type"] == "FIX" for r in osv["references"])  # not an https link
    # `details` is CommonMark, which passes HTML through: the probe's tags are entities there
    assert "<img" not in osv["details"] and "<b>" not in osv["details"]
    assert "The &lt;img src=x onerror=alert(2)&gt; description" in osv["details"]
    assert "Workaround: Use &lt;b&gt;this&lt;/b&gt;" in osv["details"]


def test_a_page_of_one_probe_is_still_drawn_where_it_always_was(tmp_path):
    render_runs([synthetic_run("2.11.0+cu130", BAD)], [], tmp_path, generated=NOW)
    assert (tmp_path / "index.html").is_file() and (tmp_path / "affected.json").is_file()
    assert not (tmp_path / "regressions.json").exists()
    assert not (tmp_path / "stale_replay").exists()
    assert json.loads((tmp_path / "affected.json").read_text())["id"] == (
        "x_TORCHBISECT-lazy-clone-cuda-graph"
    )


def test_a_probe_file_that_is_not_at_hand_still_draws_its_page(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHBISECT_PROBES", str(tmp_path / "empty"))
    runs = [one_case_run("gone_probe", "2.11.0+cu130", "affected", case="the_case")]
    written = render_runs(runs, [], tmp_path / "page", generated=NOW)
    assert not any(p.suffix == ".py" for p in written)
    text = _text(tmp_path / "page" / "index.html")
    assert "torchbisect · gone probe" in text and "the_case" in text
    assert "The probe's file is not at hand where this page was drawn" in text
    assert json.loads((tmp_path / "page" / "affected.json").read_text())["id"] == (
        "x_TORCHBISECT-gone-probe"
    )


def test_a_probe_the_matrix_names_gets_its_page_before_it_has_runs(tmp_path):
    render_runs(
        [synthetic_run("2.11.0+cu130", BAD)],
        [],
        tmp_path,
        generated=NOW,
        probes=["stale_replay", "cumsum_64bit"],
    )
    listed = json.loads((tmp_path / "regressions.json").read_text())["regressions"]
    assert [(r["probe"], r["runs"]) for r in listed] == [("stale_replay", 1), ("cumsum_64bit", 0)]
    assert "The store holds no run of the probe cumsum_64bit yet" in _text(
        tmp_path / "cumsum_64bit" / "index.html"
    )
    assert "none yet" in _text(tmp_path / "index.html")  # no GPU model measured it


def test_a_site_that_grows_a_second_regression_keeps_the_first_record_s_published_date(tmp_path):
    lazy = [synthetic_run("2.11.0+cu130", BAD)]
    render_runs(lazy, [], tmp_path, generated=NOW)
    first = json.loads((tmp_path / "affected.json").read_text())
    later = NOW + dt.timedelta(days=3)
    render_runs(
        lazy + [one_case_run("cumsum_64bit", "2.5.1+cu124", "affected")],
        [],
        tmp_path,
        generated=later,
    )
    moved = json.loads((tmp_path / "stale_replay" / "affected.json").read_text())
    assert moved["id"] == first["id"] and moved["published"] == first["published"]
    cumsum = json.loads((tmp_path / "cumsum_64bit" / "affected.json").read_text())
    assert cumsum["published"] == "2026-03-23T12:00:00Z"  # a new record: not the other's date


def test_a_probe_that_reports_no_cuda_runtime_is_not_said_to_have_none(probes, tmp_path):
    # an exit-status script's document names no CUDA runtime: the page must not say "none"
    runs = [one_case_run("leaky_thing", "2.11.0+cu130", "affected")]
    render_runs(runs, [], tmp_path / "page", generated=NOW)
    summary = (tmp_path / "page" / "summary.md").read_text()
    assert "CUDA runtime not reported by the probe" in summary
    assert "no CUDA runtime" not in summary
    assert "not reported by the probe" in _text(tmp_path / "page" / "index.html")
    lazy = [synthetic_run("2.10.0+cu130", BAD)]  # a document probe that names its runtime
    render_runs(lazy, [], tmp_path / "lazy", generated=NOW)
    assert "not reported" not in (tmp_path / "lazy" / "summary.md").read_text()


def _check_section(path: Path) -> str:
    """The visible text of the page's "Check your own torch" line."""
    text = _text(path)
    return text[text.index("Check your own torch") : text.index("Upstream")]


def test_check_your_own_torch_is_this_probes_check(probes, tmp_path):
    """The page sends its reader to its own regression's check: the download of this probe's
    file and the `torchbisect probe --probe NAME` line that runs it (a probe of torchbisect's
    own from a clone, a user's with TORCHBISECT_PROBES naming where it was saved); GPU words
    only for a probe that says it needs a GPU."""
    (probes / "ones_sum.py").write_text(
        '"""torch.ones(n).sum() is wrong on some builds"""\nimport sys\nsys.exit(0)\n'
    )
    runs = [
        one_case_run("ones_sum", "2.10.0+cpu", "not_affected"),
        one_case_run("ones_sum", "2.12.1+cpu", "affected"),
        one_case_run("cumsum_64bit", "2.5.1+cu124", "affected"),
    ]
    render_runs(runs, [], tmp_path / "site", generated=NOW)
    own = _check_section(tmp_path / "site" / "ones_sum" / "index.html")
    assert "Download ones_sum.py and run python ones_sum.py" in own
    assert "TORCHBISECT_PROBES=DIR torchbisect probe --probe ones_sum" in own
    assert "DIR the folder that holds ones_sum.py" in own
    assert "GPU" not in own and "stale_replay" not in own  # a CPU-only check: no GPU words
    assert (
        '<a href="ones_sum.py" download>'
        in (tmp_path / "site" / "ones_sum" / "index.html").read_text()
    )
    summary = (tmp_path / "site" / "ones_sum" / "summary.md").read_text()
    assert "`TORCHBISECT_PROBES=DIR torchbisect probe --probe ones_sum`" in summary
    assert "first GPU" not in summary

    shipped = _check_section(tmp_path / "site" / "cumsum_64bit" / "index.html")
    assert "Download cumsum_64bit.py and run python cumsum_64bit.py" in shipped
    assert "it probes the first GPU" in shipped  # NEEDS_GPU = True in its file
    # the copy in this folder is torchbisect's own file's twin, not torchbisect's own: a folder
    assert "TORCHBISECT_PROBES=DIR torchbisect probe --probe cumsum_64bit" in shipped


def test_a_probe_of_torchbisect_s_own_is_run_from_a_clone(tmp_path):
    runs = [one_case_run("cumsum_64bit", "2.5.1+cu124", "affected")]
    render_runs(runs, [], tmp_path, generated=NOW)
    check = _check_section(tmp_path / "index.html")
    assert "pip install . && torchbisect probe --probe cumsum_64bit in a clone" in check
    assert "it probes the first GPU" in check and "stale_replay" not in check


def test_a_second_probe_prices_its_workaround_with_its_own_benchmark(probes, tmp_path):
    """The workaround's cost is read through the probe's own declaration: a leak probe that
    names its benchmark and field gets its sentence, the lazy-clone benchmark beside it is not
    quoted on its page."""
    (probes / "leaky_thing.py").write_text(
        LEAK + 'WORKAROUND_BENCH = "empty_cache"\n'
        'WORKAROUND_COST = {"key": "empty_cache_ms", "adds_to": "each training step"}\n'
    )
    bench = tmp_path / "site" / "bench"
    bench.mkdir(parents=True)
    rows = [{"size_mib": 4, "empty_cache_ms": 1.5}, {"size_mib": 512, "empty_cache_ms": 3.0}]
    (bench / "empty_cache.json").write_text(
        json.dumps({"gpu": "NVIDIA H100", "torch": "2.12.0", "rows": rows})
    )
    (bench / "workaround.json").write_text(
        json.dumps(
            {
                "gpu": "NVIDIA H200",
                "torch": "2.11.0",
                "rows": [{"size_mib": 1, "graph_clone_node_ms": 0.5}],
            }
        )
    )
    render_runs(
        [one_case_run("leaky_thing", "2.11.0+cu130", "affected")],
        [],
        tmp_path / "site",
        generated=NOW,
    )
    text = _text(tmp_path / "site" / "index.html")
    assert (
        "Measured on NVIDIA H100 (torch 2.12.0): the workaround adds 1.5 ms to each training "
        "step at 4 MiB and 3 ms at 512 MiB."
    ) in text
    assert "graph replay" not in text and "NVIDIA H200 (torch 2.11.0)" not in text
