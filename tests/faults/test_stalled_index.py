"""48.4: a slow peer ends in time.  An index sending its page one byte a second held `plan`
with no output; now every request says within a second what it waits for, and the total
deadline (net/client.py PAGE: 180 s) ends it with one sentence naming the page, exit 4.

The clock the deadlines read (net/deadline.py) runs a hundred times fast here, so the 180 s
bound passes in under two seconds of the trickle; the notice keeps its real second."""

from __future__ import annotations

import time

import pytest
from helpers.cli import call
from helpers.loopback import Peer

from torchbisect.exits import Exit
from torchbisect.net import deadline


def _trickle(seen):
    def body():
        for byte in b"<html><body>" + b"x" * 100_000:
            time.sleep(0.1)
            yield bytes([byte])

    return 200, {"Content-Type": "text/html"}, body()


@pytest.fixture
def fast_clock(monkeypatch):
    start = time.monotonic()
    monkeypatch.setattr(deadline, "_now", lambda: start + (time.monotonic() - start) * 100)


def test_plan_names_the_index_it_waits_for_and_the_stalled_one_ends_it(
    tmp_path, monkeypatch, capsys, fast_clock
):
    monkeypatch.chdir(tmp_path)
    with Peer(_trickle) as peer:
        page = f"{peer.url}/whl/cpu/torch/"
        (tmp_path / "matrix.yaml").write_text(
            f"indexes:\n  stable: {peer.url}/whl/cpu/\ndefaults:\n  python: '3.11'\n"
            "  cuda: cpu\nstable:\n  versions: [2.98.2]\n"
        )
        code = call("plan", "--matrix", "matrix.yaml")
    err = capsys.readouterr().err.strip().splitlines()
    assert code == Exit.INDEX_UNREACHABLE, err
    assert f"note: waiting for {page} to answer (at most 180 s in all)" in err
    assert err[-1].startswith("torchbisect plan: error: ") and page in err[-1]
    assert "within 180 s (the total deadline)" in err[-1]
    assert len(peer.seen) == 1  # a slow peer is asked once
