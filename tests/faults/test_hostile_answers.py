"""E8 and E12's page part: an answer is bounded and checked before it is used.  An index page over
its size or file-count bound is refused at once with the bound named; GitHub answers are capped
(a 600 MB answer is not read past the cap); invalid JSON, fields of the wrong type and a
hand-edited state marker in the status issue are one sentence (or one note), never a traceback.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from helpers import make_cell, make_run
from helpers.cli import command
from helpers.loopback import Peer

from torchbisect.errors import IndexUnreachable
from torchbisect.exits import Exit
from torchbisect.index import fetch as index
from torchbisect.model import Channel
from torchbisect.net import retry
from torchbisect.store.db import Store

PEP691 = "application/vnd.pypi.simple.v1+json"


@pytest.fixture(autouse=True)
def _no_waits(monkeypatch):
    monkeypatch.setattr(retry, "_sleep", lambda seconds: None)


def test_a_pep691_page_listing_a_million_files_is_refused_at_once():
    entry = b'{"filename":"t.whl","url":"","hashes":{}},'  # 40 MB in all: under the size bound
    body = b'{"meta": {"api-version": "1.1"}, "files": [' + entry * 1_000_000 + b"{}]}"
    assert len(body) < index.PAGE_LIMIT
    with (
        Peer(lambda seen: (200, {"Content-Type": PEP691}, body)) as peer,
        pytest.raises(IndexUnreachable, match="more than 200,000 files"),
    ):
        index.fetch_wheels(f"{peer.url}/whl/", retries=4)
    assert len(peer.seen) == 1  # not worth a second try


@pytest.mark.parametrize("declared", [True, False])
def test_an_index_page_over_its_size_bound_is_not_read_past_it(declared):
    size = 200 * 10**6

    def endless(seen):
        headers = {"Content-Type": "text/html"}
        if declared:
            headers["Content-Length"] = str(size)
        return 200, headers, (b"<a " * 100_000 for _ in range(size // 300_000))

    with Peer(endless) as peer, pytest.raises(IndexUnreachable, match="over the bound of 64 MB"):
        index.fetch_wheels(f"{peer.url}/whl/", retries=4)
    assert len(peer.seen) == 1 and peer.sent < 100 * 10**6


# ---- notify against a GitHub that answers badly --------------------------------------------------


def _notify(tmp_path, api_url, *, wait4=False):
    cell = make_cell(
        "nightly-20261129-cu130-cp312",
        channel=Channel.NIGHTLY,
        date="2026-11-29",
        version="2.16.0.dev20261129+cu130",
    )
    with Store(tmp_path / "a.sqlite") as store:
        store.add_many([make_run(cell, verdict="affected")])
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("GITHUB_") and "proxy" not in k.lower()
    }
    env.update(GITHUB_API_URL=api_url, GITHUB_REPOSITORY="o/r", GITHUB_TOKEN="t0ken")
    (tmp_path / "summary.md").write_text("## torchbisect\n")
    argv = command("notify", "--store", "a.sqlite", "--summary", "summary.md")
    out, err = tmp_path / "stdout", tmp_path / "stderr"
    with out.open("w") as stdout, err.open("w") as stderr:
        child = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=stdout, stderr=stderr)
        _, status, usage = os.wait4(child.pid, 0)  # the child's own peak memory, not ours
    child.returncode = os.waitstatus_to_exitcode(status)
    return child.returncode, out.read_text(), err.read_text(), usage.ru_maxrss * 1024


def _github(issues_answer, created=b'{"number": 1}'):
    def api(seen):
        if seen.method == "GET":
            return issues_answer() if callable(issues_answer) else (200, {}, issues_answer)
        return 201, {}, created

    return Peer(api)


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        (b"<html>rate limited?</html>", "is not JSON"),
        (b'{"message": "hello"}', "is not a list of issues"),
        (b'[{"number": "7", "body": "x"}]', "without a number"),
        (b'[{"number": 7, "body": 5}]', "body that is not text"),
        (b"[7]", "is not a list of issues"),
    ],
)
def test_an_answer_of_the_wrong_shape_is_one_sentence(tmp_path, answer, said):
    with _github(answer) as github:
        code, out, err, _ = _notify(tmp_path, f"{github.url}/api")
    assert code == Exit.NO_VERDICT and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and said in err
    assert [s.method for s in github.seen] == ["GET"]  # nothing written on a doubtful answer


def test_an_opened_issue_without_a_number_is_one_sentence(tmp_path):
    with _github(b"[]", created=b'{"number": null}') as github:
        code, _, err, _ = _notify(tmp_path, f"{github.url}/api")
    assert code == Exit.NO_VERDICT and "did not say its number" in err and "Traceback" not in err


def test_a_600_mb_answer_is_not_read_past_32_mb(tmp_path):
    def flood():
        return 200, {}, (b"[" + b" " * (1 << 20) for _ in range(600))

    with _github(flood) as github:
        code, _, err, peak = _notify(tmp_path, f"{github.url}/api")
    assert code == Exit.NO_VERDICT and "over the bound of 32 MB" in err and "Traceback" not in err
    assert github.sent < 100 * 2**20 and peak < 1 << 30


def test_a_hand_edited_state_marker_is_a_note_and_is_written_anew(tmp_path):
    issue = {"number": 4, "body": '<!-- torchbisect-state: {"verdicts": ["edited"], "fix": 1} -->'}

    def api(seen):
        if seen.method == "PATCH":
            issue["body"] = json.loads(seen.body)["body"]
            return 200, {}, b"{}"
        return 200, {}, json.dumps([issue]).encode()

    with Peer(api) as github:
        code, out, err, _ = _notify(tmp_path, f"{github.url}/api")
        assert code == Exit.OK, err
        assert "note: the state marker in issue #4 is not one torchbisect wrote" in out
        assert [s.method for s in github.seen] == ["GET", "PATCH"]  # repaired, no comment
        code, out, err, _ = _notify(tmp_path, f"{github.url}/api")
    assert code == Exit.OK and "status issue #4: unchanged" in out and "note:" not in out
