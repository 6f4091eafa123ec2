"""Nothing a user runs in a checkout dirties it or breaks the tests: the quick start's page, its
files beside it and the lock are ignored by git, a plan that pins no wheel writes no lock, and an
--offline plan from a lock that pins nothing says to plan online first."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import REPO
from helpers.cli import call, torchbisect

from torchbisect.exits import Exit


def _status(argv: list[str]) -> int:
    try:
        return call(*argv)
    except SystemExit as done:
        return done.code


def _git(folder: Path, *argv: str) -> str:
    return subprocess.run(
        ["git", *argv], cwd=folder, capture_output=True, text=True, check=True
    ).stdout


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    """A clone of the tracked files (and the new ones not ignored), committed."""
    names = (
        subprocess.run(
            [
                "git",
                "ls-files",
                "-z",
                "--cached",
                "--others",
                "--exclude-standard",
                "--",
                ".gitignore",
                "matrix.yaml",
                "pyproject.toml",
                "probes",
            ],
            cwd=REPO,
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .split("\0")
    )
    tree = tmp_path / "clone"
    for name in filter(None, names):
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, tree / name)
    _git(tree, "init", "-q")
    _git(tree, "add", "-A")
    _git(tree, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "clone")
    return tree


@pytest.mark.slow  # a real run of the main job, then report, in a subprocess each
def test_the_quick_start_in_a_clone_leaves_git_status_clean(clone):
    for argv in (["matrix", "--cells", "preinstalled", "--backend", "current"], ["report"]):
        done = torchbisect(*argv, cwd=clone, timeout=600)
        assert done.returncode == Exit.OK, done.stdout + done.stderr
    assert (clone / "reports" / "index.html").is_file()
    assert (clone / "reports" / "stale_replay.py").is_file()
    assert (clone / "reports" / "results.schema.json").is_file()
    assert _git(clone, "status", "--porcelain", "--untracked-files=all") == ""


def test_a_plan_that_pins_no_wheel_writes_no_lock(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "matrix.yaml").write_text("preinstalled: true\n")
    assert _status(["plan"]) == Exit.OK
    assert "no wheel to pin, so no lock is written" in capsys.readouterr().out
    assert not (tmp_path / "matrix.lock.json").exists()


def test_offline_from_a_lock_that_pins_nothing_says_to_plan_online(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "matrix.yaml").write_text("stable:\n  versions: all from 2.3\n")
    (tmp_path / "matrix.lock.json").write_text('{"format": 1, "builds": {}}\n')
    assert _status(["plan", "--offline"]) == Exit.MISTAKE
    err = capsys.readouterr().err
    assert "the lock pins no stable build: run `torchbisect plan` once with network" in err
    assert "the newest there is none" not in err
