"""`torchbisect notify` against a local stand-in of GitHub's REST API that records each request:
the status issue is opened once, updated (body and a comment) only when a verdict or the fix
status changed, and the weekly check's summary says "no fix yet" in so many words."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from act.github_standin import github_standin
from helpers import make_cell, make_run
from helpers.cli import invoke, one_sentence

from torchbisect.exits import Exit
from torchbisect.model import Attendance, Channel, RunStatus
from torchbisect.outcome import BisectResult, Direction, NightlyPoint
from torchbisect.report.notify import changes, fix_status
from torchbisect.store.db import Store

SUMMARY = "## torchbisect\n\n| build | verdict |\n|---|---|\n| 2.15.0 | affected |\n"


def nightly(day: str, verdict: str, status: RunStatus = RunStatus.OK):
    cell = make_cell(
        f"nightly-{day.replace('-', '')}-cu130-cp312",
        channel=Channel.NIGHTLY,
        date=day,
        version=f"2.16.0.dev{day.replace('-', '')}+cu130",
    )
    return make_run(cell, verdict=verdict, status=status)


def store_of(path: Path, *runs, bisections=()) -> Path:
    with Store(path) as store:
        store.add_many(runs)
        for b in bisections:
            store.add_bisection(b)
    return path


@pytest.fixture
def hub(tmp_path):
    with github_standin(tmp_path / "git", tmp_path / "pages") as server:
        yield server


def notify(hub, tmp_path, *args, token="t0ken"):
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    env.update(GITHUB_API_URL=f"{hub.url}/api", GITHUB_REPOSITORY="owner/repo")
    if token:
        env["GITHUB_TOKEN"] = token
    (tmp_path / "summary.md").write_text(SUMMARY)
    return invoke("notify", *args, cwd=tmp_path, env=env)


def writes(hub):
    return [r for r in hub.requests if r.method != "GET"]


def test_a_build_whose_verdict_changes_updates_the_one_issue_and_nothing_else_writes(hub, tmp_path):
    first = store_of(tmp_path / "a.sqlite", nightly("2026-11-29", "affected"))
    done = notify(hub, tmp_path, "--store", str(first), "--summary", "summary.md")
    assert done.returncode == Exit.OK, done.stderr
    assert "status issue #1: opened" in done.stdout
    [opened] = writes(hub)
    assert opened.method == "POST" and opened.path == "/api/repos/owner/repo/issues"
    assert opened.token and opened.body["labels"] == ["torchbisect"]
    assert SUMMARY.strip() in opened.body["body"]

    again = notify(hub, tmp_path, "--store", str(first), "--summary", "summary.md")
    assert "status issue #1: unchanged" in again.stdout
    assert len(writes(hub)) == 1  # nothing changed: no write at all

    fixed = store_of(
        tmp_path / "b.sqlite",
        nightly("2026-11-29", "affected"),
        nightly("2026-11-30", "not_affected"),
    )
    third = notify(hub, tmp_path, "--store", str(fixed), "--summary", "summary.md")
    assert "status issue #1: updated" in third.stdout
    patch, comment = writes(hub)[1:]
    assert (patch.method, patch.path) == ("PATCH", "/api/repos/owner/repo/issues/1")
    assert comment.path == "/api/repos/owner/repo/issues/1/comments"
    assert (
        "`nightly-20261130-cu130-cp312` on NVIDIA H200: not affected (the build before it, "
        "`nightly-20261129-cu130-cp312`, was affected)" in comment.body["body"]
    )
    assert len(hub.issues) == 1


def test_weekly_check_without_a_fix_says_so_in_its_summary_and_the_issue(hub, tmp_path):
    store_of(tmp_path / "matrix.sqlite", nightly("2026-11-29", "affected"))
    notify(hub, tmp_path, "--store", "matrix.sqlite", "--summary", "summary.md")
    fix_store = store_of(
        tmp_path / "fix.sqlite",
        nightly("2026-10-03", "affected"),
        nightly("2026-11-30", "affected"),
    )
    out = tmp_path / "step-summary.md"
    done = notify(hub, tmp_path, "--fix", "--store", str(fix_store), "--summary-out", str(out))
    assert done.returncode == Exit.OK, done.stderr
    said = "no fix yet: newest nightly 2026-11-30 (2.16.0.dev20261130+cu130) still affected"
    assert said in out.read_text()
    body = hub.issues[1]["body"]
    assert said in body and SUMMARY.strip() in body  # the matrix's section is kept
    assert f"fix status: {said}" in hub.comments[-1][1]


def test_a_fix_search_that_could_not_tell_fails_and_writes_nothing(hub, tmp_path):
    broken = store_of(
        tmp_path / "fix.sqlite", nightly("2026-11-30", "affected", status=RunStatus.INFRA_FAILURE)
    )
    out = tmp_path / "step-summary.md"
    done = notify(hub, tmp_path, "--fix", "--store", str(broken), "--summary-out", str(out))
    assert done.returncode == Exit.NO_VERDICT
    assert "could not tell" in out.read_text() and "Traceback" not in done.stderr
    assert writes(hub) == []


def test_an_unreachable_api_is_one_sentence_and_exit_3(tmp_path):
    store_of(tmp_path / "a.sqlite", nightly("2026-11-29", "affected"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    env.update(GITHUB_API_URL="http://127.0.0.1:9/api", GITHUB_REPOSITORY="o/r", GITHUB_TOKEN="x")
    (tmp_path / "s.md").write_text(SUMMARY)
    done = invoke("notify", "--store", "a.sqlite", "--summary", "s.md", cwd=tmp_path, env=env)
    line = one_sentence(done.stderr, done.returncode, Exit.NO_VERDICT, command="notify")
    assert line.startswith("torchbisect notify: error: cannot reach the GitHub API")


def test_fix_status_prefers_a_found_fix():
    point = NightlyPoint(date="2026-11-20", version="2.16.0.dev20261120+cu130", verdict="good")
    result = BisectResult(
        direction=Direction.FIX,
        case="capture_data_ptr",
        cuda="cu130",
        python="3.12",
        before=None,
        after=point,
        probes=5,
    )
    status = fix_status([nightly("2026-11-30", "not_affected")], [result])
    assert status.key == "fixed:2026-11-20" and "2.16.0.dev20261120" in status.text


def test_changes_compare_a_new_build_with_its_predecessor_in_the_same_lane():
    old = {"stable-2.9.0-cu128-cp312": "affected", "stable-2.15.0-cu132-cp312": "affected"}
    h200 = "NVIDIA H200"
    assert changes({h200: old}, {h200: {**old, "stable-2.16.0-cu132-cp312": "affected"}}) == []
    moved = changes({h200: old}, {h200: {**old, "stable-2.16.0-cu132-cp312": "refused"}})
    assert moved == [
        "`stable-2.16.0-cu132-cp312` on NVIDIA H200: refused (the build before it, "
        "`stable-2.15.0-cu132-cp312`, was affected)"
    ]
    assert changes({h200: old}, {h200: {**old, "stable-2.9.0-cu128-cp312": "not_affected"}}) == [
        "`stable-2.9.0-cu128-cp312` on NVIDIA H200: affected → not affected"
    ]


def test_a_nightly_of_a_version_bump_date_is_compared_with_the_nightly_before_it():
    old = {"nightly-20261015-cu130-cp312": "affected"}
    new = {**old, "nightly-20261016-2.18.0-cu130-cp312": "refused"}
    assert changes({"G": old}, {"G": new}) == [
        "`nightly-20261016-2.18.0-cu130-cp312` on G: refused (the build "
        "before it, `nightly-20261015-cu130-cp312`, was affected)"
    ]


STABLE = "stable-2.15.0-cu130-cp312"


def stable(verdict: str, gpu: str):
    cell = make_cell(STABLE, channel=Channel.STABLE, version="2.15.0+cu130")
    return make_run(cell, verdict=verdict, gpu=gpu)


def test_the_same_build_on_two_models_is_two_verdicts_and_a_change_names_its_model(hub, tmp_path):
    first = store_of(
        tmp_path / "a.sqlite",
        stable("not_affected", "NVIDIA H200"),
        stable("not_affected", "NVIDIA GB300"),
    )
    done = notify(hub, tmp_path, "--store", str(first), "--summary", "summary.md")
    assert done.returncode == Exit.OK, done.stderr
    assert (
        "2 builds with a verdict on 2 GPU models: NVIDIA GB300 (1), NVIDIA H200 (1)" in done.stdout
    )
    # H200 turns affected; GB300, which sorts first and used to win the one key, stays
    later = store_of(
        tmp_path / "b.sqlite",
        stable("affected", "NVIDIA H200"),
        stable("not_affected", "NVIDIA GB300"),
    )
    done = notify(hub, tmp_path, "--store", str(later), "--summary", "summary.md")
    assert "status issue #1: updated" in done.stdout
    said = hub.comments[-1][1]
    assert f"- `{STABLE}` on NVIDIA H200: not affected → affected" in said
    assert "GB300: not affected →" not in said
    assert (
        f"- `{STABLE}`: the verdict differs between GPU models: affected on NVIDIA H200; "
        "not affected on NVIDIA GB300"
    ) in said
    again = notify(hub, tmp_path, "--store", str(later), "--summary", "summary.md")
    assert "status issue #1: unchanged" in again.stdout  # the difference is said once


def test_a_model_measured_for_the_first_time_is_news(hub, tmp_path):
    notify(
        hub,
        tmp_path,
        "--store",
        str(store_of(tmp_path / "a.sqlite", stable("affected", "NVIDIA H200"))),
        "--summary",
        "summary.md",
    )
    both = store_of(
        tmp_path / "b.sqlite", stable("affected", "NVIDIA H200"), stable("affected", "NVIDIA GB300")
    )
    done = notify(hub, tmp_path, "--store", str(both), "--summary", "summary.md")
    assert (
        "- NVIDIA GB300: measured for the first time, 1 build with a verdict (1 affected)"
        in done.stdout
    )
    assert "differs" not in done.stdout  # they agree


def old_issue(hub, verdicts: dict[str, str]) -> None:
    """An issue as a torchbisect that kept no GPU models left it."""
    state = json.dumps({"fix": "no-fix:2026-11-30", "verdicts": verdicts}, sort_keys=True)
    hub.issues[7] = {
        "number": 7,
        "title": "torchbisect",
        "labels": [{"name": "torchbisect"}],
        "state": "open",
        "body": f"{SUMMARY}\n\n<!-- torchbisect-state: {state} -->\n",
    }


def test_an_older_state_without_models_is_that_models_when_one_is_measured(hub, tmp_path):
    old_issue(hub, {STABLE: "not_affected"})
    one = store_of(tmp_path / "a.sqlite", stable("not_affected", "NVIDIA H200"))
    done = notify(hub, tmp_path, "--store", str(one), "--summary", "summary.md")
    assert done.returncode == Exit.OK, done.stderr
    assert (
        "note: the state in issue #7 was written by a torchbisect that kept no GPU models "
        "(1 build); it is read as NVIDIA H200's"
    ) in done.stdout
    assert "status issue #7: updated" in done.stdout and hub.comments == []  # no news, no comment
    state = _state(hub.issues[7]["body"])
    assert state == {
        "fix": "no-fix:2026-11-30",
        "probe": "stale_replay",
        "models": {"NVIDIA H200": {STABLE: "not_affected"}},
    }
    again = notify(hub, tmp_path, "--store", str(one), "--summary", "summary.md")
    assert "status issue #7: unchanged" in again.stdout and "note:" not in again.stdout


def test_an_older_state_without_models_is_each_models_baseline_when_several_are(hub, tmp_path):
    old_issue(hub, {STABLE: "not_affected"})
    both = store_of(
        tmp_path / "a.sqlite",
        stable("not_affected", "NVIDIA H200"),
        stable("affected", "NVIDIA GB300"),
    )
    done = notify(hub, tmp_path, "--store", str(both), "--summary", "summary.md")
    assert "each of the 2 GPU models measured now is compared with it" in done.stdout
    said = hub.comments[-1][1]
    assert (
        f"- `{STABLE}` on NVIDIA GB300: not affected → affected (the earlier state named no "
        "GPU model)"
    ) in said
    assert "on NVIDIA H200: not affected →" not in said
    assert set(_state(hub.issues[7]["body"])["models"]) == {"NVIDIA H200", "NVIDIA GB300"}


def test_a_model_name_recorded_by_a_probe_cannot_become_a_link_or_a_mention():
    said = changes(
        {"NVIDIA H200": {STABLE: "affected"}},
        {
            "NVIDIA H200": {STABLE: "affected"},
            "@team see https://evil.example/x <img src=x>": {STABLE: "not_affected"},
        },
    )
    [first, differs] = said
    assert "`@team see https://evil.example/x <img src=x>`: measured for the first time" in first
    assert "on `@team see https://evil.example/x <img src=x>`" in differs


def _state(body: str) -> dict:
    return json.loads(re.search(r"<!-- torchbisect-state: (\{.*?\}) -->", body).group(1))


RUNNERS = """\
kinds:
  - name: H200
    gpu: NVIDIA H200
    labels: [self-hosted, h200]
    platform: linux_x86_64
  - name: GB300
    gpu: NVIDIA GB300
    labels: [self-hosted, gb300]
    platform: linux_aarch64
"""


def came(kind: str, run_id: str, day: str) -> Attendance:
    return Attendance(
        kind=kind,
        shard="1/1",
        run=run_id,
        gpu="",
        host="r",
        cells=1,
        probed=1,
        reused=0,
        failed=0,
        started=f"{day}T06:00:00+00:00",
        finished=f"{day}T07:00:00+00:00",
    )


@pytest.mark.slow  # over 2 s on a 2-core machine: out of the fast loop
def test_a_runner_kind_that_stops_reporting_is_news_and_said_once(hub, tmp_path):
    (tmp_path / "runners.yaml").write_text(RUNNERS)
    path = store_of(tmp_path / "a.sqlite", stable("affected", "NVIDIA H200"))
    with Store(path) as store:
        store.add_attendance(came("H200", "100-1", "2026-11-30"))
    args = ("--store", str(path), "--summary", "summary.md", "--runners", "runners.yaml")
    first = notify(hub, tmp_path, *args)
    assert first.returncode == Exit.OK, first.stderr
    assert "status issue #1: opened" in first.stdout
    # the first time kinds are followed, only the kind that is not there is news
    assert "runner kind GB300: declared, never reported" in first.stdout
    assert "runner kind H200" not in first.stdout
    with Store(path) as store:  # the next run: GB300's runners report, H200's are offline
        store.add_attendance(came("GB300", "101-1", "2026-12-01"))
    second = notify(hub, tmp_path, *args)
    assert "status issue #1: updated" in second.stdout
    said = hub.comments[-1][1]
    assert (
        "- runner kind H200: did not report in the latest run (run 101-1, 2026-12-01); "
        "last reported 2026-11-30 (run 100-1)"
    ) in said
    assert "- runner kind GB300: reported in the latest run (run 101-1, 2026-12-01)" in said
    assert "→" not in said  # no verdict moved
    third = notify(hub, tmp_path, *args)
    assert "status issue #1: unchanged" in third.stdout and len(hub.comments) == 1


def test_runners_with_the_fix_check_is_one_sentence(hub, tmp_path):
    (tmp_path / "runners.yaml").write_text(RUNNERS)
    store_of(tmp_path / "fix.sqlite", nightly("2026-11-30", "affected"))
    done = notify(hub, tmp_path, "--fix", "--store", "fix.sqlite", "--runners", "runners.yaml")
    assert done.returncode == Exit.MISTAKE
    assert "--runners is for the matrix's notification" in done.stderr
    assert writes(hub) == []


def test_only_affected_against_not_affected_is_a_difference_between_models():
    old = {"NVIDIA H200": {STABLE: "affected"}}
    assert changes(old, {**old, "no GPU": {STABLE: "skipped"}})[1:] == []
    assert changes(old, {**old, "NVIDIA GB300": {STABLE: "refused"}})[1:] == [
        f"`{STABLE}`: the verdict differs between GPU models: affected on NVIDIA H200; "
        "refused on NVIDIA GB300"
    ]


def test_a_store_without_attendance_tells_nothing_about_kinds():
    from torchbisect.report.notify import kind_changes

    unknown = {"H200": ("unknown", "declared; the store holds no attendance …")}
    assert kind_changes(None, unknown) == [] and kind_changes({"H200": "absent"}, unknown) == []
    reported = {"H200": ("reported", "reported in the latest run …")}
    assert kind_changes({"H200": "unknown"}, reported) == []  # the first attendance: no news
    assert kind_changes({"H200": "absent"}, reported) == [
        "runner kind H200: reported in the latest run …"
    ]


def test_the_issue_body_names_the_models_their_difference_and_the_kinds(hub, tmp_path):
    (tmp_path / "runners.yaml").write_text(RUNNERS)
    path = store_of(
        tmp_path / "a.sqlite",
        stable("affected", "NVIDIA H200"),
        stable("not_affected", "NVIDIA GB300"),
    )
    with Store(path) as store:
        store.add_attendance(came("H200", "100-1", "2026-11-30"))
    drawn = invoke(
        "report", "--store", str(path), "--out", "site", "--runners", "runners.yaml", cwd=tmp_path
    )
    assert drawn.returncode == Exit.OK, drawn.stderr
    done = notify(
        hub,
        tmp_path,
        "--store",
        str(path),
        "--summary",
        "site/summary.md",
        "--runners",
        "runners.yaml",
    )
    assert done.returncode == Exit.OK, done.stderr
    body = hub.issues[1]["body"]
    assert "2 GPU models measured (NVIDIA GB300, NVIDIA H200)" in body
    assert (
        "**The verdict differs between GPU models:**\n\n- 2.15.0: not affected on NVIDIA "
        "GB300; affected on NVIDIA H200"
    ) in body
    assert "**Not every runner kind reported in the latest run: GB300**" in body
    # GB300 has results but no attendance: it did not report, yet its runners did run once
    assert (
        "- **GB300** (NVIDIA GB300 · linux_aarch64): did not report in the latest run (run "
        "100-1, 2026-11-30); its results in the store come from runs that kept no attendance"
    ) in body


def test_each_regression_has_its_own_issue_titled_by_its_probe(hub, tmp_path):
    """A store of two probes: two issues, each titled by its probe's title and holding its own
    summary.md (from the folder `report` drew); a change in one regression updates its issue
    alone."""

    def release(version: str, probe: str, verdict: str):
        public, cuda = version.split("+")
        cell = make_cell(
            f"stable-{public}-{cuda}-cp312", channel=Channel.STABLE, version=version, probe=probe
        )
        return make_run(cell, verdict=verdict)

    lazy = release("2.15.0+cu132", "stale_replay", "affected")
    cumsum = release("2.5.1+cu124", "cumsum_64bit", "affected")
    for probe in ("stale_replay", "cumsum_64bit"):
        (tmp_path / "site" / probe).mkdir(parents=True)
        (tmp_path / "site" / probe / "summary.md").write_text(f"## the page of {probe}\n")
    first = store_of(tmp_path / "a.sqlite", lazy, cumsum)
    done = notify(hub, tmp_path, "--store", str(first), "--summary", "site")
    assert done.returncode == Exit.OK, done.stderr
    opened = {w.body["title"]: w.body["body"] for w in writes(hub)}
    assert set(opened) == {
        "torchbisect: torch._lazy_clone copies can hand stale data to kernels under CUDA Graph "
        "replay and race with side streams",
        "torchbisect: torch.cumsum over the last dimension is silently wrong past 2**32 elements "
        "on CUDA",
    }
    assert all(w.body["labels"] == ["torchbisect"] for w in writes(hub))
    for title, body in opened.items():
        probe = "cumsum_64bit" if "cumsum" in title else "stale_replay"
        assert f"## the page of {probe}" in body and f'"probe": "{probe}"' in body
    numbers = {i["body"].split('"probe": "')[1].split('"')[0]: n for n, i in hub.issues.items()}

    fixed = store_of(
        tmp_path / "b.sqlite", lazy, cumsum, release("2.6.0+cu124", "cumsum_64bit", "not_affected")
    )
    again = notify(hub, tmp_path, "--store", str(fixed), "--summary", "site")
    assert again.returncode == Exit.OK, again.stderr
    patched = [w.path for w in writes(hub)[2:] if w.method == "PATCH"]
    assert patched == [f"/api/repos/owner/repo/issues/{numbers['cumsum_64bit']}"]
    assert f"status issue #{numbers['stale_replay']}: unchanged" in again.stdout

    one_file = notify(hub, tmp_path, "--store", str(fixed), "--summary", "summary.md")
    assert one_file.returncode == Exit.MISTAKE
    assert "the store holds 2 regressions (cumsum_64bit, stale_replay)" in one_file.stderr
