"""Output read through a pipe (a CI log, `| tee`) is not wrapped: each sentence is one line, a
path stays whole, and the results table becomes one line per cell when it does not fit."""

from __future__ import annotations

import os
import sys

import pytest
from helpers import FAKE_PROBES, IN_CI, python_with_torch
from helpers.cli import torchbisect

pytestmark = pytest.mark.slow  # two real `torchbisect matrix` runs with a probe that imports torch

DEEP = "a-report-folder-with-a-long-name/and-a-second-level-below-it-that-is-long-too"


def _matrix(tmp_path, mode: str, **env: str) -> list[str]:
    python = python_with_torch("{}.{}".format(*sys.version_info[:2]))
    if python is None:
        (pytest.fail if IN_CI else pytest.skip)("the stand-in probe needs a Python with torch")
    (tmp_path / "matrix.yaml").write_text("preinstalled: true\n")
    base = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    done = torchbisect(
        "matrix",
        "--interpreter",
        python,
        "--backend",
        "current",
        "--out",
        tmp_path / DEEP,
        "--store",
        "results.sqlite",
        cwd=tmp_path,
        timeout=600,
        env={**base, "TORCHBISECT_PROBES": str(FAKE_PROBES), "TB_FAKE_MODE": mode, **env},
    )
    assert "Traceback (most recent call last)" not in done.stderr, done.stderr
    return (done.stdout + done.stderr).splitlines()


def test_a_failed_cell_reads_as_whole_lines_when_the_table_does_not_fit(tmp_path):
    lines = _matrix(tmp_path, "exit3", COLUMNS="60")
    logs = str(tmp_path / DEEP / "logs")
    assert (
        f"1 cell failed for infrastructure reasons (see the note column and {logs}/); they "
        "are retried on the next run"
    ) in lines
    assert f"wrote {tmp_path / DEEP / 'index.html'}" in lines
    # the table is 60 columns too wide: a line of column names, then one line per cell
    assert "cell  verdict  cases  seconds  note" in lines
    (row,) = [line for line in lines if line.startswith("preinstalled  infra failure  -  ")]
    assert row.endswith(
        "probe exited with status 3 (expected 0, 1 or 125): Traceback: something broke"
    )
    assert not any("┃" in line for line in lines)


def test_a_table_that_fits_is_drawn_and_no_sentence_wraps(tmp_path):
    lines = _matrix(tmp_path, "ok")
    assert any(line.startswith("┃ cell ") and "┃ note" in line for line in lines)
    (row,) = [line for line in lines if line.startswith("│ preinstalled ")]
    assert "│ all 2 " in row  # the stand-in's two cases, one verdict
    assert f"wrote {tmp_path / DEEP / 'summary.md'}" in lines
