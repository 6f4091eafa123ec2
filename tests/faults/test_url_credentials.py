"""Credentials in a URL (`https://user:password@mirror/simple/`, as pip accepts them): sent as
Basic auth to their own origin only, on every hop that reaches it and on no other, and the
password in no sentence, log, lock, store or page.

The mirror and its CDN are played by one `Peer` used as `http_proxy` (see test_redirects.py):
93.184.216.34 is the mirror, which answers 401 without the right `Authorization`; its wheel link
redirects to 93.184.216.35, a CDN that must never see the mirror's credentials.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os

import pytest
from helpers.cli import call
from helpers.loopback import Peer, redirect

from torchbisect.backends import wheels
from torchbisect.config.matrix import load_matrix
from torchbisect.errors import CommandFailed
from torchbisect.exits import Exit
from torchbisect.masking import mask
from torchbisect.model import Cell, Channel
from torchbisect.net import credentials, retry
from torchbisect.plan.lock import Lock

USER, PASSWORD = "builder", "s3cret-Pa55word"
MIRROR = "http://93.184.216.34/whl/cpu/"
PAGE = f"{MIRROR}torch/"
LINK = f"{MIRROR}torch-2.98.1%2Bcpu-cp311-cp311-linux_x86_64.whl"
CDN = "http://93.184.216.35/cdn/torch-2.98.1%2Bcpu-cp311-cp311-linux_x86_64.whl"
BASIC = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
BODY = os.urandom(100_000)


@pytest.fixture(autouse=True)
def no_credentials_left():
    credentials.forget()
    yield
    credentials.forget()  # remembered per process: no other test may inherit them


@pytest.fixture
def mirror(monkeypatch):
    """The mirror and its CDN behind one proxy; the Peer (its `.seen` lists every request)."""
    for name in (
        "http_proxy",
        "HTTP_PROXY",
        "https_proxy",
        "HTTPS_PROXY",
        "no_proxy",
        "NO_PROXY",
        "all_proxy",
        "ALL_PROXY",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(retry, "_sleep", lambda s: None)
    listing = f'<html><body><a href="{LINK}">t</a></body></html>'.encode()

    def answer(seen):
        if seen.target.startswith("http://93.184.216.35/"):
            return 200, {}, BODY
        if seen.headers.get("Authorization") != BASIC:
            return 401, {"WWW-Authenticate": 'Basic realm="mirror"'}, b"who are you"
        if seen.target == PAGE:
            return 200, {"Content-Type": "text/html"}, listing
        return redirect(CDN) if seen.target == LINK else (404, {}, b"")

    with Peer(answer) as peer:
        monkeypatch.setenv("http_proxy", peer.url)
        yield peer


def _matrix(tmp_path, password=PASSWORD):
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(
        f"indexes:\n  stable: http://{USER}:{password}@93.184.216.34/whl/{{cuda}}/\n"
        "defaults:\n  python: '3.11'\n  cuda: cpu\nstable:\n  versions: [2.98.1]\n"
    )
    return matrix


def _plan(matrix, *extra):
    return call(
        "plan",
        "--matrix",
        str(matrix),
        "--driver",
        "580.65.06",
        "--platform",
        "linux_x86_64",
        "--store",
        str(matrix.parent / "results.sqlite"),
        *extra,
    )


def _everything_written(folder) -> bytes:
    return b"".join(
        p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file() and p.name != "matrix.yaml"
    )


def test_a_password_in_an_index_url_is_basic_auth_to_its_origin_only_and_written_nowhere(
    mirror, tmp_path, capsys
):
    matrix = _matrix(tmp_path)
    assert _plan(matrix, "--hash") == Exit.OK
    said = capsys.readouterr()
    asked = [(s.method, s.target, s.headers.get("Authorization")) for s in mirror.seen]
    assert ("GET", PAGE, BASIC) in asked and ("GET", LINK, BASIC) in asked  # page, then --hash
    cdn = [a for a in asked if a[1] == CDN]
    assert cdn and all(auth is None for _, _, auth in cdn)  # the hop to another origin: none
    lock = json.loads((tmp_path / "matrix.lock.json").read_text())
    (build,) = lock["builds"].values()
    assert build["url"] == LINK and build["index"] == MIRROR  # no userinfo: the runner's below
    assert build["sha256"] == hashlib.sha256(BODY).hexdigest()
    written = _everything_written(tmp_path) + (said.out + said.err).encode()
    assert PASSWORD.encode() not in written and USER.encode() not in written

    # The runner, months later: matrix.yaml read again, the wheel from the lock's bare URL.
    credentials.forget()
    load_matrix(matrix)
    before = len(mirror.seen)
    path, sha = wheels.download(build["url"], tmp_path / "downloads", log=tmp_path / "cell.log")
    assert path.read_bytes() == BODY and sha == build["sha256"]
    hops = [(s.target, s.headers.get("Authorization")) for s in mirror.seen[before:]]
    assert hops == [(LINK, BASIC), (CDN, None)]
    assert PASSWORD not in (tmp_path / "cell.log").read_text()
    cell = Cell(
        id="stable-2.98.1-cpu-cp311",
        channel=Channel.STABLE,
        version="2.98.1+cpu",
        cuda="cpu",
        python="3.11",
        url=build["url"],
        index_url=build["index"],
    )
    # uv takes an index's credentials only from its URL; its command line is masked wherever said
    index = wheels.extra_index(cell)
    assert index == f"http://{USER}:{PASSWORD}@93.184.216.34/whl/cpu/"
    failed = str(CommandFailed(["uv", "pip", "install", "--extra-index-url", index], 1, "401"))
    assert PASSWORD not in failed and f"{USER}:***@" in failed
    assert wheels.extra_index(cell, credentials=False) == MIRROR  # docker's reuse marker


def test_a_wrong_password_is_one_sentence_that_does_not_hold_it(mirror, tmp_path, capsys):
    assert _plan(_matrix(tmp_path, password="wrong-Pa55word")) == Exit.INDEX_UNREACHABLE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "HTTP 401" in err and PAGE in err
    assert "wrong-Pa55word" not in err and b"wrong-Pa55word" not in _everything_written(tmp_path)
    assert [s.headers.get("Authorization") for s in mirror.seen] == [
        "Basic " + base64.b64encode(f"{USER}:wrong-Pa55word".encode()).decode()
    ]  # no retry


def test_a_bad_index_value_quoting_a_password_masks_it(tmp_path, capsys):
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(f"indexes:\n  stable: https://{USER}:{PASSWORD}@mirror.example/{{tag}}/\n")
    assert _plan(matrix) == Exit.MISTAKE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and PASSWORD not in err and f"{USER}:***@mirror.example" in err


def test_a_lock_that_holds_a_password_loses_it_on_load_and_never_writes_it(tmp_path):
    path = tmp_path / "matrix.lock.json"
    path.write_text(
        json.dumps(
            {
                "format": 1,
                "builds": {
                    "stable-2.98.1-cpu-cp311": {
                        "channel": "stable",
                        "version": "2.98.1+cpu",
                        "cuda": "cpu",
                        "python": "3.11",
                        "url": f"https://{USER}:{PASSWORD}@mirror.example/whl/cpu/torch-2.98.1%2Bcpu-cp311-"
                        "cp311-linux_x86_64.whl",
                        "index": f"https://{USER}:{PASSWORD}@mirror.example/whl/cpu/",
                    }
                },
            }
        )
    )
    lock = Lock.load(path)
    (build,) = lock.builds.values()
    assert (
        build.url.startswith("https://mirror.example/")
        and build.index == "https://mirror.example/whl/cpu/"
    )
    assert lock.save(path) is True and PASSWORD not in path.read_text()


def test_a_token_in_the_user_place_of_a_url_is_masked_in_logs():
    token = "glxyzTOKEN0123456789abcdef"
    assert (
        mask(f"Looking in indexes: https://{token}@mirror.example/simple/")
        == "Looking in indexes: https://***@mirror.example/simple/"
    )
    assert mask("cloned ssh://git@github.com/x") == "cloned ssh://git@github.com/x"
    assert credentials.hide(f"https://{token}@mirror.example/") == "https://***@mirror.example/"
