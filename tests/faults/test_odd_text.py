"""48.3: stored text is always storable and printable.  A lone surrogate in a probe document
made every later `matrix` and `report` on that store exit 250; control codes from a probe's
output (an ESC sequence, a BEL, a NUL) landed raw in index.html, summary.md and, through a store
path, on the terminal; `trials: 10^5000` in matrix.yaml (an int too large for a float) exited
250.  Now text is stored with U+FFFD for a lone surrogate, shown with its control codes as
pictures (␛, ␇, ␀), and a huge number is one sentence with its line."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from helpers import make_cell, probe_doc
from helpers.cli import torchbisect

from torchbisect.backends.base import ProbeOutput
from torchbisect.exits import Exit
from torchbisect.model import CellRun, ProbeResult, RunStatus
from torchbisect.run.execute import interpret
from torchbisect.store.db import Store

HOSTILE = "stale \ud800 seen\x1b]0;pwned\x07 \x1b[2J\x00 done \u202egnp.exe"
RAW = ("\x1b", "\x07", "\x00", "\u202e")


def _torchbisect(*argv, cwd: Path) -> subprocess.CompletedProcess:
    return torchbisect(*argv, cwd=cwd, timeout=120, text=False)


def _doc() -> dict:
    doc = probe_doc("affected", {"capture_data_ptr": "affected", "control_clone": "not_affected"})
    doc["cases"]["capture_data_ptr"]["detail"] = HOSTILE
    doc["env"]["gpu"] = "NVIDIA H200\x1b[8m"
    return doc


def _store(path: Path, result: ProbeResult) -> None:
    with Store(path) as store:
        store.add(
            CellRun(
                cell=make_cell("dev-odd"),
                status=RunStatus.OK,
                result=result,
                wheel_sha256="ab" * 32,
                probe_version="1+x",
                gpu="NVIDIA H200",
                backend="venv",
                started="2026-11-30T10:00:00",
            )
        )


@pytest.mark.parametrize("how", ["probed now", "stored by an older torchbisect"])
def test_a_document_with_a_lone_surrogate_and_control_codes_is_stored_and_shown_safely(
    tmp_path, how
):
    if how == "probed now":  # through the document gate, as a probe's output goes
        status, result, _ = interpret(
            ProbeOutput(json_text=json.dumps(_doc()), exit_code=1, seconds=0.1)
        )
        assert status is RunStatus.OK
    else:  # stored unchecked: the gate meets it when the store is read
        result = ProbeResult.from_json(_doc())
    _store(tmp_path / "results.sqlite", result)
    for _ in range(2):  # and every later report on that store
        done = _torchbisect("report", "--store", "results.sqlite", "--out", "out", cwd=tmp_path)
        assert done.returncode == Exit.OK, done.stderr.decode(errors="replace")
    page = (tmp_path / "out" / "index.html").read_text(encoding="utf-8")
    summary = (tmp_path / "out" / "summary.md").read_text(encoding="utf-8")
    for shown in (page, summary):
        assert not any(code in shown for code in RAW)
    assert "stale \ufffd seen" in page
    assert "␛]0;pwned␇" in page and "␀" in page and "[U+202E]gnp.exe" in page
    results = json.loads((tmp_path / "out" / "results.json").read_text(encoding="utf-8"))
    detail = (
        results["runs"][0]["cases"]["capture_data_ptr"]["detail"]
        if "runs" in results
        else json.dumps(results)
    )
    assert "\ud800" not in detail


def test_a_control_code_in_a_path_reaches_the_terminal_visible(tmp_path):
    done = _torchbisect(
        "report", "--store", "x\x1b[31mred\x07.sqlite", "--out", "out", cwd=tmp_path
    )
    assert done.returncode == Exit.MISTAKE
    err = done.stderr.decode()
    assert "\x1b" not in err and "\x07" not in err and "x␛[31mred␇.sqlite" in err


@pytest.mark.parametrize(
    ("key", "value", "said"),
    [
        ("trials", "1" * 5000, "line 2: not valid YAML (the number 111111111111… has 5,000 digits"),
        (
            "timeout",
            "9" * 400,
            "line 2, key `defaults.timeout`: expected a finite number of seconds",
        ),
        ("trials", "9" * 400, "line 2, key `defaults.trials`: expected at most 1,000,000 trials"),
        ("trials", "10^5000", "line 2, key `defaults.trials`: expected a whole number of trials"),
    ],
)
def test_a_huge_number_in_the_matrix_is_one_sentence_with_its_line(tmp_path, key, value, said):
    (tmp_path / "matrix.yaml").write_text(f"defaults:\n  {key}: {value}\nnightly:\n  last: 3\n")
    done = _torchbisect("plan", "--matrix", "matrix.yaml", "--offline", cwd=tmp_path)
    lines = done.stderr.decode().strip().splitlines()
    assert done.returncode == Exit.MISTAKE and len(lines) == 1, done.stderr.decode()
    assert said in lines[0], lines[0]
