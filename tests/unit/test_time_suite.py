""".ci/time_suite.py, the measure of the suite's own time: it refuses a record file it did not
write in one sentence, before it clones or removes anything, and reads pytest's last line."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest
from helpers import REPO

SCRIPT = REPO / ".ci" / "time_suite.py"


def _module():
    spec = importlib.util.spec_from_file_location("time_suite", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("text", ["{not json", '{"a": 1}'])
def test_a_record_file_it_did_not_write_is_one_sentence_and_nothing_runs(tmp_path, text):
    record = tmp_path / "suite.json"
    record.write_text(text)
    done = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--cold",
            "--record",
            str(record),
            "--keep",
            str(tmp_path / "keep"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    [last] = done.stderr.strip().splitlines()[-1:]
    assert last.startswith(
        f"time_suite.py: error: --record {record} is not a JSON list this script wrote"
    )
    assert "Traceback" not in done.stderr and done.stdout == ""
    assert not (tmp_path / "keep").exists() and record.read_text() == text


def test_pytests_summary_line_gives_the_result_and_its_time():
    summary = _module().SUMMARY
    line = "===== 1 failed, 1602 passed, 13 skipped in 434.21s (0:07:14) ====="
    found = summary.match(line)
    assert (found["result"], found["took"]) == ("1 failed, 1602 passed, 13 skipped", "434.21")
    assert summary.match("========= 1603 passed, 13 skipped in 920.02s (0:15:20) =========")
    assert summary.match("E   assert 3 passed in 1.00s") is None  # a failure's text, not a summary
