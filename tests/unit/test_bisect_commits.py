"""Nightly commit messages, the compare URL, and main shas from a clone or the GitHub API."""

from __future__ import annotations

import http.server
import json
import subprocess
import threading
from contextlib import contextmanager

import pytest
from helpers.pytorch_clone import GIT_ENV, _git, make_pytorch_clone

from torchbisect.bisect.commits import CommitLookup, compare_url, parse_nightly_message
from torchbisect.errors import ConfigError


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (
            "2025-08-01 nightly release (0123456789abcdef0123456789abcdef01234567)",
            ("2025-08-01", "0123456789abcdef0123456789abcdef01234567"),
        ),
        ("2025-08-01 nightly release (abc1234)\n\nbody", ("2025-08-01", "abc1234")),
        ("Merge pull request #1", None),
        ("2025-08-01 nightly release", None),
    ],
)
def test_parse_nightly_message(message, expected):
    assert parse_nightly_message(message) == expected


def test_compare_url():
    assert compare_url("aaa", "bbb") == "https://github.com/pytorch/pytorch/compare/aaa...bbb"


def test_clone_gives_main_sha_and_the_commits_between(tmp_path):
    shas = make_pytorch_clone(tmp_path / "pytorch", ["2025-08-01", "2025-08-02", "2025-08-03"])
    lookup = CommitLookup(tmp_path / "pytorch", github=False)
    old = lookup.main_sha(shas["2025-08-01"][0])
    new = lookup.main_sha(shas["2025-08-03"][0])
    assert (old.sha, old.source) == (shas["2025-08-01"][1], "repo")
    assert new.sha == shas["2025-08-03"][1]
    log = lookup.commits_between(old.sha, new.sha)
    assert [line.split(" ", 1)[1] for line in log] == [
        "change 1 of 2025-08-03",
        "change 0 of 2025-08-03",
        "change 1 of 2025-08-02",
        "change 0 of 2025-08-02",
    ]


def test_missing_commit_and_no_github_leave_the_sha_empty_and_say_why(tmp_path):
    make_pytorch_clone(tmp_path / "pytorch", ["2025-08-01"])
    found = CommitLookup(tmp_path / "pytorch", github=False).main_sha("f" * 40)
    assert found.sha == ""
    assert "has no nightly commit ffffffffffff" in found.note
    assert "GitHub lookup disabled" in found.note
    assert "no git_version" in CommitLookup(github=False).main_sha("").note


def test_repo_must_be_a_clone(tmp_path):
    with pytest.raises(ConfigError, match="not a git clone"):
        CommitLookup(tmp_path)


@contextmanager
def fake_github(messages: dict[str, str]):
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the stdlib's name
            sha = self.path.rsplit("/", 1)[-1]
            if sha not in messages:
                self.send_error(404)
                return
            body = json.dumps({"sha": sha, "commit": {"message": messages[sha]}}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/repos/pytorch/pytorch"
    finally:
        server.shutdown()
        server.server_close()


def test_github_api_answer_and_clean_failures():
    nightly, main = "a" * 40, "b" * 40
    with fake_github({nightly: f"2025-08-01 nightly release ({main})\n"}) as api:
        lookup = CommitLookup(api=api, timeout=5)
        assert (lookup.main_sha(nightly).sha, lookup.main_sha(nightly).source) == (main, "github")
        assert "HTTP 404" in lookup.main_sha("c" * 40).note
    # the server is gone: offline is a note, not an exception
    offline = CommitLookup(api=api, timeout=2).main_sha(nightly)
    assert offline.sha == "" and "cannot reach the GitHub API" in offline.note


def test_the_commits_between_are_one_entry_each_whatever_their_subjects_hold(tmp_path):
    shas = make_pytorch_clone(tmp_path / "pytorch", ["2025-08-01", "2025-08-02"])
    repo = tmp_path / "pytorch"
    (repo / "file.txt").write_text("odd\n")
    _git(repo, "add", "file.txt")
    subprocess.run(
        ["git", "-C", str(repo), "commit", "-q", "-F", "-"],
        env=GIT_ENV,
        check=True,
        input="carriage\rreturn and \x01 separator",
        text=True,
    )
    lookup = CommitLookup(repo, github=False)
    log = lookup.commits_between(shas["2025-08-01"][1], _git(repo, "rev-parse", "HEAD"))
    assert [line.split(" ", 1)[1] for line in log] == [
        "carriage\rreturn and \x01 separator",
        "change 1 of 2025-08-02",
        "change 0 of 2025-08-02",
    ]
