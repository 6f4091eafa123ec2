"""`torchbisect bench --parts loop` (issue 54.2) end to end on stand-in wheels: the bisection
with the reproducer as --script, then the hand loop over the same wheel files in the same order,
each from an empty uv cache; loop.json holds both walls, each build's install and script seconds
and the floor (the script's own time).  No GPU: `--loop-cuda cpu`, nothing measured is kept."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers.cli import torchbisect
from helpers.nightly_world import standin_wheel

from torchbisect.bench import PARTS
from torchbisect.exits import Exit

REPO = Path(__file__).resolve().parents[2]
RELEASES = ["2.9.0", "2.9.1", "2.10.0", "2.11.0", "2.12.0", "2.13.0", "2.14.0", "2.14.1"]
SCRIPT = (
    "import sys, torch\n"
    "v = tuple(map(int, torch.__version__.split('+')[0].split('.')[:2]))\n"
    "print('repro on', torch.__version__)\n"
    "sys.exit(1 if v >= (2, 12) else 0)\n"
)


def _bench(tmp_path: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    return torchbisect("bench", "--parts", "loop", *flags, cwd=tmp_path, timeout=900)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("uv") is None, reason="uv is not installed")
def test_the_tool_and_the_hand_loop_run_the_same_builds_in_the_same_order(tmp_path):
    assert "loop" in PARTS
    folder = tmp_path / "wheels"
    for i, version in enumerate(RELEASES):
        standin_wheel(folder, f"{version}+cpu", f"{i:040x}")
    script = tmp_path / "repro.py"
    script.write_text(SCRIPT)
    done = _bench(
        tmp_path,
        "--loop-good",
        "2.9.0",
        "--loop-bad",
        "2.14.1",
        "--loop-index",
        str(folder),
        "--loop-script",
        str(script),
        "--loop-cuda",
        "cpu",
        "--loop-workdir",
        str(tmp_path / "work"),
        "--out",
        str(tmp_path / "out"),
    )
    assert done.returncode == Exit.OK, done.stderr
    doc = json.loads((tmp_path / "out" / "loop.json").read_text())
    tool, loop = doc["tool"], doc["loop"]
    assert tool["exit"] == Exit.OK and tool["answer"] == {
        "last_good": "2.11.0+cpu",
        "first_bad": "2.12.0+cpu",
    }
    assert "--repeat 1" in tool["command"] and "--overlay" in tool["command"]
    judged = [b["version"] for b in tool["builds"]]
    assert 3 <= len(judged) <= len(RELEASES) and len(set(judged)) == len(judged)
    assert [b["version"] for b in loop["builds"]] == judged  # the same builds, in that order
    assert doc["same_verdicts"] and {b["verdict"] for b in loop["builds"]} == {"good", "bad"}
    for b in loop["builds"]:
        assert b["install_seconds"] > 0 and b["probe_seconds"] > 0
    assert doc["floor_seconds"] == pytest.approx(
        sum(b["probe_seconds"] for b in loop["builds"]), abs=0.01
    )
    assert doc["loop_seconds"] == pytest.approx(
        loop["install_seconds"] + loop["probe_seconds"], abs=0.02
    )
    assert doc["tool_vs_loop"] == pytest.approx(
        doc["tool_seconds"] / doc["loop_seconds"], abs=0.001
    )
    assert doc["gpu"] == "none" and doc["goals"] == {
        "tool_vs_loop_at_most": 0.8,
        "tool_vs_floor_at_most": 1.3,
    }
    # both sides used uv caches of their own under the emptied work folder; the venvs are gone
    assert (tmp_path / "work" / "loop" / "uv-cache").is_dir()
    assert not (tmp_path / "work" / "tool" / "uv-cache").exists()
    assert not list((tmp_path / "work" / "loop").glob("venv-*"))
    assert (tmp_path / "work" / "tool" / "results.sqlite").is_file()
    assert "bench loop on none" in done.stderr
    # the figure beside it: the three walls from the same document, the GPU in its title
    svg = (tmp_path / "out" / "loop.svg").read_text()
    assert "From a reproducer to an answer, " in svg and "(none)" in svg
    assert f">{doc['tool_seconds']:.3g}<" in svg and f">{doc['loop_seconds']:.3g}<" in svg


def test_the_loop_part_names_what_it_lacks(tmp_path):
    done = _bench(tmp_path, "--loop-good", "2.9.0", "--out", str(tmp_path / "out"))
    assert done.returncode == Exit.MISTAKE
    assert (
        done.stderr.strip()
        .splitlines()[-1]
        .endswith(
            "--parts loop needs --loop-bad, --loop-index, --loop-script (the range, the folder of "
            "wheels and the reproducer both sides run)"
        )
    )
