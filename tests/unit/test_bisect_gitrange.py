"""The commit range of `bisect --pytorch-repo`, read from real git clones: only a whole range
gives commits (shallow and partial fetches are one sentence with the command that completes
them), and subjects and paths are the commits' own, however long or odd."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from helpers.pytorch_clone import GIT_ENV, _git

from torchbisect.bisect.gitrange import (
    _parse_log,
    first_parent_commits,
    plan,
    python_changes,
)
from torchbisect.errors import ConfigError, InfraError
from torchbisect.utils.proc import KEEP_BYTES


def _commit(repo: Path, subject: str, files: dict[str, str]) -> str:
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    _git(repo, "add", "-A")
    subprocess.run(
        ["git", "-C", str(repo), "commit", "-q", "--allow-empty", "-F", "-"],
        input=subject,
        text=True,
        env=GIT_ENV,
        check=True,
    )
    return _git(repo, "rev-parse", "HEAD")


def _line(repo: Path, n: int) -> list[str]:
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "config", "uploadpack.allowFilter", "true")
    _git(repo, "config", "uploadpack.allowAnySHA1InWant", "true")
    return [_commit(repo, f"change {i}", {f"torch/m{i}.py": f"N = {i}\n"}) for i in range(n)]


def test_the_commits_are_listed_oldest_first_with_their_own_paths(tmp_path):
    shas = _line(tmp_path / "repo", 4)
    commits = first_parent_commits(tmp_path / "repo", shas[0], shas[-1])
    assert [c.sha for c in commits] == shas[1:]
    assert [c.paths for c in commits] == [("torch/m1.py",), ("torch/m2.py",), ("torch/m3.py",)]


@pytest.mark.parametrize("depth", [1, 2])
def test_a_shallow_clone_gives_no_commits_and_says_how_to_fetch_them(tmp_path, depth):
    shas = _line(tmp_path / "repo", 30)
    old, new = shas[0], shas[-1]
    clone = tmp_path / "clone"
    _git(tmp_path, "init", "-q", str(clone))
    _git(clone, "remote", "add", "origin", (tmp_path / "repo").as_uri())
    if depth == 1:  # only the two nightlies' commits, as a CI checkout of two shas fetches them
        _git(clone, "fetch", "-q", "--depth", "1", "origin", old, new)
    else:  # a --depth 15 clone, and the older commit fetched on its own
        _git(clone, "fetch", "-q", "--depth", "15", "origin", "main")
        _git(clone, "fetch", "-q", "--depth", "1", "origin", old)
    with pytest.raises(ConfigError) as err:
        first_parent_commits(clone, old, new)
    assert (
        f"--pytorch-repo {clone} does not hold the history from {old[:12]} to {new[:12]} "
        "(the older nightly's main commit is not an ancestor of the newer one's there, and "
        f"the clone is shallow): run `git -C {clone} fetch --unshallow origin main`"
        in str(err.value)
    )
    _git(clone, "fetch", "-q", "--unshallow", "origin", "main")
    assert len(first_parent_commits(clone, old, new)) == 29


def test_a_shallow_boundary_inside_the_range_is_refused_even_when_old_is_reachable(tmp_path):
    # old reaches new through a merge's second parent, while the first-parent line is cut
    repo = tmp_path / "repo"
    shas = _line(repo, 3)
    _git(repo, "checkout", "-q", "-b", "side", shas[0])
    side = _commit(repo, "side", {"torch/side.py": "S = 1\n"})
    _git(repo, "checkout", "-q", "main")
    _git(repo, "merge", "-q", "--no-ff", "-m", "merge side", side)
    new = _git(repo, "rev-parse", "HEAD")
    (repo / ".git" / "shallow").write_text(f"{shas[1]}\n")  # shas[1]'s parent "not fetched"
    with pytest.raises(
        ConfigError,
        match=rf"has 1 commit\(s\) between {shas[0][:12]} and "
        rf"{new[:12]} whose parents it does not hold \(a "
        rf"shallow or grafted boundary at {shas[1][:12]}\)",
    ):
        first_parent_commits(repo, shas[0], new)


def test_an_unrelated_older_commit_is_one_sentence(tmp_path):
    shas = _line(tmp_path / "repo", 3)
    _git(tmp_path / "repo", "checkout", "-q", "--orphan", "other")
    other = _commit(tmp_path / "repo", "other root", {"torch/x.py": "X = 1\n"})
    with pytest.raises(
        ConfigError,
        match=r"is not an ancestor of the newer one's there\): run "
        r"`git -C .* fetch origin main`",
    ):
        first_parent_commits(tmp_path / "repo", other, shas[-1])


def test_a_range_far_beyond_the_kept_output_is_read_whole(tmp_path):
    """proc keeps 2 MiB of each end of a command's output; git log's is read whole."""
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    n, subject = 2500, "x" * 2000  # 5 MB of subjects alone
    stream = []
    for i in range(n):
        message = f"{i} {subject}".encode()
        body = f"N = {i}\n".encode()
        stream += [
            b"commit refs/heads/main",
            f"mark :{i + 1}".encode(),
            b"committer t <t@example.invalid> 1700000000 +0000",
            b"data %d" % len(message),
            message,
            *([f"from :{i}".encode()] if i else []),
            f"M 644 inline torch/m{i % 7}.py".encode(),
            b"data %d" % len(body),
            body,
            b"",
        ]
    subprocess.run(
        ["git", "-C", str(repo), "fast-import", "--quiet"],
        input=b"\n".join(stream),
        check=True,
        env=GIT_ENV,
    )
    old, new = _git(repo, "rev-parse", "main~2499"), _git(repo, "rev-parse", "main")
    commits = first_parent_commits(repo, old, new)
    assert len(commits) == n - 1 > 2 * KEEP_BYTES / len(subject)
    assert [int(c.subject.split()[0]) for c in commits] == list(range(1, n))
    assert {c.paths for c in commits} == {(f"torch/m{i}.py",) for i in range(7)}


def test_subjects_and_paths_are_data_never_separators_or_secrets(tmp_path):
    repo = tmp_path / "repo"
    shas = _line(repo, 1)
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"  # shaped like a GitHub token
    odd = _commit(
        repo,
        "split\x01../../../../\x01here\rand\there",
        {f"torch/utils/{token}.py": "T = 1\n", "torch/with\nnewline.py": "W = 1\n"},
    )
    test_only = _commit(repo, "test only", {"test/test_x.py": "pass\n", "docs/x.md": "x\n"})
    commits = first_parent_commits(repo, shas[0], test_only)
    assert [c.sha for c in commits] == [odd, test_only]
    assert commits[0].subject == "split\x01../../../../\x01here\rand\there"
    assert set(commits[0].paths) == {f"torch/utils/{token}.py", "torch/with\nnewline.py"}
    assert [c.kind for c in commits] == ["python", "inert"]
    changes = python_changes(repo, shas[0], odd)
    assert set(changes.write) == {f"torch/utils/{token}.py", "torch/with\nnewline.py"}
    assert changes.write[f"torch/utils/{token}.py"] == b"T = 1\n"


def test_what_git_log_gives_where_a_sha_belongs_is_never_a_commit():
    with pytest.raises(InfraError, match=r"`git log` gave '../../../../' where a commit sha"):
        _parse_log(b"\0" + b"a" * 40 + b"\0subject\0\ntorch/a.py\0\0../../../../\0x\0")


def _c(name, *paths):
    from torchbisect.bisect.gitrange import Commit

    return Commit(sha=name * 40, subject=name, paths=paths)


def test_inert_commits_are_not_probed_and_never_make_a_stretch_untestable():
    commits = (
        _c("a", "torch/a.py", "test/test_a.py"),
        _c("b", "test/test_b.py"),
        _c("c", "docs/source/c.rst"),
        _c("d", "torch/d.py"),
        _c("e", "test/e.py"),
    )
    # a Python change with its test is Python; test/ or docs/ alone is inert; the newest
    # commit is the newer nightly itself, probed whatever it holds
    assert [c.kind for c in commits] == ["python", "inert", "inert", "python", "inert"]
    assert [t.on for t in plan(commits)] == ["older", "inert", "inert", "older", "newer"]
    compiled = (
        _c("a", "torch/a.py"),
        _c("b", "csrc/x.cpp"),
        _c("c", "test/c.py"),
        _c("d", "torch/d.py"),
        _c("e", ".github/workflows/x.yml"),
        _c("f", "torch/f.py"),
    )
    assert [t.on for t in plan(compiled)] == ["older", "", "inert", "", "newer", "newer"]
