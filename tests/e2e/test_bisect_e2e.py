"""End to end: `python -m torchbisect bisect --script …` against a local PEP 503 index over HTTP.

The index holds small stand-in `torch` wheels, one per nightly date (some dates missing, a version
bump from 2.10.0.dev to 2.11.0.dev mid-range, and one date with both), each with a
`torch.version.git_version` naming a commit on the `nightly` branch of a stand-in pytorch clone.
The venv backend installs them with uv; the script decides by the installed version.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time

import pytest
from helpers.cli import command, torchbisect
from helpers.nightly_world import (  # noqa: F401 - `world` is a fixture
    DATES,
    FIRST_BAD,
    PY,
    SCRIPT,
    bisect_args,
    bound,
    env,
    search_bound,
    standin_wheel,
    stored_runs,
)

from torchbisect.exits import Exit

pytestmark = pytest.mark.skipif(shutil.which("uv") is None, reason="uv is not installed")


@pytest.mark.slow
def test_script_bisection_finds_the_boundary_with_commits(world, tmp_path):
    base, shas, url = world
    done = torchbisect(
        *bisect_args(base, url, tmp_path, "--script", SCRIPT), cwd=tmp_path, timeout=600
    )
    assert done.returncode == Exit.OK, done.stderr
    result = json.loads((tmp_path / "bisect.json").read_text())
    assert result["last_good"]["date"] == "2025-08-13"
    assert result["first_bad"]["date"] == FIRST_BAD
    assert result["first_bad"]["version"] == "2.10.0.dev20250814+cpu"
    assert result["first_bad"]["git_version"] == shas[FIRST_BAD][0]
    assert result["first_bad"]["main_sha"] == shas[FIRST_BAD][1]
    assert result["compare_url"] == (
        f"https://github.com/pytorch/pytorch/compare/{shas['2025-08-13'][1]}...{shas[FIRST_BAD][1]}"
    )
    assert [c.split(" ", 1)[1] for c in result["commits"]] == ["change 0 of 2025-08-14"]
    assert result["probes"] <= bound()
    assert "exit 0 good, 125 skip" in result["rule"]
    assert result["reproduce"].startswith("torchbisect bisect --good 2025-08-13 --bad 2025-08-14")
    assert result["probes"] == stored_runs(tmp_path)  # every run is stored, re-asks too
    assert result["exact"] is True and result["candidates"] == [FIRST_BAD]
    assert result["unknown"] == [] and result["missing"] == []
    assert done.stdout.splitlines()[0].startswith(
        "the first bad nightly is 2025-08-14 (exact: the nightly before it, 2025-08-13, is good"
    )
    assert "first bad:  2025-08-14" in done.stdout
    assert "2025-08-20 has two nightlies; using 2.11.0.dev20250820+cpu" in done.stderr


@pytest.mark.slow
def test_killed_bisection_resumes_with_the_same_answer(world, tmp_path):
    base, _, url = world
    # From its fifth run on, the script waits for a file that exists only for the rerun: the
    # kill lands while a probe runs, two verdicts stored (--repeat 2: two runs each), however
    # loaded the machine is.
    calls, go = tmp_path / "calls", tmp_path / "go"
    calls.mkdir()
    gated = (
        f"n=$(ls {calls} | wc -l); touch {calls}/$$; "
        f"[ $n -lt 4 ] || while [ ! -e {go} ]; do sleep 0.05; done; {SCRIPT}"
    )
    args = bisect_args(base, url, tmp_path, "--script", gated)
    first = subprocess.Popen(
        command(*args),
        env=env(),
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 300
    while len(list(calls.iterdir())) < 5 and first.poll() is None and (time.monotonic() < deadline):
        time.sleep(0.05)
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    before = stored_runs(tmp_path)
    assert first.returncode == -signal.SIGKILL and 2 <= before < search_bound()
    assert not (tmp_path / "bisect.json").exists()

    go.touch()
    done = torchbisect(*args, cwd=tmp_path, timeout=600)
    assert done.returncode == Exit.OK, done.stderr
    result = json.loads((tmp_path / "bisect.json").read_text())
    assert (result["last_good"]["date"], result["first_bad"]["date"]) == ("2025-08-13", FIRST_BAD)
    new = stored_runs(tmp_path) - before
    assert new < result["probes"] <= bound()
    assert f"{new} run now, {result['probes'] - new} from the store" in done.stdout


@pytest.mark.slow  # over 2 s on a 2-core machine: out of the fast loop
def test_wrong_ends_are_one_sentence_and_exit_2(world, tmp_path):
    base, _, url = world
    args = bisect_args(base, url, tmp_path, "--script", SCRIPT)
    args[args.index("--good") + 1] = "2025-08-15"  # already bad
    done = torchbisect(*args, cwd=tmp_path, timeout=600)
    assert done.returncode == Exit.MISTAKE
    error = done.stderr.strip().splitlines()[-1]
    assert error == (
        "torchbisect bisect: error: the --good end, the 2025-08-15 nightly "
        "(2.10.0.dev20250815+cpu), is not good but bad: pick an older --good, or "
        "use --find-fix to look for the build that fixed it"
    )
    assert "Traceback" not in done.stderr


@pytest.mark.slow
def test_find_fix_with_a_missing_end_date(world, tmp_path):
    base, _, url = world
    fixed = SCRIPT.replace("1 if d >= '20250814' else 0", "0 if d >= '20250822' else 1")
    args = bisect_args(base, url, tmp_path, "--script", fixed, "--find-fix")
    args[args.index("--good") + 1] = "2025-08-25"  # no nightly that day: widens to 08-26
    args[args.index("--bad") + 1] = "2.10.0.dev20250801"
    done = torchbisect(*args, cwd=tmp_path, timeout=600)
    assert done.returncode == Exit.OK, done.stderr
    result = json.loads((tmp_path / "bisect.json").read_text())
    assert (result["last_bad"]["date"], result["first_good"]["date"]) == (
        "2025-08-21",
        "2025-08-22",
    )
    assert "no nightly on 2025-08-25 (--good): using the nearest one, 2025-08-26" in done.stderr
    assert result["probes"] <= bound(DATES.index("2025-08-26") + 1)


RELEASES = ["2.9.0", "2.9.1", "2.10.0", "2.11.0", "2.12.0", "2.13.0", "2.14.0", "2.14.1"]


@pytest.mark.slow
def test_release_ends_bisect_the_releases_in_between(tmp_path):
    """`--good 2.9.0 --bad 2.14.1`: which release first had it, over a flat folder of wheels
    (an air-gapped mirror), with a release candidate and a nightly there that must be ignored."""
    folder = tmp_path / "wheels"
    folder.mkdir()
    for i, version in enumerate(RELEASES):
        standin_wheel(folder, f"{version}+cpu", f"{i:040x}")
    standin_wheel(folder, "2.15.0rc1", "f" * 40)
    standin_wheel(folder, "2.16.0.dev20251001", "e" * 40)
    script = (
        'python -c "import sys, torch; '
        "v = tuple(map(int, torch.__version__.split('.')[:2])); "
        'sys.exit(1 if v >= (2, 12) else 0)"'
    )
    done = torchbisect(
        "bisect",
        "--good",
        "2.9.0",
        "--bad",
        "2.14.1",
        "--cuda",
        "cpu",
        "--python",
        PY,
        "--index-url",
        folder,
        "--backend",
        "venv",
        "--store",
        tmp_path / "results.sqlite",
        "--workdir",
        tmp_path / "venvs",
        "--no-github",
        "--json",
        tmp_path / "bisect.json",
        "--script",
        script,
        env=env(),
        cwd=tmp_path,
        timeout=600,
    )
    assert done.returncode == Exit.OK, done.stderr
    result = json.loads((tmp_path / "bisect.json").read_text())
    assert (result["last_good"]["version"], result["first_bad"]["version"]) == (
        "2.11.0+cpu",
        "2.12.0+cpu",
    )
    assert result["first_bad"]["git_version"] == f"{4:040x}"
    assert result["compare_url"] == (
        f"https://github.com/pytorch/pytorch/compare/{3:040x}...{4:040x}"
    )
    assert result["probes"] <= bound(len(RELEASES))
    assert result["reproduce"].startswith("torchbisect bisect --good 2.11.0 --bad 2.12.0")
