"""48.6: the user's repository config is not the tool's.  `--pytorch-repo` ran a filter driver
from the clone's own .git/config (through `git archive`), as a hand-run `git archive` would; a
branch named like a commit sha made git print a warning that was read as the commit.  Now git
runs through one helper (bisect/gitrange.py `git_data`) with the clone's programs switched off,
blobs are read raw, and revisions are read after `--end-of-options`, from stdout alone."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from torchbisect.bisect import gitrange
from torchbisect.bisect.commits import CommitLookup
from torchbisect.errors import ConfigError


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


@pytest.fixture
def clone(tmp_path) -> tuple[Path, str, str, Path]:
    """A clone of two commits changing torch/a.py, whose config and attributes name programs
    that leave a mark when git runs them; (repo, old sha, new sha, the mark)."""
    repo, mark = tmp_path / "pytorch", tmp_path / "ran"
    (repo / "torch").mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "config", "user.email", "a@b"), _git(repo, "config", "user.name", "a")
    (repo / "torch" / "a.py").write_text("x = 1\n")
    _git(repo, "add", "."), _git(repo, "commit", "-q", "-m", "old")
    old = _git(repo, "rev-parse", "HEAD")
    (repo / "torch" / "a.py").write_text("x = 2\n")
    (repo / ".gitattributes").write_text("*.py filter=evil diff=evil export-subst\n")
    _git(repo, "add", "."), _git(repo, "commit", "-q", "-m", "new $Format:%H$")
    new = _git(repo, "rev-parse", "HEAD")
    program = tmp_path / "evil.sh"
    program.write_text(f'#!/bin/sh\necho "$0 $*" >> {mark}\ncat\n')
    program.chmod(0o755)
    for key in (
        "filter.evil.smudge",
        "filter.evil.clean",
        "diff.evil.textconv",
        "core.fsmonitor",
        "core.pager",
        "gpg.program",
        "diff.external",
    ):
        _git(repo, "config", key, str(program))
    _git(repo, "config", "log.showSignature", "true")
    _git(repo, "config", "filter.evil.required", "true")
    return repo, old, new, mark


def test_no_program_of_the_clones_config_runs_and_files_are_read_raw(clone):
    repo, old, new, mark = clone
    commits = gitrange.first_parent_commits(repo, old, new)
    tree = gitrange.python_changes(repo, old, new)
    assert [c.sha for c in commits] == [new] and commits[0].paths == (
        ".gitattributes",
        "torch/a.py",
    )
    assert tree.write == {"torch/a.py": b"x = 2\n"} and tree.base == {"torch/a.py": b"x = 1\n"}
    assert gitrange.full_sha(repo, new[:12]) == new
    assert not mark.exists(), mark.read_text()


def test_a_branch_named_like_a_commit_sha_is_not_read_as_that_commit(clone):
    repo, old, new, mark = clone
    _git(repo, "branch", old, new)  # a branch named `old`'s sha, pointing at `new`
    assert gitrange.full_sha(repo, old) == old  # the commit, never git's warning
    lookup = CommitLookup(repo, github=False)
    assert lookup._subject_from_repo(old).strip() == "old"
    assert not mark.exists()


@pytest.mark.parametrize("rev", ["--output={here}", "-p", "main"])
def test_a_revision_is_never_an_option_and_a_branch_is_no_commit_sha(clone, rev, tmp_path):
    repo, _, _, mark = clone
    if rev == "main":  # a ref, not a commit sha: full_sha wants the nightly's main commit
        assert gitrange.full_sha(repo, rev) == _git(repo, "rev-parse", "main")
        return
    here = tmp_path / "torchbisect-was-here"  # this test's own: a machine's /tmp outlives runs
    with pytest.raises(ConfigError, match="has no commit"):
        gitrange.full_sha(repo, rev.format(here=here))
    assert not here.exists() and not mark.exists()
