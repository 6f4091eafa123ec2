"""The four files: the Markdown table, results.json, and the `report` command."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import re

import pytest
from helpers.cli import call

from torchbisect.bench.synthetic import synthetic_run as run
from torchbisect.exits import Exit
from torchbisect.model import Verdict
from torchbisect.report import build_view, render_runs
from torchbisect.report.probe_files import DocumentSource
from torchbisect.report.writers.markdown import md_text, render_markdown

NOW = dt.datetime(2026, 3, 20, 12, 0, tzinfo=dt.timezone.utc)
BAD = {"capture_data_ptr": (5, 5), "capture_write": (5, 5)}
GOOD = {"capture_data_ptr": (0, 5), "capture_write": (0, 5)}


def test_markdown_has_the_headline_and_one_table_line_per_build():
    runs = [
        run("2.11.0+cu130", {**BAD, "side_stream": (7, 20)}),
        run("2.15.0+cu132", BAD),
        run("2.12.0+cu130", infra="docker: image build failed"),
    ]
    text = render_markdown(build_view(runs, [], generated=NOW))
    # the heading is the probe's title; the headline follows it
    assert text.splitlines()[0] == (
        "## torch._lazy_clone copies can hand stale data to kernels "
        "under CUDA Graph replay and race with side streams"
    )
    assert text.splitlines()[2] == (
        "**2.11.0 – 2.15.0 affected on NVIDIA H200, not measured between 2.11.0 and 2.15.0 "
        "(releases before 2.11.0 were not tested)**"
    )
    table = [line for line in text.splitlines() if line.startswith("|")]
    assert table[0].startswith("| build | channel | verdict | capture + data_ptr() |")
    assert table[2] == (
        "| 2.11.0 | stable | ✗ affected | ✗ affected 5/5 | ✗ affected 5/5 "
        "| ◐ flaky 7/20 | ✓ as expected | ✓ as expected |"
    )
    assert table[3].startswith("| 2.12.0 | stable | ⚠ infra failure: docker: image build")
    assert all(line.count("|") == table[0].count("|") for line in table)


def test_markdown_tells_two_builds_of_one_release_apart_by_their_tag():
    """Two CUDA tags of 2.8.0 read "| 2.8.0 | stable | ✓ ok |" and "| 2.8.0 | stable | ✗
    affected |": pasted into an issue, nobody could tell which tag was affected."""
    runs = [run("2.8.0+cu126", GOOD), run("2.8.0+cu128", BAD), run("2.9.0+cu128", BAD)]
    table = [
        line
        for line in render_markdown(build_view(runs, [], generated=NOW)).splitlines()
        if line.startswith("| 2.")
    ]
    assert [line.split(" | ")[0] for line in table] == [
        "| 2.8.0 (cu126 · py3.12)",
        "| 2.8.0 (cu128 · py3.12)",
        "| 2.9.0",
    ]
    assert table[0].split(" | ")[2] == "✓ ok" and table[1].split(" | ")[2] == "✗ affected"


def test_markdown_folds_consecutive_identical_nightlies():
    runs = [run(f"2.16.0.dev202603{d:02d}+cu132", BAD) for d in (1, 2, 3)]
    runs.append(run("2.16.0.dev20260304+cu132", GOOD))
    text = render_markdown(build_view(runs, [], generated=NOW))
    assert "| 2026-03-01 … 2026-03-03 (3 builds) | nightly | ✗ affected | ✗ affected 5/5 |" in text
    assert "| 2026-03-04 | nightly | ✓ ok |" in text


def test_markdown_escapes_untrusted_text():
    assert md_text("a|b <img src=x onerror=alert(1)>\nnext") == (
        "a\\|b &lt;img src=x onerror=alert(1)&gt; next"
    )


def test_markdown_gives_a_probe_s_text_and_links_no_strikethrough_math_or_formatting():
    """A probe's title passed `~~` and `$…$` through (GitHub strikes through and typesets
    them), and its FIX_PR / UPSTREAM_ISSUE URLs passed backticks, `**` and `[`."""
    from torchbisect.report.writers.markdown import md_url

    assert md_text("~~gone~~ $$\\color{red}x$$") == "\\~\\~gone\\~\\~ \\$\\$\\\\color{red}x\\$\\$"
    url = "https://github.com/pytorch/pytorch/pull/1`**[x](javascript:alert(1))**`~$|"
    assert md_url(url) == (
        "https://github.com/pytorch/pytorch/pull/1%60%2A%2A%5Bx%5D%28javascript:alert%281%29%29"
        "%2A%2A%60%7E%24%7C"
    )
    assert md_url("https://github.com/pytorch/pytorch/pull/143696").endswith("/143696")


def test_results_json_lists_every_run_in_page_order_with_raw_strings(tmp_path):
    runs = [
        run("2.15.0+cu132", BAD, detail="<b>raw</b>"),
        run("2.11.0+cu130", BAD),
        run("2.12.0+cu130", infra="OOM"),
    ]
    paths = render_runs(runs, [], tmp_path, generated=NOW)
    assert [p.name for p in paths] == [
        "index.html",
        "results.json",
        "summary.md",
        "affected.json",
        "stale_replay.py",
        "results.schema.json",
        "probe.schema.json",
    ]
    doc = json.loads((tmp_path / "results.json").read_text())
    assert [r["cell"]["id"] for r in doc["runs"]] == [
        "stable-2.11.0-cu130-cp312",
        "stable-2.12.0-cu130-cp312",
        "stable-2.15.0-cu132-cp312",
    ]
    assert doc["runs"][1]["status"] == "infra_failure" and doc["runs"][1]["verdict"] is None
    assert doc["runs"][2]["cases"]["capture_data_ptr"]["detail"] == "<b>raw</b>"
    assert doc["headlines"][0]["affected_ranges"] == [["2.11.0", "2.15.0"]]
    assert json.loads((tmp_path / "affected.json").read_text())["affected"]


def test_report_command_renders_recorded_probe_documents(data_dir, tmp_path, capsys):
    files = sorted(str(p) for p in (data_dir / "report").glob("synthetic-h200-*.json"))
    assert call("report", "--probe-json", *files, "--out", str(tmp_path)) == Exit.OK
    assert (tmp_path / "index.html").is_file()
    assert str(tmp_path / "summary.md") in capsys.readouterr().out
    assert "affected on NVIDIA H200" in (tmp_path / "summary.md").read_text()


def test_report_command_without_a_store_says_what_to_do(tmp_path, capsys):
    assert call("report", "--store", str(tmp_path / "none.sqlite")) == Exit.MISTAKE
    err = capsys.readouterr().err
    assert "no result store at" in err and "run `torchbisect matrix` first" in err


def test_report_command_rejects_a_file_that_is_not_a_probe_document(tmp_path, capsys):
    bad = tmp_path / "x.json"
    bad.write_text('{"schema": 99}')
    assert call("report", "--probe-json", str(bad), "--out", str(tmp_path)) == Exit.MISTAKE
    assert "not a probe JSON document" in capsys.readouterr().err


def test_report_command_renders_the_newest_run_per_cell_from_the_store(tmp_path, capsys):
    store_module = pytest.importorskip("torchbisect.store.db")
    path = tmp_path / "results.sqlite"
    with store_module.Store(path) as store:
        store.add(run("2.11.0+cu130", GOOD, started="2026-03-01T00:00:00Z"))
        store.add(run("2.11.0+cu130", BAD, started="2026-03-02T00:00:00Z"))
    assert call("report", "--store", str(path), "--out", str(tmp_path / "out")) == Exit.OK
    summary = (tmp_path / "out" / "summary.md").read_text()
    assert "**2.11.0 affected on NVIDIA H200" in summary
    assert "newest run: 2026-03-02" in summary


def test_rendered_files_are_readable_by_others_like_any_published_file(tmp_path):
    umask = os.umask(0o022)
    try:
        paths = render_runs([run("2.11.0+cu130", BAD)], [], tmp_path, generated=NOW)
    finally:
        os.umask(umask)
    assert all(p.stat().st_mode & 0o777 == 0o644 for p in paths)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".torchbisect-owned",
        "affected.json",
        "index.html",
        "probe.schema.json",
        "results.json",
        "results.schema.json",
        "stale_replay.py",
        "summary.md",
    ]  # no temporary left over


def test_committed_sample_matches_the_recorded_probe_documents(repo):
    """reports/sample/ is the README's example: it must say what reports/evidence/hand/ says."""
    sample = repo / "reports" / "sample" / "results.json"
    recorded = sorted((repo / "reports" / "evidence" / "hand").glob("h200-torch-*.json"))
    if not sample.is_file() or not recorded:
        pytest.skip("no committed sample or no recorded probe documents")
    fresh = [
        (r.cell.id, r.verdict.value, {c.name: c.verdict.value for c in r.result.cases})
        for r in DocumentSource(recorded).latest()
    ]
    committed = [
        (r["cell"]["id"], r["verdict"], {n: c["verdict"] for n, c in r["cases"].items()})
        for r in json.loads(sample.read_text())["runs"]
    ]
    assert sorted(committed) == sorted(fresh), (
        "reports/sample/ is stale: python -m torchbisect report --probe-json "
        "reports/evidence/hand/h200-torch-*.json --out reports/sample (then retake the "
        "screenshots: python src/torchbisect/pages/chromium.py reports/sample/index.html OUT.png "
        "1400x1000|390x844)"
    )


def test_an_empty_page_shows_commands_as_code_not_backticks(tmp_path):
    render_runs([], [], tmp_path, generated=NOW)
    html = (tmp_path / "index.html").read_text()
    assert "<code>nox -s matrix</code>" in html and "`" not in html
    summary = (tmp_path / "summary.md").read_text()
    assert "`nox -s matrix`" in summary and "\\`" not in summary


def test_a_page_without_a_gpu_says_the_driver_was_not_recorded_and_links_the_measured_pages(
    tmp_path,
):
    for page in ("sample", "h200"):
        (tmp_path / page).mkdir()
        (tmp_path / page / "index.html").write_text("<html></html>")
    skipped = {
        name: Verdict.SKIPPED for name in ("capture_data_ptr", "control_clone", "control_stale")
    }
    render_runs([run("2.13.0+cpu", skipped, gpu="none", driver="")], [], tmp_path, generated=NOW)
    html = (tmp_path / "index.html").read_text()
    env = re.search(r'<table class="env">.*?</table>', html, re.S).group(0)
    assert "not recorded" in env and ">?<" not in env
    assert '<a href="sample/index.html">' in html and '<a href="h200/index.html">' in html
    assert "driver not recorded" in (tmp_path / "summary.md").read_text()


def test_published_files_carry_no_absolute_path_of_the_runner(tmp_path):
    log = (
        "$ /usr/local/bin/uv pip install --python /home/ci/w/.torchbisect/venvs/a/bin/python "
        "'torch @ file:///tmp/wheels/torch-2.15.0-cp312-cp312-manylinux_2_28_x86_64.whl'\n"
        "$ /home/ci/w/.torchbisect/venvs/a/bin/python /home/ci/w/probes/stale_replay.py\n"
        "from https://download.pytorch.org/whl/cu132/torch-2.15.0.whl"
    )
    local = run("2.15.0+cu132", BAD, log=log, detail="see /home/ci/w/.torchbisect/x.json")
    local = dataclasses.replace(
        local,
        cell=dataclasses.replace(
            local.cell, url="/tmp/wheels/torch-2.15.0-cp312-cp312-manylinux_2_28_x86_64.whl"
        ),
    )
    render_runs(
        [local, run("2.14.1+cu130", infra="no space left on /var/lib/docker/tmp/x")],
        [],
        tmp_path,
        generated=NOW,
    )
    for name in ("index.html", "results.json", "summary.md", "affected.json"):
        text = (tmp_path / name).read_text()
        assert not re.search(r"(?<![\w:/.])/(usr|home|tmp|var)/", text), name
    doc = json.loads((tmp_path / "results.json").read_text())
    published = next(r for r in doc["runs"] if r["verdict"])
    assert published["cell"]["url"] == "torch-2.15.0-cp312-cp312-manylinux_2_28_x86_64.whl"
    assert ".torchbisect/venvs/a/bin/python probes/stale_replay.py" in published["log_excerpt"]
    assert "https://download.pytorch.org/whl/cu132/torch-2.15.0.whl" in published["log_excerpt"]


def test_the_committed_pages_carry_no_absolute_path_of_the_runner(repo):
    for page in ("h200", "sample"):
        for name in ("index.html", "results.json", "summary.md", "affected.json"):
            path = repo / "reports" / page / name
            if path.is_file():
                text = path.read_text()
                assert not re.search(r"(?<![\w:/.])/(usr|home|tmp|var|opt|work|root)/", text), path


def _nightlies(days: int, *, flaky_every: int = 0, infra_on: tuple[int, ...] = ()):
    out = []
    for d in range(days):
        version = f"2.16.0.dev{dt.date(2026, 1, 1) + dt.timedelta(days=d):%Y%m%d}+cu132"
        if d in infra_on:
            out.append(run(version, infra="wheel download: HTTP 503"))
        elif flaky_every and d % flaky_every == 3:
            out.append(run(version, {**BAD, "side_stream": (7, 20)}))
        else:
            out.append(run(version, {**BAD, "side_stream": (20, 20)}))
    return out


def test_a_run_of_nightlies_folds_into_one_row_whose_page_lists_them_all(tmp_path):
    runs = _nightlies(40, flaky_every=10, infra_on=(20,))
    render_runs(runs, [], tmp_path, generated=NOW)
    view = build_view(runs, [], generated=NOW)
    [nightly] = [g for g in view.sections[0].groups if g.channel == "nightly"]
    # a side-stream race lost on 7 of 20 trials does not split the run; an infra failure does
    assert [(f.folded, len(f.rows)) for f in nightly.folds] == [(True, 20), (False, 1), (True, 19)]
    side = [c for c in nightly.folds[0].cases[2]]
    assert [(m.word, m.note, n) for m, n in side] == [
        ("affected", "20/20", 18),
        ("flaky", "7/20", 2),
    ]
    html = (tmp_path / "index.html").read_text()
    assert html.count('class="member"') == 0 and html.count("<tr id=") == 1  # the infra row
    assert "◐ flaky 7/20 ×2" in " ".join(html.split())
    page = (tmp_path / nightly.folds[0].href).read_text()
    assert page.count("<tr id=") == 20 and "2026-01-04" in page
    assert "Content-Security-Policy" in page and "<script" not in page
    summary = (tmp_path / "summary.md").read_text()
    assert "| 2026-01-01 … 2026-01-20 (20 builds) | nightly | ✗ affected |" in summary
    assert "✗ affected 20/20 ×18, ◐ flaky 7/20 ×2" in summary


def test_pages_of_folds_an_earlier_render_drew_are_removed_with_it(tmp_path):
    render_runs(_nightlies(12), [], tmp_path, generated=NOW)
    before = sorted(p.name for p in (tmp_path / "nightlies").iterdir())
    render_runs(_nightlies(12, infra_on=(6,)), [], tmp_path, generated=NOW)
    after = sorted(p.name for p in (tmp_path / "nightlies").iterdir())
    assert len(before) == 1 and len(after) == 2 and not set(before) & set(after)
    render_runs([run("2.15.0+cu132", BAD)], [], tmp_path, generated=NOW)
    assert not (tmp_path / "nightlies").exists()


def test_each_output_of_a_page_is_a_writer_of_one_registry(tmp_path, monkeypatch):
    """index.html, results.json, summary.md and affected.json are the writers `WRITERS` lists, in
    the order a render writes them; one more writer listed there is one more file of every page,
    its text the writer's render of the page (its view, runs and bisections)."""
    import torchbisect.report
    from torchbisect.report.writers import WRITERS

    class Counted:
        name = "counted.txt"

        def render(self, page) -> str:
            return f"{len(page.runs)} runs, {len(page.bisections)} bisections: {page.view.title}\n"

    assert [w.name for w in WRITERS] == [
        "index.html",
        "results.json",
        "summary.md",
        "affected.json",
    ]
    monkeypatch.setattr(torchbisect.report, "WRITERS", (*WRITERS, Counted()))
    runs = [run("2.11.0+cu130", BAD), run("2.15.0+cu132", GOOD)]
    paths = render_runs(runs, [], tmp_path, generated=NOW)
    assert [p.name for p in paths][:5] == [*(w.name for w in WRITERS), "counted.txt"]
    title = build_view(runs, [], generated=NOW).title
    assert (tmp_path / "counted.txt").read_text() == f"2 runs, 0 bisections: {title}\n"


def test_a_finished_bisection_is_written_by_the_registry_as_bisect_says_it(data_dir):
    """The terminal's text and the job summary's Markdown of a bisection are the writers
    `BISECTION_WRITERS` lists, their page the finished Bisection: the text says which probes ran
    now (`new_runs`), the Markdown names the answer in bold."""
    from torchbisect.bisect.run import Bisection
    from torchbisect.outcome import BisectResult
    from torchbisect.report.writers import BISECTION_WRITERS

    fix = BisectResult.from_json(
        json.loads((data_dir / "report" / "synthetic-bisection-fix.json").read_text())
    )
    text, markdown = BISECTION_WRITERS
    assert (text.name, markdown.name) == ("text", "markdown")
    said = text.render(Bisection(result=fix, new_runs=2))
    assert said.splitlines()[0].startswith("the first fixed nightly is ")
    assert f"{fix.probes - 2} from the store" in said
    assert markdown.render(Bisection(result=fix, new_runs=2)).count("**The first fixed") == 1
