"""`plan --runners … --online-runners SCOPE`: a kind none of whose self-hosted runners is online is
not queued (its jobs would hold the scheduled run for a day or more), and a check that cannot be
made leaves every kind queued.  GitHub's runner listing is served from 127.0.0.1 in its own shape
(`{"total_count", "runners": [{"name", "status", "busy", "labels": [{"name", "type"}]}]}`), page by
page, by tests/helpers/loopback.py's Peer, which records every request."""

from __future__ import annotations

import json
import os
import subprocess
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from helpers.cli import invoke
from helpers.loopback import Answer, Peer, Seen

from torchbisect.exits import Exit

TOKEN = "runners-list-token-0123456789"


def _runner(name: str, status: str, *labels: str) -> dict:
    return {
        "id": abs(hash(name)) % 10**6,
        "name": name,
        "os": "Linux",
        "status": status,
        "busy": False,
        "labels": [{"id": i, "name": label, "type": "custom"} for i, label in enumerate(labels)],
    }


@contextmanager
def api(runners: list[dict], *, status: int = 200):
    """GitHub's runner listing of repos/o/r, page by page; any other path, or `status`, fails."""

    def answer(seen: Seen) -> Answer:
        url = urlsplit(seen.target)
        query = parse_qs(url.query)
        per, page = int(query["per_page"][0]), int(query["page"][0])
        if url.path != "/repos/o/r/actions/runners" or status != 200:
            code, doc = (status if status != 200 else 404), {"message": "Not Found"}
        else:
            code, doc = (
                200,
                {"total_count": len(runners), "runners": runners[(page - 1) * per : page * per]},
            )
        return code, {"Content-Type": "application/json"}, json.dumps(doc).encode()

    with Peer(answer) as peer:
        yield peer.url, peer.seen  # every request, as it comes


def _plan(
    world: Path, url: str, *, token: str | None = TOKEN
) -> tuple[subprocess.CompletedProcess, list[dict]]:
    env = {k: v for k, v in os.environ.items() if k != "RUNNERS_TOKEN"}
    env.update({"GITHUB_API_URL": url, **({"RUNNERS_TOKEN": token} if token else {})})
    done = invoke(
        "plan",
        "--store",
        "none.sqlite",
        "--runners",
        "runners.yaml",
        "--lock-dir",
        "locks",
        "--online-runners",
        "repos/o/r",
        "--github-output",
        "out",
        cwd=world,
        env=env,
    )
    out = (world / "out").read_text() if (world / "out").exists() else ""
    probes = [
        json.loads(line.removeprefix("probes="))
        for line in out.splitlines()
        if line.startswith("probes=")
    ]
    return done, probes[0] if probes else []


def test_a_kind_with_no_runner_online_is_planned_and_locked_but_not_queued(kinds_world):
    runners = [
        _runner("h200-a", "online", "self-hosted", "Linux", "X64", "h200"),  # any case
        _runner("h200-b", "offline", "self-hosted", "linux", "x64", "h200"),
        _runner("gb300-a", "offline", "self-hosted", "linux", "ARM64", "gb300"),
        # online, but not carrying every GB300 label: it would not take GB300's jobs
        _runner("arm-spare", "online", "self-hosted", "linux", "ARM64"),
    ]
    with api(runners) as (url, asked):
        done, probes = _plan(kinds_world, url)
    assert done.returncode == Exit.OK, done.stdout + done.stderr
    assert {p["kind"] for p in probes} == {"H200"}
    assert (kinds_world / "locks" / "GB300.lock.json").is_file()  # planned and locked all the same
    said = done.stdout
    assert "online runners: H200: 1 of 2 runners with its labels online" in said
    assert (
        "online runners: GB300: no runner online with the labels ['self-hosted', 'linux', "
        "'ARM64', 'gb300'] (1 registered with them, 2 runners online in repos/o/r): not "
        "queued this run, so the page says it did not report"
    ) in said
    assert "GB300: 3 shards not queued: no runner online" in said
    assert asked and all(seen.headers.get("Authorization") == f"Bearer {TOKEN}" for seen in asked)


def test_runners_are_read_page_by_page(kinds_world):
    spare = [_runner(f"x86-{i}", "online", "self-hosted", "linux", "x64") for i in range(150)]
    gb300 = [_runner("gb300-a", "online", "self-hosted", "linux", "ARM64", "gb300")]
    h200 = [_runner("h200-a", "online", "self-hosted", "linux", "x64", "h200")]
    with api(spare + gb300 + h200) as (url, asked):
        done, probes = _plan(kinds_world, url)
    assert done.returncode == Exit.OK, done.stdout + done.stderr
    assert {p["kind"] for p in probes} == {"H200", "GB300"}
    assert [urlsplit(seen.target).query for seen in asked] == [
        "per_page=100&page=1",
        "per_page=100&page=2",
    ]


@pytest.mark.parametrize(
    "token, status, why",
    [
        (None, 200, "online runners: not checked: no $RUNNERS_TOKEN"),
        (
            TOKEN,
            403,
            "online runners: not checked (GitHub answered HTTP 403 Forbidden to GET "
            "/repos/o/r/actions/runners",
        ),
    ],
)
def test_a_check_that_cannot_be_made_queues_every_kind(kinds_world, token, status, why):
    """Never drop a kind that might be online: no token, or a token that may not list runners."""
    with api([], status=status) as (url, asked):
        done, probes = _plan(kinds_world, url, token=token)
    assert done.returncode == Exit.OK, done.stdout + done.stderr
    assert {p["kind"] for p in probes} == {"H200", "GB300"}
    assert why in done.stdout
    assert "not queued" not in done.stdout
    if token is None:
        assert asked == []  # nothing is asked without a token


def test_online_runners_needs_the_runner_kinds(tmp_path):
    (tmp_path / "m.yaml").write_text("preinstalled: true\n")
    done = invoke("plan", "--matrix", "m.yaml", "--online-runners", "repos/o/r", cwd=tmp_path)
    assert done.returncode == Exit.MISTAKE
    assert "--online-runners is for runner kinds: add --runners runners.yaml" in done.stderr
