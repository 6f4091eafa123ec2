"""E1, E3: a redirect is a link like any other.  Every hop passes the link rule the first URL
passed, whatever way the host is spelled; a name that does not resolve is not public; the GitHub
token goes only to the API's origin, and a POST is never turned into a GET.

The public side is played by a `Peer` used as `http_proxy`: the client asks it for
http://93.184.216.34/… (a public address, so the rule sees a public index) and every hop the client
takes goes through it too, so `net.seen` lists every request that left the client.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
from datetime import date

import pytest
from helpers import make_cell, make_run
from helpers.cli import torchbisect
from helpers.loopback import Peer, redirect

from torchbisect.backends import wheels
from torchbisect.config.matrix import load_matrix
from torchbisect.errors import IndexUnreachable, InfraError
from torchbisect.exits import Exit
from torchbisect.index import fetch as index
from torchbisect.index import pages
from torchbisect.model import Channel
from torchbisect.net import links
from torchbisect.plan.resolve import build_plan
from torchbisect.store.db import Store

PUBLIC = "http://93.184.216.34"
LINK = f"{PUBLIC}/whl/cpu/torch-2.98.1%2Bcpu-cp311-cp311-linux_x86_64.whl"
SPELLINGS = {  # how E1 spelled the metadata service and this host, and what each must rank
    "169.254.169.254": links.LINK_LOCAL,
    "169.254.169.254.": links.LINK_LOCAL,
    "0xa9fea9fe": links.LINK_LOCAL,
    "2852039166": links.LINK_LOCAL,
    "0251.0376.0251.0376": links.LINK_LOCAL,
    "::ffff:169.254.169.254": links.LINK_LOCAL,
    "localhost.": links.LOOPBACK,
    "127.1": links.LOOPBACK,
    "no-such-host.invalid": links.UNRESOLVED,  # RFC 6761: never resolves
}


def _secret(host: str) -> str:
    return (
        f"http://[{host}]/latest/meta-data/" if ":" in host else f"http://{host}/latest/meta-data/"
    )


@pytest.fixture
def internet(monkeypatch):
    """Start a Peer that every http:// request goes through; returns it."""
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
    started = []

    def start(answer):
        peer = Peer(answer).__enter__()
        started.append(peer)
        monkeypatch.setenv("http_proxy", peer.url)
        return peer

    yield start
    for peer in started:
        peer.__exit__(None, None, None)


@pytest.mark.parametrize("host", sorted(SPELLINGS))
def test_a_public_link_that_redirects_inward_is_not_followed(host, internet, tmp_path):
    hop = _secret(host)
    net = internet(lambda seen: redirect(hop) if seen.target == LINK else (200, {}, b"secret"))
    with pytest.raises(InfraError, match="not followed") as refused:
        wheels.download(LINK, tmp_path / "downloads", log=tmp_path / "cell.log")
    with pytest.raises(IndexUnreachable, match="not followed"):  # plan --hash
        index.sha256_of(LINK)
    assert [s.target for s in net.seen] == [LINK, LINK]  # the hop itself was never asked
    assert "allow_links_to" in str(refused.value) and "\n" not in str(refused.value)
    assert list((tmp_path / "downloads").iterdir()) == []


@pytest.mark.parametrize(("host", "rank"), sorted(SPELLINGS.items()))
def test_every_spelling_of_a_host_ranks_as_the_address_it_names(host, rank):
    assert links.host_rank(host) == rank == links.rank(_secret(host))


def test_a_link_to_a_name_that_does_not_resolve_is_not_public():
    body = (
        b'<html><body><a href="http://no-such-host.invalid/torch-2.98.1%2Bcpu-cp311-cp311-'
        b'linux_x86_64.whl">t</a></body></html>'
    )
    listed = pages.parse_page(body, "text/html", f"{PUBLIC}/whl/cpu/torch/", "torch")
    notes = []
    assert (
        len(listed) == 1 and index.reachable(listed, f"{PUBLIC}/whl/cpu/", note=notes.append) == ()
    )
    assert "does not resolve" in notes[0]


def test_an_index_page_that_redirects_inward_is_refused_at_once_unless_allowed(internet):
    page = f"{PUBLIC}/whl/cpu/torch/"
    listing = f'<html><body><a href="{LINK}">t</a></body></html>'.encode()
    net = internet(
        lambda seen: (
            redirect("http://169.254.169.254/whl/cpu/torch/")
            if seen.target == page
            else (200, {"Content-Type": "text/html"}, listing)
        )
    )
    with pytest.raises(IndexUnreachable, match="169.254.169.254.*not followed"):
        index.fetch_wheels(f"{PUBLIC}/whl/cpu/", retries=4)
    assert len(net.seen) == 1  # a refusal is not retried
    found = index.fetch_wheels(f"{PUBLIC}/whl/cpu/", allow=["169.254.169.254"])
    assert [w.version for w in found] == ["2.98.1+cpu"]  # allow_links_to covers hops too
    assert net.seen[-1].target == "http://169.254.169.254/whl/cpu/torch/"


def test_a_name_that_changes_its_answer_after_the_check_is_not_connected(monkeypatch, tmp_path):
    """DNS rebinding: the check sees a public address, the connection gets this host.  The
    resolver is the one piece a test on 127.0.0.1 cannot run for real, so it is stood in for."""
    monkeypatch.setattr(links, "_ranked", {})
    answers = iter(["93.184.216.34", "127.0.0.1"])  # first for the check, then for the connect
    real = socket.getaddrinfo

    def rebinding(host, *args, **kwargs):
        return real(next(answers, "127.0.0.1") if host == "rebind.test" else host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    with Peer(lambda seen: (200, {}, b"internal")) as internal:
        port = internal.url.rsplit(":", 1)[1]
        with pytest.raises(InfraError, match="led the connection to 127.0.0.1.*not connected"):
            wheels.download(
                f"http://rebind.test:{port}/whl/torch-2.98.1%2Bcpu-cp311-cp311-linux_x86_64.whl",
                tmp_path / "downloads",
                log=tmp_path / "log",
            )
    assert internal.seen == []


@pytest.mark.parametrize(
    "location",
    [
        "http://[::1",
        "http://93.184.216.34:99999/x",
        "file:///etc/passwd",
        "gopher://93.184.216.34/",
    ],
)
def test_a_redirect_that_is_no_http_url_is_one_sentence(location, internet, tmp_path):
    net = internet(lambda seen: redirect(location))
    with pytest.raises(InfraError, match="not followed"):
        wheels.download(LINK, tmp_path / "downloads", log=tmp_path / "cell.log")
    assert len(net.seen) == 1


def test_plan_applies_allow_links_to_to_the_hops_of_its_index_pages(internet, tmp_path):
    mirror = "http://10.1.2.3/whl/cpu/torch/"  # where the public index sends its page
    listing = f'<html><body><a href="{LINK}">t</a></body></html>'.encode()
    net = internet(
        lambda seen: (
            (200, {"Content-Type": "text/html"}, listing)
            if seen.target == mirror
            else redirect(mirror)
        )
    )
    matrix = tmp_path / "matrix.yaml"
    text = (
        f"indexes:\n  stable: {PUBLIC}/whl/cpu/\ndefaults:\n  python: '3.11'\n  cuda: cpu\n"
        "stable:\n  versions: [2.98.1]\n"
    )
    matrix.write_text(text)
    options = dict(
        lock=None, python="3.11", platform="linux_x86_64", driver=None, today=date(2026, 11, 30)
    )
    with pytest.raises(IndexUnreachable, match="10.1.2.3.*not followed"):
        build_plan(load_matrix(matrix), **options)
    assert mirror not in [s.target for s in net.seen]
    matrix.write_text(text + "allow_links_to: [10.1.2.3]\n")
    assert [c.url for c in build_plan(load_matrix(matrix), **options).cells] == [LINK]


def test_a_redirect_to_another_public_host_is_followed_hop_by_hop(internet, tmp_path):
    body = os.urandom(200_000)
    cdn = "http://93.184.216.35/cdn/torch-2.98.1%2Bcpu-cp311-cp311-linux_x86_64.whl"
    net = internet(lambda seen: redirect(cdn, 301) if seen.target == LINK else (200, {}, body))
    path, sha = wheels.download(LINK, tmp_path / "downloads", log=tmp_path / "cell.log")
    assert path.read_bytes() == body and sha == hashlib.sha256(body).hexdigest()
    assert [s.target for s in net.seen] == [LINK, cdn]


# ---- E3: notify's token and its POST -------------------------------------------------------------


def _store(path):
    cell = make_cell(
        "nightly-20261129-cu130-cp312",
        channel=Channel.NIGHTLY,
        date="2026-11-29",
        version="2.16.0.dev20261129+cu130",
    )
    with Store(path) as store:
        store.add_many([make_run(cell, verdict="affected")])
    return path


def _notify(tmp_path, api_url):
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("GITHUB_") and "proxy" not in k.lower()
    }
    env.update(GITHUB_API_URL=api_url, GITHUB_REPOSITORY="o/r", GITHUB_TOKEN="ghs_secret")
    (tmp_path / "summary.md").write_text("## torchbisect\n")
    return torchbisect(
        "notify",
        "--store",
        str(_store(tmp_path / "a.sqlite")),
        "--summary",
        "summary.md",
        cwd=tmp_path,
        env=env,
        timeout=60,
    )


def test_notify_sends_its_token_to_no_other_origin_and_never_turns_a_post_into_a_get(tmp_path):
    with Peer(lambda seen: (200, {}, b"[]")) as elsewhere:

        def api(seen):
            return redirect(f"{elsewhere.url}/taken{seen.target}")

        with Peer(api) as github:
            done = _notify(tmp_path, f"{github.url}/api")
    assert done.returncode == Exit.NO_VERDICT, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr
    assert "POST" in lines[0] and "not followed" in lines[0]
    # The GET went on to the other origin without the token; the POST did not go on at all.
    assert [(s.method, "Authorization" in s.headers) for s in elsewhere.seen] == [("GET", False)]
    assert [(s.method, s.headers.get("Authorization")) for s in github.seen] == [
        ("GET", "Bearer ghs_secret"),
        ("POST", "Bearer ghs_secret"),
    ]


def test_a_307_to_the_same_origin_sends_the_post_again_with_its_body(tmp_path):
    def api(seen):
        if seen.method == "GET":
            return 200, {}, b"[]"
        if seen.target == "/api/repos/o/r/issues":
            return redirect("/api/v2/repos/o/r/issues", 307)
        return 201, {}, json.dumps({"number": 7}).encode()

    with Peer(api) as github:
        done = _notify(tmp_path, f"{github.url}/api")
    assert done.returncode == Exit.OK, done.stderr
    assert "status issue #7: opened" in done.stdout
    posts = [s for s in github.seen if s.method == "POST"]
    assert [p.target for p in posts] == ["/api/repos/o/r/issues", "/api/v2/repos/o/r/issues"]
    assert posts[0].body == posts[1].body and b'"title"' in posts[1].body
    assert posts[1].headers.get("Authorization") == "Bearer ghs_secret"
