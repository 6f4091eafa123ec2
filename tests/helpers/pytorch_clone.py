"""A small stand-in for a pytorch clone (a real git repository): `main` and a `nightly` branch
whose commits name the main commit they were built from."""

from __future__ import annotations

import subprocess
from pathlib import Path

GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid",
           "PATH": "/usr/bin:/bin:/usr/local/bin"}


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], env=GIT_ENV, check=True,
                          capture_output=True, text=True).stdout.strip()


def make_pytorch_clone(path: Path, dates: list[str], commits_per_day: int = 2) -> dict:
    """A small stand-in for a pytorch clone: `main` with a few commits per day and a `nightly`
    branch with one "YYYY-MM-DD nightly release (<main sha>)" commit per date.

    Returns {date: (nightly sha, main sha)}.
    """
    path.mkdir(parents=True)
    _git(path, "init", "-q", "-b", "main")
    shas = {}
    for day in dates:
        for k in range(commits_per_day):
            (path / "file.txt").write_text(f"{day} {k}\n")
            _git(path, "add", "file.txt")
            _git(path, "commit", "-q", "-m", f"change {k} of {day}")
        main = _git(path, "rev-parse", "HEAD")
        _git(path, "checkout", "-q", "-B", "nightly")
        _git(path, "commit", "-q", "--allow-empty", "-m", f"{day} nightly release ({main})")
        shas[day] = (_git(path, "rev-parse", "HEAD"), main)
        _git(path, "checkout", "-q", "main")
    return shas
