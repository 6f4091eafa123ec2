"""48.2: a probe document's verdict is computed from its cases (probes/README.md, Roll-up), not
believed: one that claims a safer verdict is stored with the computed one and a note, and
`matrix --fail-on affected` sees it."""

from __future__ import annotations

import json
import shutil

import pytest
from helpers import make_cell, probe_doc
from helpers.cli import torchbisect
from helpers.runaway import environment, project

from torchbisect.backends.base import ProbeOutput
from torchbisect.exits import Exit
from torchbisect.model import CellRun, ProbeResult, RunStatus, Verdict
from torchbisect.run.execute import interpret
from torchbisect.store.db import Store


def _liar(claimed: str, cases: dict[str, str]) -> dict:
    doc = probe_doc(claimed, cases)
    for case in doc["cases"].values():
        if case["verdict"] == "affected":
            case.update(stale_trials=5, trials=5)
    return doc


@pytest.mark.parametrize(
    ("claimed", "cases", "computed"),
    [
        ("not_affected", {"capture_data_ptr": "affected"}, "affected"),
        ("not_affected", {"capture_data_ptr": "not_affected", "side_stream": "crashed"}, "crashed"),
        (
            "refused",
            {"capture_data_ptr": "not_affected", "control_clone": "affected"},
            "inconclusive",
        ),  # a control misbehaved: nothing is trusted
        (
            "not_affected",
            {"capture_data_ptr": "not_affected", "control_stale": "not_affected"},
            "inconclusive",
        ),
        ("skipped", {"capture_data_ptr": "timeout", "side_stream": "skipped"}, "timeout"),
    ],
)
def test_a_document_that_claims_another_verdict_is_stored_with_the_computed_one(
    claimed, cases, computed
):
    status, result, _ = interpret(
        ProbeOutput(
            json_text=json.dumps(_liar(claimed, cases)),
            exit_code=Verdict(claimed).exit_code,
            seconds=0.1,
        )
    )
    assert status is RunStatus.OK and result.verdict is Verdict(computed)
    assert f"the probe said {claimed}, but its cases roll up to {computed}" in result.raw["note"]


def test_a_document_whose_verdict_is_its_cases_is_left_as_it_is(repo):
    for path in sorted((repo / "reports" / "evidence" / "hand").glob("*.json")):
        doc = json.loads(path.read_text())
        _, result, _ = interpret(
            ProbeOutput(
                json_text=path.read_text(), seconds=0.1, exit_code=Verdict(doc["verdict"]).exit_code
            )
        )
        assert result.verdict.value == doc["verdict"] and "note" not in result.raw, path.name


def test_a_stored_document_that_claims_another_verdict_is_read_as_computed(tmp_path):
    """As an older torchbisect stored it, unchecked: the page and results.json say affected."""
    with Store(tmp_path / "results.sqlite") as store:
        store.add(
            CellRun(
                cell=make_cell("dev-liar"),
                status=RunStatus.OK,
                result=ProbeResult.from_json(
                    _liar("not_affected", {"capture_data_ptr": "affected"})
                ),
                wheel_sha256="ab" * 32,
                probe_version="1+x",
                gpu="NVIDIA H200",
                backend="venv",
                started="2026-11-30T10:00:00",
            )
        )
    with Store(tmp_path / "results.sqlite") as store:
        assert [r.verdict for r in store.latest()] == [Verdict.AFFECTED]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("uv") is None, reason="uv is not installed")
def test_matrix_fail_on_affected_sees_a_document_that_says_not_affected(tmp_path):
    argv = project(tmp_path, docs=["liar"])
    env, _ = environment(tmp_path, "ok")
    done = torchbisect(*argv, "--fail-on", "affected", cwd=tmp_path, env=env, timeout=240)
    assert done.returncode == Exit.AFFECTED, done.stdout + done.stderr
    with Store(tmp_path / "results.sqlite") as store:
        (run,) = store.runs()
    assert run.verdict is Verdict.AFFECTED and "roll up to affected" in run.result.raw["note"]
