"""E6 and issue 22 item 7: a slow peer is one sentence naming the bound, asked once; a peer that
goes silent is retried; what will not heal (a name that does not resolve, a refused connection)
is one sentence after one attempt, with no retry lines.

The deadlines are passed small (1 s) so that the tests take a second, not the minutes of the
defaults; the sentence names whichever bound was met.  Without the deadline on every read
(net/deadline.py) the three trickling peers hold their request for 15–30 s and then succeed.
"""

from __future__ import annotations

import time

import pytest
from helpers.loopback import Peer

from torchbisect.backends import wheels
from torchbisect.bisect.commits import CommitLookup
from torchbisect.errors import IndexUnreachable, InfraError
from torchbisect.index import fetch as index
from torchbisect.net import Deadlines
from torchbisect.net.github import GitHub, GitHubError

QUICK = Deadlines(connect=2, idle=2, total=1)
WHEEL = "/whl/torch-2.98.1%2Bcpu-cp311-cp311-linux_x86_64.whl"


def _trickle(data: bytes, every: float = 0.25):
    for byte in data:
        time.sleep(every)
        yield bytes([byte])


def _slow_headers(seen):  # one byte at a time, the status line included
    return 0, {}, _trickle(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n<html></html>")


def _slow_body(seen):
    return 200, {"Content-Length": "100"}, _trickle(b"x" * 100)


@pytest.mark.slow  # a second each: the deadline is waited out
def test_an_index_trickling_its_headers_is_one_sentence_with_the_bound(waits, capsys):
    with Peer(_slow_headers) as peer, pytest.raises(IndexUnreachable) as err:
        index.fetch_wheels(f"{peer.url}/whl/", retries=4, deadlines=QUICK)
    assert "within 1 s (the total deadline)" in str(err.value)
    # no retry line; at most the notice of what it waits for (48.4)
    said = capsys.readouterr().err.splitlines()
    assert (
        len(peer.seen) == 1
        and waits == []
        and all(s.startswith("note: waiting for ") for s in said)
    )


@pytest.mark.slow  # a second each: the deadline is waited out
def test_a_wheel_trickling_its_body_is_one_sentence_with_the_bound(waits, tmp_path):
    with Peer(_slow_body) as peer, pytest.raises(InfraError, match=r"within 1 s \(the total"):
        wheels.download(
            peer.url + WHEEL, tmp_path / "downloads", log=tmp_path / "log", deadlines=QUICK
        )
    assert len(peer.seen) == 1 and waits == []
    assert list((tmp_path / "downloads").iterdir()) == []


@pytest.mark.slow  # a second each: the deadline is waited out
def test_a_slow_github_is_one_sentence_with_the_bound(waits):
    with Peer(_slow_body) as peer, pytest.raises(GitHubError) as err:
        GitHub(base_url=peer.url, token="t", deadlines=QUICK).call("GET", "/repos/o/r/issues")
    assert "cannot reach the GitHub API" in str(err.value) and "within 1 s" in str(err.value)
    assert len(peer.seen) == 1 and waits == []


def test_a_peer_that_goes_silent_is_asked_again(waits):
    def silent(seen):
        time.sleep(1.0)  # nothing at all for longer than the idle deadline
        return 200, {"Content-Type": "text/html"}, b"<html></html>"

    idle = Deadlines(connect=2, idle=0.3, total=5)
    with Peer(silent) as peer, pytest.raises(IndexUnreachable, match="went silent"):
        index.fetch_wheels(f"{peer.url}/whl/", retries=1, deadlines=idle)
    assert len(peer.seen) == 2 and len(waits) == 1


def test_a_name_that_does_not_resolve_is_one_attempt(waits, capsys, tmp_path):
    with pytest.raises(IndexUnreachable, match="no-such-host.invalid does not resolve"):
        index.fetch_wheels("http://no-such-host.invalid/whl/", retries=4)
    with pytest.raises(InfraError, match="does not resolve"):
        wheels.download(
            "http://no-such-host.invalid" + WHEEL, tmp_path / "dl", log=tmp_path / "log"
        )
    note = CommitLookup(api="http://no-such-host.invalid/repos/pytorch/pytorch").main_sha("a" * 40)
    assert "does not resolve" in note.note and "attempts" not in note.note
    assert waits == [] and capsys.readouterr().err == ""
    assert not (tmp_path / "log").exists()  # no "attempt 2 of 6" note was written


def test_a_refused_connection_is_one_attempt(waits, capsys, tmp_path):
    with Peer(lambda seen: (200, {}, b"")) as gone:
        pass  # nothing listens on its port now
    with pytest.raises(IndexUnreachable, match="refused the connection") as err:
        index.fetch_wheels(f"{gone.url}/whl/", retries=4)
    assert "attempts" not in str(err.value)
    with pytest.raises(InfraError, match="refused the connection"):
        wheels.download(gone.url + WHEEL, tmp_path / "dl", log=tmp_path / "log")
    with pytest.raises(GitHubError, match="refused the connection"):
        GitHub(base_url=gone.url, token="t").call("GET", "/repos/o/r/issues")
    assert waits == [] and capsys.readouterr().err == ""
