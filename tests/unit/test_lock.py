"""The lock file, and `torchbisect plan` end to end against an index served by the test."""

from __future__ import annotations

import json
from datetime import date

import pytest
from helpers import make_cell, make_run
from helpers.cli import call
from helpers.indexserver import make_nightly_index, make_release_index, serve

from torchbisect.errors import ConfigError
from torchbisect.exits import Exit
from torchbisect.model import Cell, Channel, Plan
from torchbisect.net import retry
from torchbisect.plan.lock import Lock, LockedBuild, lock_path, pin_sha256
from torchbisect.store.db import Store

NIGHTLY = Cell(
    id="nightly-20261001-cu130-cp312",
    channel=Channel.NIGHTLY,
    version="2.17.0.dev20261001+cu130",
    cuda="cu130",
    python="3.12",
    url="https://download.pytorch.org/whl/nightly/cu130/torch-2.17.0.dev20261001%2Bcu130"
    "-cp312-cp312-manylinux_2_28_x86_64.whl",
    date="2026-10-01",
    index_url="https://download.pytorch.org/whl/nightly/cu130/",
)
STABLE = Cell(
    id="stable-2.15.0-cu132-cp312",
    channel=Channel.STABLE,
    version="2.15.0+cu132",
    cuda="cu132",
    python="3.12",
    sha256="ab" * 32,
    url="https://download.pytorch.org/whl/cu132/torch-2.15.0%2Bcu132-cp312-cp312-"
    "manylinux_2_28_x86_64.whl",
)
PRE = Cell(id="preinstalled", channel=Channel.PREINSTALLED, version="", cuda="", python="")
PLAN = Plan(cells=(STABLE, NIGHTLY, PRE))


def test_round_trip_is_byte_identical(tmp_path):
    path = tmp_path / "matrix.lock.json"
    lock = Lock.from_plan(PLAN)
    assert lock.save(path) is True
    before = path.read_bytes()
    again = Lock.load(path)
    assert again == lock and again.dumps() == lock.dumps()
    assert Lock.from_plan(PLAN).save(path) is False  # nothing to write
    assert path.read_bytes() == before


def test_the_lock_is_sorted_and_has_no_timestamps():
    doc = json.loads(Lock.from_plan(PLAN).dumps())
    assert list(doc) == ["builds", "comment", "format"]
    assert list(doc["builds"]) == [NIGHTLY.id, STABLE.id]  # sorted; preinstalled has no wheel
    assert doc["builds"][NIGHTLY.id] == {
        "channel": "nightly",
        "cuda": "cu130",
        "date": "2026-10-01",
        "index": "https://download.pytorch.org/whl/nightly/cu130/",
        "python": "3.12",
        "sha256": None,
        "url": NIGHTLY.url,
        "version": "2.17.0.dev20261001+cu130",
    }
    assert "202" not in doc["comment"]


def test_a_missing_lock_is_empty_and_the_default_path_sits_next_to_the_matrix(tmp_path):
    assert Lock.load(tmp_path / "absent.json") == Lock()
    assert lock_path(tmp_path / "matrix.yaml") == tmp_path / "matrix.lock.json"
    assert (
        lock_path(tmp_path / "matrix.yaml", kind="H200")
        == tmp_path / "matrix.locks" / "H200.lock.json"
    )
    assert (
        lock_path(tmp_path / "matrix.yaml", lock_dir=tmp_path / "l", kind="H200")
        == tmp_path / "l" / "H200.lock.json"
    )
    assert (
        lock_path(tmp_path / "matrix.yaml", lock=tmp_path / "x.json", kind="H200")
        == tmp_path / "x.json"
    )
    assert (
        LockedBuild(
            channel="stable",
            version="v",
            cuda="cpu",
            python="3.12",
            url="/w/torch-2.15.0-cp312-cp312-linux_x86_64.whl",
        ).filename
        == "torch-2.15.0-cp312-cp312-linux_x86_64.whl"
    )


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("{", "not JSON"),
        ('{"format": 9, "builds": {}}', "expected format 1"),
        ('{"format": 1, "builds": {"x": {"channel": "stable"}}}', "entry 'x' lacks one of"),
        ('{"format": 1}', "no `builds` mapping"),
    ],
)
def test_a_broken_lock_is_a_config_error_that_says_what_to_do(tmp_path, text, why):
    path = tmp_path / "matrix.lock.json"
    path.write_text(text)
    with pytest.raises(ConfigError, match=why) as err:
        Lock.load(path)
    assert str(err.value).endswith("delete it and run `torchbisect plan` again")


def test_pin_sha256_fills_in_what_the_index_did_not_publish(tmp_path):
    path = tmp_path / "matrix.lock.json"
    Lock.from_plan(PLAN).save(path)
    pin_sha256(path, NIGHTLY.id, "CD" * 32)
    pin_sha256(path, STABLE.id, "ef" * 32)  # already pinned: unchanged
    lock = Lock.load(path)
    assert lock.get(NIGHTLY.id).sha256 == "cd" * 32
    assert lock.get(STABLE.id).sha256 == "ab" * 32


@pytest.fixture
def served(tmp_path):
    root = tmp_path / "site"
    make_release_index(root, {"cu130": ["2.14.0", "2.15.0"]}, pythons=("cp312",))
    make_nightly_index(root, [date(2026, 10, 1), date(2026, 10, 3)], pythons=("cp312",))
    with serve(root) as url:
        matrix = tmp_path / "matrix.yaml"
        matrix.write_text(
            f"indexes:\n  stable: {url}/whl/{{cuda}}/\n  nightly: {url}/whl/nightly/{{cuda}}/\n"
            "defaults:\n  python: '3.12'\n  cuda: cu130\nstable:\n  versions: all from 2.14\n"
            "nightly:\n  dates: [2026-10-01, 2026-10-02, 2026-10-03]\npreinstalled: true\n"
        )
        yield url, matrix


def plan_cli(matrix, *extra):
    return call(
        "plan",
        "--matrix",
        str(matrix),
        "--driver",
        "580.65.06",
        "--platform",
        "linux_x86_64",
        "--store",
        str(matrix.parent / "none.sqlite"),
        *extra,
    )


def test_plan_prints_the_table_writes_json_and_a_stable_lock(served, capsys):
    url, matrix = served
    out_json = matrix.parent / "out" / "plan.json"
    assert plan_cli(matrix, "--json", str(out_json)) == Exit.OK
    printed = capsys.readouterr().out
    lock_path = matrix.parent / "matrix.lock.json"
    first = lock_path.read_bytes()
    assert plan_cli(matrix, "--json", str(out_json)) == Exit.OK
    assert lock_path.read_bytes() == first  # resolving twice changes nothing
    assert "lock unchanged" in capsys.readouterr().out
    lines = printed.splitlines()
    assert lines[0].split() == ["id", "channel", "version", "cuda", "source", "stored"]
    assert lines[1].split() == [
        "stable-2.14.0-cu130-cp312",
        "stable",
        "2.14.0+cu130",
        "cu130",
        f"{url}/whl/cu130/torch-2.14.0%2Bcu130-cp312-cp312-manylinux_2_28_x86_64.whl",
        "no",
    ]
    assert "missing nightly 2026-10-02: cu130: no nightly was published on this date" in lines
    doc = json.loads(out_json.read_text())
    assert [c["id"] for c in doc["cells"]] == [
        "stable-2.14.0-cu130-cp312",
        "stable-2.15.0-cu130-cp312",
        "nightly-20261001-cu130-cp312",
        "nightly-20261003-cu130-cp312",
        "preinstalled",
    ]
    assert {"id", "channel", "version", "cuda", "url", "sha256"} <= set(doc["cells"][0])
    assert doc["missing"] == [
        {
            "channel": "nightly",
            "what": "2026-10-02",
            "reason": "cu130: no nightly was published on this date",
        }
    ]


def test_plan_offline_needs_only_the_lock(served, capsys):
    url, matrix = served
    assert plan_cli(matrix) == Exit.OK
    lock = (matrix.parent / "matrix.lock.json").read_bytes()
    matrix.write_text(matrix.read_text().replace(url, "http://127.0.0.1:9"))  # nothing there
    assert plan_cli(matrix, "--offline") == Exit.OK
    before = json.loads(lock)["builds"]
    after = json.loads((matrix.parent / "matrix.lock.json").read_text())["builds"]
    assert {k: b["url"] for k, b in after.items()} == {k: b["url"] for k, b in before.items()}
    assert after["stable-2.15.0-cu130-cp312"]["index"] == "http://127.0.0.1:9/whl/cu130/"
    assert "nightly-20261003-cu130-cp312" in capsys.readouterr().out


def test_plan_shows_which_cells_have_a_stored_result(served, capsys):
    _, matrix = served
    store = matrix.parent / "results.sqlite"
    with Store(store) as opened:
        opened.add(
            make_run(make_cell("preinstalled", channel=Channel.PREINSTALLED, url=None, sha256=None))
        )
    assert plan_cli(matrix, "--store", str(store)) == Exit.OK
    rows = {line.split()[0]: line.split()[-1] for line in capsys.readouterr().out.splitlines()}
    assert rows["preinstalled"] == "yes" and rows["stable-2.15.0-cu130-cp312"] == "no"


def test_plan_with_an_unreachable_index_is_one_line_exit_4(served, capsys, monkeypatch):
    monkeypatch.setattr(retry, "_sleep", lambda s: None)
    url, matrix = served
    matrix.write_text(
        matrix.read_text().replace(
            "dates: [2026-10-01, 2026-10-02, 2026-10-03]", "dates: [2026-10-01]\n  cuda: cu999"
        )
    )
    assert plan_cli(matrix) == Exit.MISTAKE  # an explicit tag without an index: a resolve error
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "/whl/nightly/cu999/torch/" in err and "HTTP 404" in err
    matrix.write_text(matrix.read_text().replace(url, "http://127.0.0.1:9"))  # nothing listens
    assert plan_cli(matrix) == Exit.INDEX_UNREACHABLE
    err = capsys.readouterr().err
    # A refused connection will not heal: one attempt, one line, no retry notes (issue 22 item 7).
    assert err.count("\n") == 1 and "refused the connection" in err and "at a mirror" in err


def test_plan_with_a_broken_lock_is_one_line_exit_2(served, capsys):
    _, matrix = served
    (matrix.parent / "matrix.lock.json").write_text("{")
    assert plan_cli(matrix) == Exit.MISTAKE
    assert capsys.readouterr().err.count("\n") == 1


def test_a_previous_runs_lock_keeps_a_pruned_nightly_installable(served, tmp_path, capsys):
    """The scheduled job months later: the index no longer lists a nightly the old lock pinned."""
    url, matrix = served
    assert plan_cli(matrix) == Exit.OK
    kept = tmp_path / "previous.lock.json"
    (matrix.parent / "matrix.lock.json").rename(kept)
    matrix.write_text(matrix.read_text().replace(url, "http://127.0.0.1:9"))  # index gone
    assert plan_cli(matrix, "--offline") == Exit.MISTAKE  # no lock, no index: cannot resolve
    assert plan_cli(matrix, "--offline", "--previous-lock", str(kept)) == Exit.OK
    builds = json.loads((matrix.parent / "matrix.lock.json").read_text())["builds"]
    assert builds["nightly-20261001-cu130-cp312"]["url"].startswith(url)


def test_plan_lists_shards_for_a_github_job_matrix(served, tmp_path):
    _, matrix = served
    out = tmp_path / "github_output"
    out.write_text("earlier=1\n")
    assert plan_cli(matrix, "--shards", "3", "--github-output", str(out)) == Exit.OK
    assert out.read_text().splitlines() == ["earlier=1", 'shards=["1/3", "2/3", "3/3"]', "cells=5"]
