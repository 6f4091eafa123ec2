"""D1, D6: a wheel index can name files only inside the download folder, cannot send a cell to
file://, loopback, link-local or private targets from afar, and a lock it poisoned is one sentence.
"""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pytest
from helpers.cli import one_sentence, torchbisect
from helpers.hostile import HostileServer, page

from torchbisect.backends import wheels
from torchbisect.config.matrix import load_matrix
from torchbisect.errors import InfraError, ResolveError
from torchbisect.exits import Exit
from torchbisect.index import fetch as index
from torchbisect.index import pages
from torchbisect.plan.lock import Lock, LockedBuild
from torchbisect.plan.resolve import build_plan

GOOD = "torch-2.98.1%2Bcpu-cp311-cp311-linux_x86_64.whl"
ESCAPES = [  # each names a wheel at the end of the URL, but not at the end of its decoded path
    "/x/..%2F..%2F..%2F..%2Fsomewhere?/torch-2.98.2+cpu-cp311-cp311-linux_x86_64.whl",
    "/x/%2Ftmp%2Fevil%2Ftorch-2.98.3%2Bcpu-cp311-cp311-linux_x86_64.whl",
    "/x/..%5C..%5Ctorch-2.98.4%2Bcpu-cp311-cp311-linux_x86_64.whl",
    "/x/torch-2.98.5%2Bcpu-cp311-cp311-linux_x86_64.whl%00.png",
    "/x/not-a-wheel?/torch-2.98.6+cpu-cp311-cp311-linux_x86_64.whl",
]


def test_links_that_escape_the_download_folder_are_not_candidates():
    files = {"/whl/torch/": page([f"/x/{GOOD}", *ESCAPES])}
    with HostileServer(files) as server:
        found = index.fetch_wheels(f"{server.url}/whl/")
    assert [w.version for w in found] == ["2.98.1+cpu"]


def test_a_download_never_writes_outside_its_folder(tmp_path):
    body = b"stand-in wheel" * 1000
    files = {f"/x/{GOOD}": body, **{p.split("?")[0]: body for p in ESCAPES}}
    folder, log = tmp_path / "work" / "downloads", tmp_path / "cell.log"
    with HostileServer(files) as server:
        for link in ESCAPES:
            with pytest.raises(InfraError, match="must be http"):
                wheels.download(server.url + link, folder, log=log)
        path, sha = wheels.download(f"{server.url}/x/{GOOD}", folder, log=log)
    assert path.name == "torch-2.98.1+cpu-cp311-cp311-linux_x86_64.whl"
    assert path.parent.parent == folder and path.read_bytes() == body
    written = {p for p in tmp_path.rglob("*") if p.is_file()}
    assert written == {path, log}


REMOTE = "https://93.184.216.34/whl/cpu/"  # a public address, so no name has to resolve
TARGETS = {
    "file:///srv/wheels/": "file",
    "http://127.0.0.1:9/": "loopback",
    "http://localhost:9/": "loopback",
    "http://169.254.169.254/latest/": "link-local",
    "http://10.1.2.3/": "private",
    "http://[::1]:9/": "loopback",
}


def _remote_page(extra_targets) -> list[index.Wheel]:
    links = [f"{REMOTE}{GOOD}"] + [
        f"{t}torch-2.98.{i}%2Bcpu-cp311-cp311-linux_x86_64.whl"
        for i, t in enumerate(extra_targets, start=2)
    ]
    return pages.parse_page(page(links).encode(), "text/html", REMOTE + "torch/", "torch")


def test_a_remote_index_cannot_send_a_cell_to_internal_targets():
    listed = _remote_page(TARGETS)
    assert len(listed) == 1 + len(TARGETS)  # the page lists them all; none may be used
    notes = []
    kept = index.reachable(listed, REMOTE, note=notes.append)
    assert [w.version for w in kept] == ["2.98.1+cpu"]
    assert "allow_links_to" in notes[0]
    allowed = index.reachable(listed, REMOTE, allow=["169.254.169.254", "file"])
    assert sorted(w.url.split("/")[2] for w in allowed) == ["", "169.254.169.254", "93.184.216.34"]


def test_a_local_index_may_link_to_local_targets():
    local = "http://127.0.0.1:8080/whl/cpu/"
    listed = _remote_page(["http://127.0.0.1:9/", "http://10.1.2.3/"])
    assert len(index.reachable(listed, local)) == 3


def test_allow_links_to_in_matrix_yaml_lets_a_mirror_link_to_a_private_host(tmp_path):
    matrix = tmp_path / "matrix.yaml"
    text = (
        f"indexes:\n  stable: {REMOTE}\ndefaults:\n  python: '3.11'\n  cuda: cpu\n"
        "stable:\n  versions: [2.98.2]\n"
    )
    matrix.write_text(text)
    fetch = lambda url: _remote_page(["http://10.1.2.3/"])  # noqa: E731 - the page as served
    options = dict(
        lock=None,
        python="3.11",
        platform="linux_x86_64",
        driver=None,
        today=date(2026, 11, 30),
        fetch=fetch,
    )
    with pytest.raises(ResolveError, match="2.98.2 is not on"):
        build_plan(load_matrix(matrix), **options)
    matrix.write_text(text + "allow_links_to: [10.1.2.3]\n")
    plan = build_plan(load_matrix(matrix), **options)
    assert [c.url.split("/")[2] for c in plan.cells] == ["10.1.2.3"]


def test_a_lock_entry_that_is_not_a_wheel_is_one_sentence(tmp_path):
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text("defaults:\n  python: '3.11'\n  cuda: cpu\nstable:\n  versions: [2.98.2]\n")
    bad = dict(
        channel="stable",
        version="2.98.2+cpu",
        cuda="cpu",
        python="3.11",
        url="http://127.0.0.1:9" + ESCAPES[0],
        sha256=None,
    )
    lock = tmp_path / "matrix.lock.json"
    lock.write_text(json.dumps({"format": 1, "builds": {"stable-2.98.2-cpu-cp311": bad}}))
    matrix_run = ["matrix", "--offline", "--no-report", "--allow-no-gpu"]
    for command in (["plan", "--offline"], matrix_run):
        done = torchbisect(*command, "--matrix", str(matrix), cwd=tmp_path, timeout=120)
        line = one_sentence(done.stderr, done.returncode, Exit.MISTAKE, command=command[0])
        assert "does not end in a wheel file name" in line and str(lock) in line
    with pytest.raises(Exception, match="does not end in a wheel"):
        Lock.load(Path(lock))


def test_a_locked_wheel_its_index_could_not_have_sent_is_resolved_again(tmp_path):
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(
        f"indexes:\n  stable: {REMOTE}\ndefaults:\n  python: '3.11'\n  cuda: cpu\n"
        "stable:\n  versions: [2.98.1]\n"
    )
    name = "torch-2.98.1%2Bcpu-cp311-cp311-linux_x86_64.whl"
    poisoned = Lock(
        builds={
            "stable-2.98.1-cpu-cp311": LockedBuild(
                channel="stable",
                version="2.98.1+cpu",
                cuda="cpu",
                python="3.11",
                url=f"http://169.254.169.254/{name}",
                index=REMOTE,
            )
        }
    )
    notes = []
    plan = build_plan(
        load_matrix(matrix),
        lock=poisoned,
        python="3.11",
        platform="linux_x86_64",
        driver=None,
        today=date(2026, 11, 30),
        fetch=lambda url: _remote_page([]),
        note=notes.append,
    )
    assert [c.url for c in plan.cells] == [f"{REMOTE}{name}"]
    assert any("169.254.169.254" in n and "resolved again" in n for n in notes)
