"""The JSON Schemas of results.json and of a probe's document: generated from
report/documents.py (a probe's types from probe/shape.py), equal to the committed files,
published in every site, and true of every document we have."""

from __future__ import annotations

import datetime as dt
import json
import subprocess

import pytest
from helpers import REPO, probe_doc
from helpers.cli import call

from torchbisect.bench.synthetic import synthetic_run
from torchbisect.exits import Exit
from torchbisect.outcome import BisectResult
from torchbisect.probe import document as gate
from torchbisect.report import render_runs
from torchbisect.report.documents import SCHEMA_FILES, json_schema, schema_text

jsonschema = pytest.importorskip("jsonschema")
NOW = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.timezone.utc)


def _validator(name: str):
    schema = json_schema(name)
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _problems(name: str, doc: object) -> list[str]:
    return [f"{list(e.absolute_path)}: {e.message}" for e in _validator(name).iter_errors(doc)]


@pytest.mark.parametrize("name", sorted(SCHEMA_FILES))
def test_the_committed_schema_is_the_generated_one(name):
    assert (REPO / SCHEMA_FILES[name]).read_text(encoding="utf-8") == schema_text(name)


def test_every_committed_results_json_and_recorded_probe_document_validates():
    tracked = subprocess.run(
        ["git", "ls-files", "*results.json"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    assert tracked, "no committed results.json"
    for name in tracked:
        assert _problems("results", json.loads((REPO / name).read_text())) == [], name
    probes = sorted((REPO / "reports" / "evidence" / "hand").glob("*.json"))
    assert probes
    for path in probes:
        assert _problems("probe", json.loads(path.read_text())) == [], path.name


def test_a_rendered_site_carries_the_schemas_and_its_results_json_meets_them(tmp_path):
    fix = json.loads((REPO / "tests/data/report/synthetic-bisection-fix.json").read_text())
    runs = [
        synthetic_run("2.15.0+cu132", {"capture_data_ptr": (5, 5)}),
        synthetic_run("2.16.0.dev20260305+cu132", {"capture_data_ptr": (0, 5)}),
        synthetic_run("2.14.1+cu130", infra="wheel download: HTTP 503"),
    ]
    render_runs(runs, [BisectResult.from_json(fix)], tmp_path, generated=NOW)
    for name, file in SCHEMA_FILES.items():
        assert (tmp_path / file).read_text() == schema_text(name)
    results = json.loads((tmp_path / "results.json").read_text())
    assert len(results["runs"]) == 3 and results["bisections"]
    assert _problems("results", results) == []
    results["runs"][0]["surprise"] = 1  # results.json names every key it has
    assert any("surprise" in p for p in _problems("results", results))


BAD_PROBE_DOCUMENTS = {
    "a verdict the gate does not know": {"verdict": "maybe"},
    "a case without a verdict": {"cases": {"capture_data_ptr": {"detail": "x"}}},
    "trials as text": {"cases": {"c": {"verdict": "affected", "trials": "x"}}},
    "negative trials": {"cases": {"c": {"verdict": "affected", "stale_trials": -1}}},
    "a text env value as a number": {"env": {"torch": 2.1}},
    "a nested env value": {"env": {"custom": {"a": 1}}},
    "another schema": {"schema": 2},
    "a probe name that is not text": {"probe": 3},
}


@pytest.mark.parametrize("why", sorted(BAD_PROBE_DOCUMENTS))
def test_the_probe_schema_refuses_what_the_gate_refuses(why):
    doc = {**probe_doc("affected"), **BAD_PROBE_DOCUMENTS[why]}
    with pytest.raises(gate.Rejected):
        gate.check(doc)
    assert _problems("probe", doc), why


def test_the_probe_schemas_text_keys_are_the_gates():
    env = json_schema("probe")["$defs"]["ProbeEnvJson"]["properties"]
    assert set(env) - {"unknown"} == set(gate._TEXT_ENV)  # unknown: key -> why it is null
    good = {
        **probe_doc("affected"),
        "env": {
            "torch": "2.15.0",
            "device_count": 1,
            "ok": True,
            "cudnn": None,
            "unknown": {"cudnn": "OSError: x"},
        },
    }
    assert gate.check(good) and _problems("probe", good) == []
    for bad in ({"cudnn": 1}, ["cudnn"], "cudnn"):
        with pytest.raises(gate.Rejected, match="env unknown"):
            gate.check({**probe_doc("affected"), "env": {"unknown": bad}})


def test_schema_check_names_a_stale_results_schema_and_schema_rewrites_it(tmp_path, capsys):
    out = tmp_path / "matrix.schema.json"
    assert call("schema", "--out", str(out)) == Exit.OK
    capsys.readouterr()
    (tmp_path / "results.schema.json").write_text("{}\n")
    assert call("schema", "--check", "--out", str(out)) == Exit.OUT_OF_DATE  # 1 is "affected"
    said = capsys.readouterr().out
    assert f"{tmp_path / 'results.schema.json'} out of date: run `nox -s schema`" in said
    assert str(tmp_path / "probe.schema.json") not in said
    assert call("schema", "--out", str(out)) == Exit.OK
    assert (tmp_path / "results.schema.json").read_text() == schema_text("results")


def test_schema_makes_the_folder_it_writes_into(tmp_path, capsys):
    out = tmp_path / "new" / "folder" / "matrix.schema.json"
    assert call("schema", "--out", str(out)) == Exit.OK
    assert sorted(p.name for p in out.parent.iterdir()) == [
        "matrix.schema.json",
        "probe.schema.json",
        "results.schema.json",
        "runners.schema.json",
    ]


def test_what_probe_result_reads_is_named_by_the_probe_documents_types():
    """probe/shape.py is the one statement of the shape: the gate and the schema are made of it,
    and `ProbeResult.from_json` (model.py, a floor that cannot import it) reads only its keys."""
    from dataclasses import fields
    from typing import get_args

    from typing_extensions import get_type_hints

    from torchbisect.model import PROBE_SCHEMA, CaseResult, ProbeResult
    from torchbisect.probe.shape import ProbeCaseJson, ProbeDocument

    document = get_type_hints(ProbeDocument)
    assert {f.name for f in fields(ProbeResult)} - {"raw"} <= set(document)
    assert {f.name for f in fields(CaseResult)} - {"name"} <= set(get_type_hints(ProbeCaseJson))
    assert get_args(document["schema"]) == (PROBE_SCHEMA,)


def test_the_gate_reads_each_kind_of_key_from_the_types():
    """Read from the annotations, so a typing quirk that read none would quietly open the gate."""
    assert gate._TEXT == ("probe", "probe_version") and gate._SECONDS == ("seconds",)
    assert gate._CASE_TEXT == ("detail",)
    assert gate._NUMBERS == ("seconds", "import_seconds", "wall_seconds")
    assert gate._COUNTS == ("stale_trials", "trials")
    assert gate._TEXT_ENV == (
        "torch",
        "torch_version",
        "git_version",
        "cuda_runtime",
        "driver",
        "gpu",
        "capability",
        "python",
        "platform",
        "triton",
    )
