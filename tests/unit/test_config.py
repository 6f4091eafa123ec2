"""matrix.yaml: what each key means, the published schema, and one clear line per mistake."""

from __future__ import annotations

import json
from datetime import date, timedelta
from pathlib import Path

import pytest
import yaml
from helpers import TESTS
from helpers.bad_matrices import expected_error
from helpers.cli import call
from hypothesis import given
from hypothesis import strategies as st

from torchbisect.config import sentences
from torchbisect.config.matrix import STEP_EPOCH, NightlyEntry, load_matrix
from torchbisect.config.schema import schema_text
from torchbisect.errors import ConfigError
from torchbisect.exits import Exit

DATA = TESTS / "data" / "matrix"
BAD = sorted((DATA / "bad").glob("*.yaml"))


def test_there_are_30_plus_malformed_files():
    assert len(BAD) >= 30


@pytest.mark.parametrize("path", BAD, ids=[p.stem for p in BAD])
def test_a_malformed_matrix_is_one_line_and_exit_code_2(path, capsys):
    assert call("plan", "--matrix", str(path)) == Exit.MISTAKE
    out, err = capsys.readouterr()
    assert out == ""
    assert err == f"torchbisect plan: error: {expected_error(path)}\n"


def test_a_missing_matrix_file_names_the_flag(tmp_path):
    with pytest.raises(ConfigError, match="does not exist: pass --matrix PATH"):
        load_matrix(tmp_path / "matrix.yaml")


def test_the_default_matrix_says_what_the_issue_asks_for(repo):
    cfg = load_matrix(repo / "matrix.yaml")
    assert [e.versions for e in cfg.stable] == ["all from 2.3"]
    assert [e.versions for e in cfg.test] == ["current"]
    nightly = cfg.nightly[0]
    assert (nightly.last, nightly.step) == (60, 7)
    assert cfg.preinstalled is not None
    s = cfg.settings(cfg.stable[0])
    (p,) = s.probes
    assert (s.cuda, s.python, p.probe, p.trials, p.timeout) == (
        "auto",
        "3.12",
        "stale_replay",
        20,
        900.0,
    )
    assert cfg.image("cu130").startswith("nvidia/cuda:13") and cfg.image("cu121")
    first = (repo / "matrix.yaml").read_text().splitlines()[0]
    assert first == "# yaml-language-server: $schema=./matrix.schema.json"


def test_every_key_means_what_it_says(tmp_path):
    (tmp_path / "full.yaml").write_text((DATA / "good" / "full.yaml").read_text())
    cfg = load_matrix(tmp_path / "full.yaml")
    auto, cpu = cfg.stable
    assert cfg.settings(auto).cuda == "auto" and cfg.settings(auto).probes[0].trials == 3
    s = cfg.settings(cpu)
    (p,) = s.probes
    assert (s.cuda, s.python, p.trials, p.timeout, p.cases) == (
        "cpu",
        "3.13t",
        10,
        600.0,
        ("capture_data_ptr", "side_stream"),
    )
    assert p.env == (
        ("CUDA_LAUNCH_BLOCKING", "0"),
        ("OMP_NUM_THREADS", "4"),
        ("TORCH_SHOW_CPP_STACKTRACES", "1"),
    )
    assert cfg.settings(cfg.test[0]).overlay is True
    today = date(2026, 11, 29)
    dates, weekly, last = (e.days(today) for e in cfg.nightly)
    assert dates == [date(2026, 8, 15), date(2026, 9, 1)]
    assert weekly == [date(2026, 8, d) for d in (1, 8, 15, 22, 29)]
    assert last == [date(2026, 11, 16), date(2026, 11, 23)]  # Mondays
    assert cfg.settings(cfg.nightly[2]).probes[0].timeout == 1200
    local, remote = cfg.dev
    assert local.wheel == str(tmp_path / "wheels" / local.filename)  # relative to the file
    assert local.cell_name == "2.17.0a0-git1234abc"
    assert (remote.cell_name, remote.filename) == (
        "cow-fix",
        "torch-2.17.0a0+gitfeed123-cp312-cp312-linux_x86_64.whl",
    )
    assert cfg.indexes.nightly == str(tmp_path / "mirror" / "nightly" / "{cuda}")
    assert cfg.preinstalled.interpreter == "/usr/bin/python3"
    assert cfg.image("cu126") == "nvidia/cuda:12.6.3-base-ubuntu24.04"


def test_one_mapping_stands_for_a_list_of_one():
    cfg = load_matrix(DATA / "good" / "single.yaml")
    assert len(cfg.stable) == len(cfg.nightly) == 1
    assert cfg.nightly[0].days(date(2026, 9, 3)) == [date(2026, 9, d) for d in (1, 2, 3)]
    assert cfg.preinstalled is not None and cfg.preinstalled.interpreter is None


@given(
    today=st.dates(date(2020, 1, 1), date(2040, 1, 1)),
    last=st.integers(1, 400),
    step=st.integers(1, 30),
)
def test_a_last_window_keeps_its_dates_from_one_day_to_the_next(today, last, step):
    entry = NightlyEntry.model_validate({"last": last, "step": step})
    days = entry.days(today)
    assert all(today - timedelta(days=last - 1) <= d <= today for d in days)
    assert all((d - STEP_EPOCH).days % step == 0 for d in days)
    assert len(days) >= last // step
    tomorrow = today + timedelta(days=1)
    still_in_window = {d for d in days if d > today - timedelta(days=last - 1)}
    assert still_in_window <= set(entry.days(tomorrow))  # stored results stay reusable


def test_the_published_schema_is_up_to_date(repo):
    assert (repo / "matrix.schema.json").read_text() == schema_text()


def test_the_schema_accepts_the_good_files_and_rejects_mistakes(repo):
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft202012Validator(json.loads(schema_text()))

    def errors(path: Path) -> list[str]:
        # dates stay text, as editors see them
        doc = yaml.load(path.read_text(), Loader=sentences.Loader)
        return [e.message for e in validator.iter_errors(doc)]

    for good in (repo / "matrix.yaml", DATA / "good" / "full.yaml", DATA / "good" / "single.yaml"):
        assert errors(good) == [], good
    for bad in (
        "unknown_top_key",
        "step_not_number",
        "cuda_bad_tag",
        "python_float",
        "env_bad_name",
        "images_bad_key",
        "dev_bad_sha",
        "preinstalled_text",
    ):
        assert errors(DATA / "bad" / f"{bad}.yaml"), bad


def test_schema_command_writes_and_checks(tmp_path, capsys):
    out = tmp_path / "matrix.schema.json"
    assert call("schema", "--check", "--out", str(out)) == Exit.OUT_OF_DATE  # 1 is "affected"
    assert call("schema", "--out", str(out)) == Exit.OK
    assert out.read_text() == schema_text()
    assert call("schema", "--check", "--out", str(out)) == Exit.OK
    assert "up to date" in capsys.readouterr().out
