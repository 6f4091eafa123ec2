""" "What to do" on the page and in summary.md: the workaround with its measured cost, the first
fixed builds when known, a self-check, the upstream report (configurable in matrix.yaml); and
long runs of identical nightlies folded into one row."""

from __future__ import annotations

import datetime as dt
import json
import re
from html import unescape

from helpers.cli import call

from torchbisect.bench.synthetic import synthetic_run as run
from torchbisect.exits import Exit
from torchbisect.model import Channel, Verdict
from torchbisect.page.advice import cost_sentence, duration, upstream_search
from torchbisect.page.regression import regression_for
from torchbisect.probe.scripts import probe_path
from torchbisect.report import build_view, render_runs

NOW = dt.datetime(2026, 3, 20, 12, 0, tzinfo=dt.timezone.utc)
LAZY_COST = regression_for("stale_replay").workaround_cost  # how probes/stale_replay.py quotes it
BAD = {"capture_data_ptr": (5, 5), "capture_write": (5, 5)}
GOOD = {"capture_data_ptr": (0, 5), "capture_write": (0, 5)}
BENCH = {
    "torch": "2.11.0+cu130",
    "gpu": "NVIDIA H200",
    "rows": [
        {"size_mib": 1024, "graph_clone_node_ms": 0.7745},
        {"size_mib": 1, "graph_clone_node_ms": 7e-4},
    ],
}


def _todo(html: str) -> str:
    """The visible text of the page's "What to do" section."""
    section = re.search(r'<section class="todo".*?</section>', html, re.S).group(0)
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", section)).split())


def test_the_page_and_summary_say_what_to_do_with_the_measured_cost(tmp_path):
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "workaround.json").write_text(json.dumps(BENCH))
    (tmp_path / "bench" / "workaround.svg").write_text("<svg/>")
    render_runs(
        [run("2.11.0+cu130", BAD), run("2.15.0+cu132", BAD)], [], tmp_path / "page", generated=NOW
    )
    html = (tmp_path / "page" / "index.html").read_text()
    todo = _todo(html)
    assert todo.startswith("What to do Workaround Use x.clone() instead of torch._lazy_clone(x)")
    assert (
        "Measured on NVIDIA H200 (torch 2.11.0+cu130): the workaround adds below 1 µs (the "
        "timer's resolution) to a graph replay at 1 MiB and 0.77 ms at 1024 MiB."
    ) in todo
    assert '<a href="../bench/workaround.svg">The benchmark</a>' in html
    assert "no fixed release yet (every tested release up to 2.15.0 is affected)" in todo
    assert "Download stale_replay.py and run python stale_replay.py with the python" in todo
    assert "0 = not affected, 1 = affected, 125 = cannot tell" in todo
    assert "it probes the first GPU" in todo  # the probe says it needs one (NEEDS_GPU)
    assert (
        "The whole tool: pip install . && torchbisect probe --probe stale_replay in a clone "
        "of torchbisect's repository (it is not published on PyPI)"
    ) in todo
    assert "pip install torchbisect" not in todo
    # the self-check's file is published beside the page: the link downloads the real probe
    assert '<a href="stale_replay.py" download>' in html
    assert (tmp_path / "page" / "stale_replay.py").read_bytes() == probe_path().read_bytes()
    search = upstream_search(regression_for("stale_replay"))
    assert f'href="{search}"' in html.replace("&amp;", "&")
    # near the top: before the matrix
    assert html.index('class="todo"') < html.index('class="matrix"')
    summary = (tmp_path / "page" / "summary.md").read_text()
    assert "### What to do" in summary and "([benchmark](../bench/workaround.svg))" in summary
    assert (
        "- **Check your own torch:** download [stale_replay.py](stale_replay.py) and run "
        "`python stale_replay.py`"
    ) in summary
    assert f"- **Upstream report:** {search}" in summary


def test_the_first_fixed_release_and_nightly_are_named_when_known(tmp_path):
    runs = [
        run("2.15.0+cu132", BAD),
        run("2.16.0+cu132", {"capture_data_ptr": Verdict.REFUSED}),
        run("2.17.0.dev20260301+cu132", BAD),
        run("2.17.0.dev20260305+cu132", GOOD),
    ]
    render_runs(runs, [], tmp_path, generated=NOW)
    todo = _todo((tmp_path / "index.html").read_text())
    assert (
        "fixed in 2.16.0 (the first release measured after 2.15.0); first fixed nightly "
        "2026-03-05 (not bisected, last nightly before it measured affected: 2026-03-01)"
    ) in todo


def test_with_two_gpu_models_each_gets_its_own_fix_line():
    runs = [run("2.15.0+cu132", BAD), run("2.15.0+cu132", GOOD, gpu="NVIDIA A100")]
    fixes = build_view(runs, [], generated=NOW).advice.fixes
    assert fixes == (
        "NVIDIA A100: no tested release is affected",
        "NVIDIA H200: no fixed release yet (every tested release up to 2.15.0 is affected)",
    )


def test_without_a_verdict_no_release_is_called_unaffected():
    skipped = {
        "capture_data_ptr": Verdict.SKIPPED,
        "control_clone": Verdict.SKIPPED,
        "control_stale": Verdict.SKIPPED,
    }
    advice = build_view([run("2.13.0+cpu", skipped, gpu="none")], [], generated=NOW).advice
    assert advice.fixes == ("no release has a verdict yet",)


def test_the_upstream_report_and_page_come_from_matrix_yaml(tmp_path, repo, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "matrix.yaml").write_text(
        "preinstalled: true\nreferences:\n"
        "  upstream: https://github.com/pytorch/pytorch/issues/123456\n"
        "  page: https://example.org/torchbisect/\n"
    )
    probe = str(repo / "reports" / "evidence" / "hand" / "h200-torch-2.15.0.json")
    assert call("report", "--probe-json", probe, "--out", "out") == Exit.OK
    html = (tmp_path / "out" / "index.html").read_text()
    assert 'href="https://github.com/pytorch/pytorch/issues/123456"' in html
    refs = json.loads((tmp_path / "out" / "affected.json").read_text())["references"]
    assert {"type": "EVIDENCE", "url": "https://example.org/torchbisect/"} in refs
    assert {"type": "REPORT", "url": "https://github.com/pytorch/pytorch/issues/123456"} in refs


def test_an_empty_page_has_no_advice_to_give(tmp_path):
    render_runs([], [], tmp_path, generated=NOW)
    assert 'class="todo"' not in (tmp_path / "index.html").read_text()


def test_long_runs_of_identical_nightlies_fold_and_the_others_stay_rows():
    runs = [run(f"2.17.0.dev202603{d:02d}+cu132", BAD) for d in range(1, 8)]
    runs += [run("2.17.0.dev20260308+cu132", GOOD), run("2.17.0.dev20260309+cu132", GOOD)]
    runs += [run(f"2.16.0+cu13{i}", BAD) for i in range(3)]  # releases never fold
    runs.append(run("2.11.0+cu130", BAD, channel=Channel.PREINSTALLED, cell_id="preinstalled"))
    groups = {g.channel: g for g in build_view(runs, [], generated=NOW).sections[0].groups}
    nightly = groups["nightly"].folds
    assert [(f.folded, len(f.rows)) for f in nightly] == [(True, 7), (False, 1), (False, 1)]
    assert nightly[0].label == "2026-03-01 … 2026-03-07"
    assert nightly[0].sub == "7 nightlies, identical verdicts"
    assert all(not f.folded for f in groups["stable"].folds)
    assert len(groups["nightly"].rows) == 9  # results.json and summary.md still see every build


def test_a_cost_reads_in_the_unit_a_person_reads_without_counting_zeros():
    assert [duration(ms) for ms in (0.00079, 0.0236, 0.0034, 0.7745, 12.3, 1500)] == [
        "0.79 µs",
        "24 µs",
        "3.4 µs",
        "0.77 ms",
        "12 ms",
        "1.5 s",
    ]


def test_a_cost_below_the_timers_resolution_is_said_as_such_never_as_a_negative():
    # A re-run on the H200 gave the 1 MiB clone node -0.00005 ms: noise around zero.
    rerun = {
        "gpu": "NVIDIA H200",
        "torch": "2.11.0+cu130",
        "rows": [
            {"size_mib": 1, "graph_clone_node_ms": -0.00005},
            {"size_mib": 256, "graph_clone_node_ms": 0.1923},
        ],
    }
    sentence = cost_sentence(rerun, LAZY_COST)
    assert "adds below 1 µs (the timer's resolution) to a graph replay at 1 MiB" in sentence
    assert "0.19 ms at 256 MiB" in sentence
    assert "-" not in sentence.split(":", 1)[1] and "0.000" not in sentence
    # A benchmark that resolves finer says the figure.
    finer = {
        **rerun,
        "resolution_ms": 0.0001,
        "rows": [{"size_mib": 1, "graph_clone_node_ms": 0.00079}],
    }
    assert "adds 0.79 µs to a graph replay at 1 MiB" in cost_sentence(finer, LAZY_COST)


def test_the_workaround_cost_is_quoted_as_the_probe_declares_it():
    """The benchmark's field and what it adds to are the probe's words (WORKAROUND_COST): a
    second probe's benchmark reads through its own declaration, and one that declares none is
    quoted by nobody."""
    doc = {
        "gpu": "NVIDIA H100",
        "torch": "2.12.0",
        "rows": [
            {"size_mib": 8, "sync_ms": 0.25},
            {"size_mib": 64, "sync_ms": 2.0},
            {"size_mib": 1, "graph_clone_node_ms": 0.5},
        ],
    }
    assert cost_sentence(doc, {"key": "sync_ms", "adds_to": "each step"}) == (
        "Measured on NVIDIA H100 (torch 2.12.0): the workaround adds 0.25 ms to each step at "
        "8 MiB and 2 ms at 64 MiB."
    )
    assert cost_sentence(doc, {}) == ""
    assert LAZY_COST == {"key": "graph_clone_node_ms", "adds_to": "a graph replay"}


def test_every_tested_release_is_affected_names_the_ones_probed_without_a_verdict():
    """2.10.0 was probed and answered nothing: "every tested release from 2.9.0 up to 2.12.0 is
    affected" read as covering it, beside a table that shows it inconclusive."""
    from torchbisect.page.advice import fix_line
    from torchbisect.page.headline import build_headline

    history = (("2.8.0", GOOD), ("2.9.0", BAD), ("2.9.1", BAD), ("2.11.0", BAD), ("2.12.0", BAD))
    runs = [run(f"{v}+cu128", o) for v, o in history]
    runs.append(run("2.10.0+cu128", {"capture_data_ptr": Verdict.INCONCLUSIVE}))
    assert fix_line(build_headline("NVIDIA H200", runs, [])) == (
        "no fixed release yet (every tested release from 2.9.0 up to 2.12.0 is affected, and "
        "2.10.0 has no verdict)"
    )
    runs = [r for r in runs if r.cell.version != "2.8.0+cu128"]
    assert fix_line(build_headline("NVIDIA H200", runs, [])) == (
        "no fixed release yet (every tested release up to 2.12.0 is affected, and 2.10.0 has "
        "no verdict)"
    )
