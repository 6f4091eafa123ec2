"""Network faults: a wheel dropped mid-way resumes with Range, 429/503 wait for Retry-After with
jitter, and the bytes and rate are shown; against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import hashlib
import os

import pytest
from helpers.hostile import HostileServer, page

from torchbisect.backends import wheels
from torchbisect.errors import InfraError
from torchbisect.index import fetch as index
from torchbisect.net import retry

NAME = "torch-2.98.1+cpu-cp311-cp311-linux_x86_64.whl"
PATH = "/whl/cpu/torch-2.98.1%2Bcpu-cp311-cp311-linux_x86_64.whl"
BODY = os.urandom(3 * 1024 * 1024 + 17)


def _download(server, tmp_path, **kw):
    return wheels.download(server.url + PATH, tmp_path / "downloads", log=tmp_path / "log", **kw)


def test_a_dropped_download_resumes_where_it_stopped(tmp_path, waits):
    script = [("drop", 1_000_000), ("drop", 500_000)]
    with HostileServer({PATH: BODY}, script=script) as server:
        path, sha = _download(server, tmp_path)
    assert path.name == NAME and path.read_bytes() == BODY
    assert sha == hashlib.sha256(BODY).hexdigest()
    assert [r for _, r in server.requests] == [None, "bytes=1000000-", "bytes=1500000-"]
    assert "stopped at 1000000 bytes" in (tmp_path / "log").read_text()


def test_a_server_that_ignores_range_still_gives_the_right_bytes(tmp_path, waits):
    with HostileServer({PATH: BODY}, script=[("drop", 200_000)], ignore_range=True) as server:
        path, sha = _download(server, tmp_path)
    assert path.read_bytes() == BODY and sha == hashlib.sha256(BODY).hexdigest()


def test_429_and_503_wait_for_retry_after_capped_and_jittered(tmp_path, waits):
    script = [
        ("status", 429, {"Retry-After": "30"}),
        ("status", 503, {"Retry-After": "2"}),
        ("status", 503),
    ]
    with HostileServer({PATH: BODY}, script=script) as server:
        path, _ = _download(server, tmp_path, max_wait=10)
    assert path.read_bytes() == BODY
    assert len(waits) == 3
    assert 8 <= waits[0] <= 12  # Retry-After 30, capped at max_wait=10, ±20 %
    assert 1.6 <= waits[1] <= 2.4  # Retry-After 2
    assert 6.4 <= waits[2] <= 9.6  # no Retry-After: exponential backoff (2**3)
    assert len({round(w, 6) for w in waits}) == 3


def test_a_missing_wheel_fails_at_once_and_leaves_nothing(tmp_path, waits):
    with HostileServer({}) as server, pytest.raises(InfraError, match="HTTP 404"):
        _download(server, tmp_path)
    assert waits == [] and len(server.requests) == 1
    assert list((tmp_path / "downloads").iterdir()) == []  # not even its folder


def test_an_index_that_never_answers_gives_up_with_one_sentence(tmp_path, waits):
    script = [("status", 503)] * 10
    with (
        HostileServer({PATH: BODY}, script=script) as server,
        pytest.raises(InfraError, match=r"failed after 3 attempts \(HTTP 503 "),
    ):
        _download(server, tmp_path, attempts=3)
    assert len(waits) == 2


def test_progress_shows_bytes_and_rate(tmp_path, waits, capsys):
    seen = []
    with HostileServer({PATH: BODY}) as server:
        _download(server, tmp_path, progress=lambda *a: seen.append(a))
    assert seen[-1][0] == seen[-1][1] == len(BODY) and seen[-1][2] > 0
    show = wheels._terminal(NAME)  # what a terminal gets when no handler is given
    show(1_500_000, 3_000_000, 2_000_000.0)
    assert f"\r{NAME}: 1.5 MB of 3.0 MB, 2.0 MB/s" in capsys.readouterr().err
    assert "MB/s), sha256" in (tmp_path / "log").read_text()


def test_an_index_page_waits_for_retry_after_too(waits):
    page_text = page(["/whl/cpu/torch-2.98.1%2Bcpu-cp311-cp311-linux_x86_64.whl"])
    script = [("status", 429, {"Retry-After": "4"}), ("status", 503)]
    with HostileServer({"/whl/cpu/torch/": page_text}, script=script) as server:
        found = index.fetch_wheels(f"{server.url}/whl/cpu/", backoff=0.5)
    assert [w.version for w in found] == ["2.98.1+cpu"]
    assert 3.2 <= waits[0] <= 4.8 and 0.8 <= waits[1] <= 1.2  # told 4 s; then 0.5 * 2


def test_plan_hash_resumes_a_dropped_download_too(monkeypatch):
    monkeypatch.setattr(retry, "_sleep", lambda _: None)
    with HostileServer({PATH: BODY}, script=[("drop", 700_000)]) as server:
        assert index.sha256_of(server.url + PATH) == hashlib.sha256(BODY).hexdigest()
    assert [r for _, r in server.requests] == [None, "bytes=700000-"]
