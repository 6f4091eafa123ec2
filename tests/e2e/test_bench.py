"""`torchbisect bench` on a machine without a GPU: the committed GPU measurements in reports/bench/
stay as they are (issue 11, item 3), a folder named with --out gets this run's numbers, and the
probe part runs an earlier probe script beside today's.  The bench package measures planning and
rendering on its own, without the test suite beside it (issue 12).

Run as a user would (`python -m torchbisect bench` in a folder holding reports/bench/).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO
from helpers.cli import torchbisect

from torchbisect.exits import Exit

COMMITTED = REPO / "reports" / "bench"

no_gpu = pytest.mark.skipif(
    shutil.which("nvidia-smi") is not None,
    reason="this machine has a GPU: bench writes reports/bench/",
)


def _bench(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return torchbisect("bench", *args, cwd=cwd, timeout=600)


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A folder with a copy of the committed reports/bench/ and the matrix file, as a clone
    has them (a folder with a matrix.yaml is a project: its own reports/ is the default)."""
    shutil.copytree(COMMITTED, tmp_path / "reports" / "bench")
    shutil.copy(REPO / "matrix.yaml", tmp_path / "matrix.yaml")
    return tmp_path


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@pytest.mark.slow
@no_gpu
def test_without_a_gpu_nothing_in_reports_bench_changes_and_it_says_so(checkout):
    pytest.importorskip("torch", reason="the workaround part measures this interpreter's torch")
    before = _snapshot(checkout / "reports" / "bench")
    done = _bench(checkout, "--parts", "workaround,render")
    assert done.returncode == Exit.OK, done.stderr
    assert _snapshot(checkout / "reports" / "bench") == before
    assert (
        "no GPU here, so nothing is written to reports/bench/ (it keeps the numbers measured "
        "on a GPU); pass --out DIR to keep this run's numbers"
    ) in done.stderr
    assert '"render"' in done.stdout  # the numbers are still shown


@pytest.mark.slow
@no_gpu
def test_out_names_where_a_machine_without_a_gpu_writes(checkout, tmp_path):
    before = _snapshot(checkout / "reports" / "bench")
    done = _bench(checkout, "--parts", "render", "--out", str(tmp_path / "mine"))
    assert done.returncode == Exit.OK, done.stderr
    tool = json.loads((tmp_path / "mine" / "tool.json").read_text())
    assert tool["render"]["cells"] == 2000 and tool["render"]["seconds"] > 0
    assert (tmp_path / "mine" / "tool.svg").read_text().startswith("<svg")
    assert _snapshot(checkout / "reports" / "bench") == before
    assert "nothing is written" not in done.stderr


@pytest.mark.slow
@no_gpu
@pytest.mark.skipif(
    shutil.which("git") is None or not (REPO / ".git").exists(),
    reason="the baseline probe comes from this checkout's git history",
)
def test_the_probe_part_runs_the_earlier_probe_beside_todays(tmp_path):
    pytest.importorskip("torch", reason="this interpreter has no torch: pip install torch")
    done = _bench(tmp_path, "--parts", "probe", "--out", str(tmp_path / "out"))
    assert done.returncode == Exit.OK, done.stderr
    doc = json.loads((tmp_path / "out" / "probe.json").read_text())
    today = re.search(
        r'^PROBE_VERSION = "([^"]+)"', (REPO / "probes" / "stale_replay.py").read_text(), re.M
    )[1]
    assert (doc["before_probe_version"], doc["after_probe_version"]) == ("1", today)
    assert len(doc["seconds"]["before"]["cold"]) == 1 and len(doc["seconds"]["after"]["warm"]) == 2
    assert doc["same_verdicts"] and doc["verdicts"]["capture_data_ptr"] == ["skipped", "skipped"]
    assert (tmp_path / "out" / "probe.svg").read_text().startswith("<svg")


def test_rendering_is_timed_over_all_four_files():
    from torchbisect.bench.tool import render_cells

    result = render_cells(50, repeat=1)
    assert result["cells"] == 50 and result["seconds"] > 0
    assert {"index.html", "results.json", "summary.md", "affected.json"} <= set(result["bytes"])


def test_planning_is_measured_by_the_package_alone_without_the_test_suite(tmp_path):
    """An installed package has no tests/ beside it: the planning benchmark still runs (a
    copy of src/ alone on the path), serving its own index, and plans every listed nightly."""
    shutil.copytree(
        REPO / "src" / "torchbisect",
        tmp_path / "src" / "torchbisect",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    # as a wheel carries them (setup.py): planning reads the probe a matrix names (issue 47)
    shutil.copytree(REPO / "probes", tmp_path / "src" / "torchbisect" / "_probes")
    code = (
        "import json, os, sys; import torchbisect; "
        "assert torchbisect.__file__.startswith(os.getcwd()), torchbisect.__file__; "
        "from torchbisect.bench.tool import plan_dates; "
        "print(json.dumps(plan_dates(60))); "
        "assert not [m for m in sys.modules if m.startswith(('indexserver', 'helpers'))]"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": "src"},
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    # 60 dates, one gap (day 3: missing), two nightlies on the version-bump date: 60 cells
    assert (result["dates"], result["cells"], result["missing"]) == (60, 60, 1)
    assert result["transport"] == "HTTP on 127.0.0.1" and result["seconds"] > 0
