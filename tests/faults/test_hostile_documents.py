"""D3, D4, D12 (size): a probe document is checked before it is stored; one that fails is an
infrastructure failure of that cell only, and nothing in a store can stop the page."""

from __future__ import annotations

import json
import shutil

import pytest
from helpers import make_cell, probe_doc
from helpers.cli import torchbisect
from helpers.runaway import environment, project

from torchbisect.backends.base import ProbeOutput
from torchbisect.exits import Exit
from torchbisect.model import CellRun, ProbeResult, RunStatus
from torchbisect.probe import document as gate
from torchbisect.run.execute import interpret
from torchbisect.store.db import Store


def _doc(**case_fields) -> dict:
    doc = probe_doc("affected", {"capture_data_ptr": "affected", "control_clone": "not_affected"})
    doc["cases"]["capture_data_ptr"].update(case_fields)
    return doc


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("[" * 200_000 + "]" * 200_000, "nests deeper than 12 levels"),
        (json.dumps({"schema": 1, "pad": "z" * 2_000_000}), "larger than 1,000,000 bytes"),
        (json.dumps(_doc(stale_trials="x")), "stale_trials is not a whole number"),
        (json.dumps(_doc(seconds="fast")), "seconds is not a number"),
        (json.dumps(_doc(stale_trials=5, trials=3)), "stale on 5 of 3 trials"),
        (json.dumps(_doc(verdict="pwned")), "'pwned' is not one of"),
        (json.dumps(_doc(detail=["a list"])), "detail is not a string"),
        (json.dumps({**_doc(), "env": {"driver": 580}}), "env driver is not a string"),
        (json.dumps({**_doc(), "env": {"x": {"deep": 1}}}), "env 'x' is not a plain value"),
        ("[1, 2]", "not a JSON object"),
    ],
)
def test_a_bad_document_is_an_infrastructure_failure_with_the_reason(text, reason):
    status, result, why = interpret(ProbeOutput(json_text=text, exit_code=1, seconds=0.1))
    assert status is RunStatus.INFRA_FAILURE and result is None
    assert reason in why


def test_details_are_capped_and_real_documents_pass(repo):
    doc = gate.check_text(json.dumps(_doc(detail="y" * 100_000)))
    assert len(doc["cases"]["capture_data_ptr"]["detail"]) == gate.DETAIL_CHARS
    for path in sorted((repo / "reports" / "evidence" / "hand").glob("*.json")):
        assert gate.check_text(path.read_text()) == json.loads(path.read_text())
    mixed = {**_doc(), "env": {"driver": None, "cudnn": 91900, "cuda_available": True}}
    assert gate.check(mixed)["env"]["cudnn"] == 91900


def test_a_store_with_odd_stored_documents_still_renders(tmp_path):
    # as an older torchbisect (or a hand edit) might have stored them: never checked
    docs = {
        "dev-na": {**_doc(), "env": {"driver": "n/a"}},
        "dev-null": {**_doc(), "env": {"driver": None, "cuda_runtime": None}},
        "dev-x": _doc(stale_trials="x", trials=3),
        "dev-huge": _doc(detail="z" * 3_000_000),
        "dev-long": _doc(detail="w" * 50_000),
    }
    with Store(tmp_path / "results.sqlite") as store:
        for cell_id, doc in docs.items():
            store.add(
                CellRun(
                    cell=make_cell(cell_id),
                    status=RunStatus.OK,
                    result=ProbeResult.from_json(doc),
                    wheel_sha256="ab" * 32,
                    probe_version="1+x",
                    gpu="NVIDIA H200",
                    driver="",
                    backend="venv",
                    started=f"2026-11-30T10:00:0{len(cell_id)}",
                )
            )
    out = tmp_path / "out"
    done = torchbisect(
        "report", "--store", str(tmp_path / "results.sqlite"), "--out", str(out), timeout=120
    )
    assert done.returncode == Exit.OK, done.stderr
    page = (out / "index.html").read_text()
    assert "dev-na" in page and "dev-null" in page
    assert "stored probe document rejected" in page  # dev-x, shown as what it is
    assert "stale_trials is not a whole number" in (out / "results.json").read_text()
    assert "larger than 1,000,000 bytes" in page  # dev-huge, never even parsed
    assert "w" * gate.DETAIL_CHARS not in page  # dev-long, capped
    assert sum(p.stat().st_size for p in out.iterdir()) < 1_000_000


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("uv") is None, reason="uv is not installed")
def test_one_bad_document_fails_its_cell_and_the_others_go_on(tmp_path):
    argv = project(tmp_path, cells=5, docs=["ok", "nested", "huge", "badtypes", "longdetail"])
    argv.remove("--no-report")
    env, _ = environment(tmp_path, "ok")
    done = torchbisect(*argv, cwd=tmp_path, env=env, timeout=240)
    assert done.returncode == Exit.NO_VERDICT, done.stdout + done.stderr  # some cells failed: infra
    assert "Traceback" not in done.stdout + done.stderr
    with Store(tmp_path / "results.sqlite") as store:
        runs = {r.cell.id: r for r in store.runs()}
    assert runs["dev-k0"].status is RunStatus.OK
    assert runs["dev-k4"].status is RunStatus.OK  # a long detail is capped, not refused
    assert len(runs["dev-k4"].result.case("capture_data_ptr").detail) == gate.DETAIL_CHARS
    for cell_id, reason in (
        ("dev-k1", "nests deeper"),
        ("dev-k2", "larger than"),
        ("dev-k3", "stale_trials is not a whole number"),
    ):
        assert runs[cell_id].status is RunStatus.INFRA_FAILURE and reason in runs[cell_id].reason
    assert (tmp_path / "reports" / "index.html").stat().st_size < 2_000_000
