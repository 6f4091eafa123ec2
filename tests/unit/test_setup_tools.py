"""setup-tools' venv of nox and uv, kept in the runner's tool cache: built once, reused by the
next job, never half-built, built once when two jobs start at once (real venvs, real pip)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import REPO
from helpers.py38 import runtime_typing_errors

TOOLS = REPO / ".github" / "actions" / "setup-tools" / "tools.py"
WEEK = 7 * 24 * 3600


def test_it_runs_on_any_runners_python3_from_38_on():
    source = TOOLS.read_text()
    ast.parse(source, feature_version=(3, 8))
    assert runtime_typing_errors(source) == []
    imported = {
        a.name.split(".")[0]
        for n in ast.walk(ast.parse(source))
        if isinstance(n, (ast.Import, ast.ImportFrom))
        for a in (n.names if isinstance(n, ast.Import) else [ast.alias(n.module)])
    }
    assert imported <= sys.stdlib_module_names, imported - sys.stdlib_module_names


def _tools(requirements: Path, cache: Path, **popen) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(TOOLS), str(requirements), str(cache)],
        capture_output=True,
        text=True,
        timeout=300,
        **popen,
    )


def _runs(bin_dir: str) -> bool:
    return subprocess.run([os.path.join(bin_dir, "python"), "-c", "pass"]).returncode == 0


def _backdate(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then), follow_symlinks=False)


@pytest.fixture
def requirements(tmp_path):
    path = tmp_path / "requirements.txt"
    path.write_text("# the pins (none: nothing is fetched)\n")
    return path


@pytest.mark.slow  # each build is a real venv with pip (5-10 s)
def test_built_once_reused_rebuilt_when_broken_and_leftovers_pruned(tmp_path, requirements):
    cache = tmp_path / "toolcache"
    root = cache / "torchbisect-tools"
    first = _tools(requirements, cache)
    assert first.returncode == 0, first.stderr
    bin_dir = first.stdout.strip()
    assert "built in" in first.stderr and _runs(bin_dir)
    assert Path(bin_dir).parent.parent == root

    second = _tools(requirements, cache)
    assert second.returncode == 0 and second.stdout.strip() == bin_dir
    assert "reusing" in second.stderr and "built in" not in second.stderr

    # a build killed before it published: a folder with no link and no completion mark; and
    # the venv of an older pin (Dependabot bumped it), whose link no job has used for a week
    [link] = [p for p in root.iterdir() if p.is_symlink()]
    killed = root / f"{link.name}.killed"
    (killed / "bin").mkdir(parents=True)
    (root / "0123456789abcdef.old" / "bin").mkdir(parents=True)
    (root / "0123456789abcdef").symlink_to("0123456789abcdef.old")
    _backdate(root / "0123456789abcdef", WEEK + 60)

    # its interpreter gone (a python upgraded away): not reused, built anew
    (Path(bin_dir) / "python").unlink()
    third = _tools(requirements, cache)
    assert third.returncode == 0 and "built in" in third.stderr
    rebuilt = Path(third.stdout.strip())
    assert rebuilt != Path(bin_dir) and _runs(str(rebuilt))
    # the unused pin's link and venv are gone; the killed build's folder and the broken venv
    # stay while they are young (a job may still be building or using one) ...
    assert not (root / "0123456789abcdef").is_symlink()
    assert not (root / "0123456789abcdef.old").exists()
    assert killed.is_dir() and Path(bin_dir).parent.is_dir()
    # ... and go once they are two days old
    _backdate(killed, 3 * 24 * 3600)
    _backdate(Path(bin_dir).parent, 3 * 24 * 3600)
    again = _tools(requirements, cache)
    assert "reusing" in again.stderr and again.stdout.strip() == str(rebuilt)
    assert sorted(p.name for p in root.iterdir()) == sorted([link.name, rebuilt.parent.name])


@pytest.mark.slow
def test_two_jobs_starting_at_once_build_one_venv_and_both_use_it(tmp_path, requirements):
    cache = tmp_path / "toolcache"
    jobs = [
        subprocess.Popen(
            [sys.executable, str(TOOLS), str(requirements), str(cache)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outs = [job.communicate(timeout=300) for job in jobs]
    assert [job.returncode for job in jobs] == [0, 0], outs
    # the second took its turn after the first: it reused what the first built
    assert sum("building a venv" in err for _, err in outs) == 1, outs
    assert outs[0][0] == outs[1][0] and _runs(outs[0][0].strip())
    root = cache / "torchbisect-tools"
    assert len([p for p in root.iterdir() if p.is_symlink()]) == 1
    assert "reusing" in _tools(requirements, cache).stderr


@pytest.mark.slow
def test_a_job_whose_turn_never_comes_builds_its_own_venv_beside_the_stuck_one(
    tmp_path, requirements
):
    """A build that never gives the turn back (a stuck pip) holds no one else up for longer
    than WAIT: the next job builds its own, published atomically as before the lock."""
    cache = tmp_path / "toolcache"
    cache.mkdir()
    hold = (
        "import fcntl, sys, time; f = open(sys.argv[1], 'a'); "
        "fcntl.flock(f, fcntl.LOCK_EX); print('held', flush=True); time.sleep(600)"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", hold, str(cache / "torchbisect-tools.lock")],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline() == "held\n"
        code = (
            "import sys; sys.path.insert(0, sys.argv[1]); import tools; tools.WAIT = 1; "
            "sys.exit(tools.main(sys.argv[2:]))"
        )
        done = subprocess.run(
            [sys.executable, "-B", "-c", code, str(TOOLS.parent), str(requirements), str(cache)],
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        holder.kill()
        holder.wait()
    assert done.returncode == 0, done.stderr
    assert "another job is building them; waiting for it" in done.stderr
    assert "waited 1 s for another job's build; building one of this job's own" in done.stderr
    assert _runs(done.stdout.strip())


@pytest.mark.slow
def test_a_failed_install_says_so_and_keeps_nothing(tmp_path):
    requirements = tmp_path / "requirements.txt"
    requirements.write_text(f"{tmp_path / 'no-such-1.0-py3-none-any.whl'}\n")
    cache = tmp_path / "toolcache"
    done = _tools(requirements, cache)
    assert done.returncode == 1 and done.stdout == ""
    assert "failed (exit 1); no venv was kept" in done.stderr
    assert list((cache / "torchbisect-tools").iterdir()) == []
