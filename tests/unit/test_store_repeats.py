"""A plain script asked more than once on one build, whose answers differ, is drawn flaky with
its rate (store/repeats.py), over a real SQLite store; the stored runs stay as measured."""

from __future__ import annotations

from dataclasses import replace

from helpers import make_cell, make_run

from torchbisect.model import ProbeResult, Verdict
from torchbisect.page.rows import _case_cell
from torchbisect.store.db import Store


def _script_run(verdict: str, started: str, **kw):
    doc = {
        "schema": 1,
        "probe": "check",
        "probe_version": "1",
        "verdict": verdict,
        "cases": {"check": {"verdict": verdict, "detail": f"said {verdict}", "exit_status": 0}},
        "env": {"torch_version": "2.99.0+cpu"},
    }
    cell = make_cell("stable-2.14.0-cpu-cp311", probe="check")
    return replace(make_run(cell, started=started, **kw), result=ProbeResult.from_json(doc))


def _at(minute: int) -> str:
    return f"2026-12-07T12:{minute:02d}:00.000000+00:00"


def test_a_build_that_answered_both_ways_is_drawn_affected_and_flaky_with_its_runs(tmp_path):
    """Six affected runs and a newest not affected: "not affected" alone before."""
    with Store(tmp_path / "results.sqlite") as store:
        for minute in range(6):
            store.add(_script_run("affected", _at(minute)))
        store.add(_script_run("not_affected", _at(9)))
        [raw] = store.latest()
        [drawn] = store.latest_counted()
        assert len(store.runs()) == 7  # nothing stored changed
    assert raw.verdict is Verdict.NOT_AFFECTED
    assert drawn.verdict is Verdict.AFFECTED and drawn.started == raw.started
    [case] = drawn.result.cases
    assert (case.stale_trials, case.trials, case.flaky) == (6, 7, True)
    assert case.detail == (
        "affected on 6 of 7 runs of this build, not affected on 1; the newest said: "
        "said not_affected"
    )
    cell = _case_cell(case, drawn.result.raw["cases"]["check"])
    assert cell.mark.word == "flaky" and cell.mark.note == "6/7"
    assert cell.rate == "flaky: affected on 6/7 runs (86%)"


def test_runs_of_another_build_gpu_or_probe_file_and_steady_answers_are_left_as_they_are(
    tmp_path,
):
    with Store(tmp_path / "results.sqlite") as store:
        store.add(_script_run("affected", _at(0), driver="570.1"))  # another driver
        store.add(_script_run("affected", _at(1), probe_version="2+def"))  # the file changed
        store.add(_script_run("affected", _at(2), wheel_sha256="f" * 64))  # another wheel
        store.add(_script_run("not_affected", _at(3)))
        store.add(_script_run("not_affected", _at(4)))  # the same answer twice: steady
        [drawn] = store.latest_counted()
    assert drawn.verdict is Verdict.NOT_AFFECTED and drawn.result.cases[0].trials is None


def test_runs_under_an_env_since_changed_are_another_question_not_a_flake(tmp_path):
    with Store(tmp_path / "results.sqlite") as store:
        flagged = _script_run("affected", _at(0))
        store.add(replace(flagged, cell=replace(flagged.cell, env=(("MYFLAG", "1"),))))
        store.add(_script_run("not_affected", _at(1)))
        [drawn] = store.latest_counted()
    assert drawn.verdict is Verdict.NOT_AFFECTED


def test_a_document_probe_that_counts_its_own_trials_is_not_folded(tmp_path):
    with Store(tmp_path / "results.sqlite") as store:
        store.add(make_run(verdict="affected", started=_at(0)))
        store.add(make_run(verdict="not_affected", started=_at(1)))
        assert store.latest_counted() == store.latest()


def test_matrix_fail_on_affected_reads_the_runs_as_the_page_draws_them(tmp_path):
    """`matrix --fail-on affected` exited 0 for a build the page drew flaky and affected, when
    the newest of its answers was "not affected"."""
    from torchbisect.cli.options import exit_status
    from torchbisect.commands.matrix import _as_drawn
    from torchbisect.exits import Exit

    path = tmp_path / "results.sqlite"
    with Store(path) as store:
        store.add(_script_run("affected", _at(0)))
        newest = _script_run("not_affected", _at(1))
        store.add(newest)
    assert exit_status([newest], frozenset({"affected"})) == Exit.OK
    assert exit_status(_as_drawn([newest], path), frozenset({"affected"})) == Exit.AFFECTED
