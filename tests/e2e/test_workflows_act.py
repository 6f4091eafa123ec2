"""The scheduled pipeline, run by an Actions engine: act executes matrix.yml and bisect.yml.

GPU jobs run in a container that looks like a stock self-hosted runner (non-root, Debian's python3
marked externally managed, no nox or uv); hosted jobs run on the host.  actions/checkout and
actions/upload-pages-artifact are the real tagged trees; artifact storage, Pages and the REST API
are stand-ins on 127.0.0.1 (tests/act/).  Torch builds are tiny stand-in nightlies on a local
index and the probe is a stand-in (TORCHBISECT_PROBES): the point here is the pipeline.

Not offline: setup-tools installs the pinned nox and uv from PyPI, as on a real runner; the
index, the site, the API and git are served on 127.0.0.1.

Two runner kinds (runners.yaml): H200, an x86_64 kind with 2 shards, and GB300, an aarch64 kind.
Each kind's plan locks its own platform's stand-in wheels (the index carries both), and each
kind's shards run on its own label set.  This machine has no aarch64 emulation (no binfmt_misc),
so an aarch64 shard could not install its wheels here: GB300's labels are mapped to the same
x86_64 image, `matrix --kind GB300` refuses that runner with its sentence (exit 3, nothing
probed), its job fails, and the build still merges H200's shards into one store and publishes a
page whose results.json and index.html say GB300 never reported.  So this shows the per-kind
plans and locks, the per-kind fan-out, the merge, and how a kind whose runners fail or are
offline is said; it does NOT show an aarch64 wheel installed or probed, nor two kinds' verdicts
side by side (both would need aarch64 hardware or emulation), nor GitHub's 24-hour queue of a
kind with no runner online (act runs every job at once).

The rehearsal, in order: (1) a scheduled matrix run (H200's 2 shards, GB300's refused one) where
one cell never installs still publishes a merged page; (2) a re-run of that run (attempt 2, its
failed shard again, the artifacts of attempt 1 still there) starts from the published store,
re-probes nothing unchanged, overwrites its uploads, and publishes although the API answers 502
at first (notify retries); (3) a dispatched bisection during whose run another run deploys (after
its build fetched the store) stops at its deploy's site check, publishes nothing over the other
run's store, and its re-run (4) publishes both: the bisection appears on the page and in
affected.json; (5) the weekly fix check with no fix says so in its summary and in the issue; (6)
a dispatch with another matrix file and runners file (one kind, more shards than cells) runs one
shard from the lock; (7) a scheduled run whose site answers 503 for the previous store fails and
publishes nothing; (8) a shard whose `matrix` is killed with SIGKILL after it stored a run still
uploads that run (the probe job's copy step) and the page has it.  Afterwards, whatever the
outcome, no container, network or volume of act's is left on the engine.
"""

from __future__ import annotations

import fcntl
import json
import re
import sqlite3
import subprocess
import tempfile
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import pytest
from act.github_standin import github_standin
from act.rehearsal import (
    BASE_IMAGE,
    OWNER_REPO,
    RUNNER_IMAGE,
    World,
    build_runner_image,
    docker_names,
    forget_tool_cache,
    left_behind,
    missing_action_trees,
    missing_prerequisite,
    remove_left_behind,
    snapshot,
    unpack_actions,
)
from act.wheels import nightly_index, nightly_version
from helpers import IN_CI
from helpers.indexserver import serve
from helpers.pytorch_clone import make_pytorch_clone

pytestmark = [pytest.mark.docker, pytest.mark.slow]
# what the rehearsal waits for while .ci/run's docker-setup goes on (tests/conftest.py): the
# runner image is built on the base image; the torch image is not used here
DOCKER_IMAGES = (BASE_IMAGE,)

TODAY = datetime.now(timezone.utc).date()
# Every third day for 90 days, and yesterday.  From FIRST_STALE on, builds are affected, so the
# weekly check (58 days ago .. today) finds no fix, and a bisection of 90..60 days ago finds it.
DAYS = [TODAY - timedelta(days=d) for d in range(90, -1, -3)] + [TODAY - timedelta(days=1)]
FIRST_STALE = TODAY - timedelta(days=72)
BROKEN = TODAY - timedelta(days=1)  # on the index, but its wheel is damaged: never installs
MATRIX_DAYS = [TODAY - timedelta(days=81), TODAY - timedelta(days=15), BROKEN]


def _cell(day: date) -> str:
    return f"nightly-{day:%Y%m%d}-cu130-cp311"


# H200 stands for every x86_64 kind, GB300 for every aarch64 one (GitHub's label is ARM64).
RUNNERS = """\
kinds:
  - name: H200
    gpu: NVIDIA H200
    labels: [self-hosted, linux, x64, h200]
    platform: linux_x86_64
    driver: "580.95.05"
    shards: 2
  - name: GB300
    gpu: NVIDIA GB300
    labels: [self-hosted, linux, ARM64, gb300]
    platform: linux_aarch64
    driver: "580.95.05"
"""
ONE_KIND = RUNNERS.split("  - name: GB300")[0]


def _matrix_yaml(index_url: str, days: list[date] = MATRIX_DAYS, extra: str = "") -> str:
    dates = ", ".join(f"{d:%Y-%m-%d}" for d in days)
    return (
        f'defaults:\n  cuda: cu130\n  python: "3.11"\n'
        f"  cases: [capture_data_ptr, control_clone]\n  timeout: 300\n{extra}"
        f'indexes:\n  nightly: "{index_url}{{cuda}}/"\n'
        f"nightly:\n  dates: [{dates}]\n"
    )


@pytest.fixture(scope="module")
def rehearsal(tmp_path_factory):
    if missing_action_trees():
        pytest.skip(f"act rehearsal: {missing_action_trees()}")
    why = missing_prerequisite()
    if why:
        (pytest.fail if IN_CI else pytest.skip)(f"act rehearsal: {why}")
    # act names containers after the workflow and job alone: two rehearsals on one engine at
    # once would share them.  Concurrent test runs take turns.
    lock = (Path(tempfile.gettempdir()) / "torchbisect-act.lock").open("w")
    fcntl.flock(lock, fcntl.LOCK_EX)
    forget_tool_cache()  # a new runner's: what a killed rehearsal left is not this one's
    before = docker_names()
    try:
        yield from _rehearse(tmp_path_factory, before)
    finally:
        remove_left_behind(before)
        lock.close()


def _rehearse(tmp_path_factory, before):
    build_runner_image()
    base = tmp_path_factory.mktemp("act")
    base.chmod(0o755)
    shas = make_pytorch_clone(
        base / "pytorch", [f"{d:%Y-%m-%d}" for d in sorted(DAYS)], commits_per_day=1
    )
    nightly_index(
        base / "index",
        sorted(DAYS),
        first_stale=FIRST_STALE,
        git_versions={d: shas[f"{d:%Y-%m-%d}"][0] for d in DAYS},
    )
    (
        base / "index" / "cu130" / f"torch-{nightly_version(BROKEN)}-cp311-cp311-"
        "manylinux_2_28_x86_64.whl"
    ).write_bytes(b"not a zip file")
    (base / "pages").mkdir()
    (base / "git").mkdir()
    (base / "src").mkdir()
    with serve(base / "index") as index_url, github_standin(base / "git", base / "pages") as hub:
        snapshot(
            base / "src",
            base / "git",
            {
                "matrix.yaml": _matrix_yaml(f"{index_url}/"),
                "runners.yaml": RUNNERS,
                "ci/one-cell.yaml": _matrix_yaml(f"{index_url}/", MATRIX_DAYS[1:2]),
                "ci/one-kind.yaml": ONE_KIND.replace("shards: 2", "shards: 3"),
                # (9): the stand-in probe SIGKILLs the shard's `matrix` at its second cell
                "ci/killed.yaml": _matrix_yaml(
                    f"{index_url}/",
                    MATRIX_DAYS[:2],
                    "  env: {TB_FAKE_KILL_RUN: /tmp/torchbisect-killed}\n",
                ),
                "ci/one-shard.yaml": ONE_KIND.replace("shards: 2", "shards: 1"),
            },
        )
        world = World(
            base=base,
            src=base / "src",
            hub_url=hub.url,
            pages=base / "pages",
            trees=unpack_actions(base / "actions"),
            mounts=[base / "pytorch"],
            variables={
                "PAGES_URL": f"{hub.url}/pages/",
                "PAGES_FIRST_RUN": "true",  # the first run meets a site never deployed (404)
                "MATRIX_EXTRA_FLAGS": "--allow-no-gpu --backend venv",
                "BISECT_EXTRA_FLAGS": f"--index-url {index_url}/cu130/ --backend venv "
                "--allow-no-gpu "
                f"--no-github --repo {base / 'pytorch'}",
            },
        )
        results = {"schedule-1": world.act("schedule", "matrix.yml")}
        results["pages-1"] = _published(base)
        results["issues-1"] = [dict(i) for i in hub.issues.values()]
        # attempt 2 of run 1 (its failed shard again), while the API answers 502 twice
        hub.fail(f"/api/repos/{OWNER_REPO}/issues", 502, times=2)
        results["schedule-2"] = world.act("schedule", "matrix.yml", rerun_of=1)
        results["faulted-2"] = list(hub.faulted)
        results["pages-2"] = _published(base)
        results["writes-2"] = [r for r in hub.requests if r.method != "GET"]
        # a dispatched bisection while another run deploys (after this run's build fetched the
        # store; its first GET of the store: nothing before build fetches it in bisect.yml)
        good, bad = TODAY - timedelta(days=90), TODAY - timedelta(days=60)
        overlap = {"good": f"{good:%Y-%m-%d}", "bad": f"{bad:%Y-%m-%d}"}
        hub.faults.clear()
        hub.after_get("data/results.sqlite", 1, _another_run_deploys)
        results["overlap"] = world.act("workflow_dispatch", "bisect.yml", inputs=overlap)
        results["pages-3"] = _published(base)
        # the repair the sentence gives: run the build again (act re-runs the whole workflow)
        results["overlap-rerun"] = world.act(
            "workflow_dispatch", "bisect.yml", inputs=overlap, rerun_of=world.runs
        )
        results["pages-4"] = _published(base)
        results["weekly"] = world.act("schedule", "bisect.yml")
        results["pages-5"] = _published(base)
        results["custom"] = world.act(
            "workflow_dispatch",
            "matrix.yml",
            inputs={"matrix": "ci/one-cell.yaml", "runners": "ci/one-kind.yaml"},
        )
        results["pages-6"] = _published(base)
        hub.fail("/pages/data/", 503, times=1000)
        results["site-503"] = world.act("schedule", "matrix.yml")
        results["pages-7"] = _published(base)
        hub.faults.clear()
        # a shard killed with SIGKILL after storing its first cell's run (forced re-probes)
        results["killed"] = world.act(
            "workflow_dispatch",
            "matrix.yml",
            inputs={"matrix": "ci/killed.yaml", "runners": "ci/one-shard.yaml", "force": "true"},
        )
        results["pages-8"] = _published(base)
        results["hub"] = hub
        results["shas"] = shas
        results["before"] = before
        yield results


OTHER_RUN = "another run's deploy"  # the log excerpt of the run that run leaves in the store


def _another_run_deploys(store: Path) -> None:
    """What another run's deploy leaves on the site: the store as it was, plus a run of its own
    (a copy of the newest one, started a second later)."""
    with sqlite3.connect(store) as db:
        cols = [c[1] for c in db.execute("PRAGMA table_info(runs)") if c[1] != "id"]
        row = dict(
            zip(
                cols,
                db.execute(
                    f"SELECT {', '.join(cols)} FROM runs ORDER BY id DESC LIMIT 1"
                ).fetchone(),
                strict=True,
            )
        )
        started = datetime.fromisoformat(row["started"].replace("Z", "+00:00"))
        row["started"] = (started + timedelta(seconds=1)).isoformat().replace("+00:00", "Z")
        row["log_excerpt"] = OTHER_RUN
        db.execute(
            f"INSERT INTO runs ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
            list(row.values()),
        )
    db.close()


def _published(base) -> dict:
    site = base / "pages"
    if not (site / "results.json").is_file():
        return {}
    with sqlite3.connect(site / "data" / "results.sqlite") as db:
        runs = db.execute("SELECT cell_id, status FROM runs ORDER BY id").fetchall()
        attendance = db.execute("SELECT kind, shard, run FROM attendance ORDER BY id").fetchall()
        others = db.execute(
            "SELECT count(*) FROM runs WHERE log_excerpt = ?", (OTHER_RUN,)
        ).fetchone()[0]
        bisections = db.execute("SELECT count(*) FROM bisections").fetchone()[0]
    db.close()
    locks = {p.name: json.loads(p.read_text()) for p in (site / "data" / "locks").glob("*.json")}
    return {
        "results": json.loads((site / "results.json").read_text()),
        "locks": locks,
        "attendance": attendance,
        "affected": json.loads((site / "affected.json").read_text()),
        "html": (site / "index.html").read_text(),
        "store_runs": runs,
        "manual": (site / "docs" / "index.html").is_file(),
        "other_runs": others,
        "store_bisections": bisections,
    }


def _job_lines(log: str, job: str) -> str:
    return "\n".join(line for line in log.splitlines() if re.match(rf"\[[^/]+/{job}[^\]]*\]", line))


def test_the_stock_runner_image_refuses_a_system_pip_install():
    """The container GPU jobs run in would have failed the old `python3 -m pip install nox uv`."""
    why = missing_prerequisite()
    if why:
        (pytest.fail if IN_CI else pytest.skip)(why)
    build_runner_image()
    done = subprocess.run(
        [
            "docker",
            "run",
            "--rm",
            RUNNER_IMAGE,
            "sh",
            "-c",
            "id -u; command -v nox uv; python3 -m pip install nox uv",
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode != 0
    assert done.stdout.splitlines()[0] != "0"  # not root
    assert "externally-managed-environment" in done.stdout + done.stderr


def test_a_shard_with_a_broken_cell_still_publishes_a_merged_page(rehearsal):
    code, log = rehearsal["schedule-1"]
    assert code != 0  # the shard holding the broken cell failed (exit 3), as it should
    for name in (
        "schedule-1",
        "schedule-2",
        "overlap",
        "overlap-rerun",
        "weekly",
        "custom",
        "site-503",
    ):
        started = re.findall(r"Start server on (http://[\d.]+):", rehearsal[name][1])
        assert started and set(started) == {"http://127.0.0.1"}, name  # loopback only
    assert "uses: actions/checkout" not in log  # sanity: act ran steps, not a dry listing
    assert re.search(r"\[matrix/probe[^\]]*\].*docker exec", log), "GPU jobs ran in containers"
    assert "Success - Main actions/checkout@3d3c42e5" in _job_lines(log, "probe")
    assert "uploaded artifact store-shard-H200-1" in log
    assert "uploaded artifact store-shard-H200-2" in log
    site = rehearsal["pages-1"]
    assert site, "nothing was deployed"
    runs = {r["cell"]["id"]: r for r in site["results"]["runs"]}
    assert runs[_cell(MATRIX_DAYS[0])]["verdict"] == "not_affected"
    assert runs[_cell(MATRIX_DAYS[1])]["verdict"] == "affected"
    assert runs[_cell(BROKEN)]["status"] == "infra_failure"
    assert _cell(BROKEN) in site["html"]
    assert site["manual"], "the manual (docs/) is published beside the page"
    [issue] = rehearsal["issues-1"]  # someone is told: the status issue was opened
    assert issue["labels"] == ["torchbisect"] and "torchbisect-state" in issue["body"]


def test_a_runners_tool_cache_keeps_the_tools_for_its_next_jobs(rehearsal):
    """setup-tools builds nox and uv once per runner (its tool cache outlives the job): the
    first run's GPU jobs build them, and every job of the next run reuses what is there.  The
    three shards start together on act's one tool cache: one builds, the others take turns."""
    first = _job_lines(rehearsal["schedule-1"][1], "probe")
    assert first.count("nox and uv: built in") == 1, first
    assert first.count("nox 2026.10.20") >= 3  # each shard's job got its tools
    again = rehearsal["schedule-2"][1]
    said = [line for line in again.splitlines() if "nox and uv: " in line]
    assert said and all("nox and uv: reusing " in line for line in said), said
    assert {re.match(r"\[[^/]+/(\w+)", line).group(1) for line in said} >= {
        "plan",
        "probe",
        "build",
        "notify",
    }


def test_the_next_scheduled_run_starts_from_the_published_store(rehearsal):
    code, log = rehearsal["schedule-2"]
    runs = rehearsal["pages-2"]["store_runs"]
    probed = [cell for cell, _ in runs]
    # unchanged cells were not probed again; only the infrastructure failure was retried
    assert probed.count(_cell(MATRIX_DAYS[0])) == 1
    assert probed.count(_cell(MATRIX_DAYS[1])) == 1
    assert probed.count(_cell(BROKEN)) == 2
    assert "previous results.sqlite:" in log
    # nothing changed, so nothing was written to the issue
    assert [r.method for r in rehearsal["writes-2"]] == ["POST"]


def test_a_shard_killed_with_sigkill_uploads_and_publishes_the_run_it_stored(rehearsal):
    """Its runs sat in the live store's -wal: the upload of the file alone lost them (exit 250
    in the build); the copy step's one-file store keeps them."""
    code, log = rehearsal["killed"]
    assert code != 0  # the killed shard's job failed
    probe = _job_lines(log, "probe")
    assert "no torchbisect process above" not in probe  # the stand-in found the run to kill
    assert (
        "The shard's store as one file" in probe and "uploaded artifact store-shard-H200-1" in log
    )
    assert "deployed" in log
    before, after = rehearsal["pages-7"]["store_runs"], rehearsal["pages-8"]["store_runs"]
    assert len(after) == len(before) + 1  # the first cell's run; the killed one stored none
    assert after[-1][0] in {_cell(d) for d in MATRIX_DAYS[:2]}


def test_a_rerun_overwrites_its_uploads_and_a_502_from_the_api_blocks_nothing(rehearsal):
    code, log = rehearsal["schedule-2"]
    # attempt 1's artifacts were still there: each upload replaced its own
    assert "already uploaded" not in log
    assert "uploaded artifact store-shard-H200-1" in log
    assert "uploaded artifact merged-store" in log
    assert "uploaded artifact github-pages-2" in log  # a Pages artifact of its own
    assert "Job succeeded" in _job_lines(log, "deploy")
    # the API answered 502 twice; notify retried and got through
    assert [status for status, _ in rehearsal["faulted-2"]] == [502, 502]
    assert "Job succeeded" in _job_lines(log, "notify")


def test_a_site_that_answers_503_fails_the_run_and_publishes_nothing(rehearsal):
    code, log = rehearsal["site-503"]
    assert code != 0
    assert "could not fetch" in log and "HTTP 503" in log
    assert "deployed" not in log and "uploaded artifact" not in log
    assert rehearsal["pages-7"] == rehearsal["pages-6"]  # the site is as it was


def test_a_deploy_after_another_runs_deploy_publishes_nothing_and_its_rerun_keeps_both(rehearsal):
    """Deploys take turns, but two runs can fetch the store before either deploys: the second
    deploy would drop the first run's results.  Its site check stops it instead, and running
    its build again merges its results into what the other run published."""
    code, log = rehearsal["overlap"]
    assert code != 0
    deploy = _job_lines(log, "deploy")
    assert "another run deployed after this run's build fetched the store" in deploy
    assert "Re-run this run's build job" in deploy
    assert "Job failed" in deploy
    assert "uploaded artifact merged-store" in log  # this run's results are kept meanwhile
    site, before = rehearsal["pages-3"], rehearsal["pages-2"]
    # what the other run published stays; this run's page was not deployed over it
    assert site["other_runs"] == 1
    assert site["results"] == before["results"]
    assert site["store_bisections"] == before["store_bisections"]
    code, log = rehearsal["overlap-rerun"]
    assert code == 0, log[-3000:]
    assert "still publishes the store this run merged from" in _job_lines(log, "deploy")
    repaired = rehearsal["pages-4"]
    assert repaired["other_runs"] == 1  # the other run's results
    assert repaired["store_bisections"] == before["store_bisections"] + 1  # and this run's


def test_the_rehearsal_leaves_no_container_network_or_volume_behind(rehearsal):
    """act runs with --rm, but a killed or failed run can leave its containers: the cleanup
    removes what act made (it also runs at the fixture's teardown, whatever the outcome)."""
    remove_left_behind(rehearsal["before"])
    assert left_behind(rehearsal["before"]) == {
        "containers": set(),
        "networks": set(),
        "volumes": set(),
    }


def test_a_dispatched_bisection_reaches_the_page_and_affected_json(rehearsal):
    """The overlapping dispatch's re-run (a whole run of bisect.yml, attempt 2) publishes it."""
    code, log = rehearsal["overlap-rerun"]
    assert code == 0, log[-3000:]
    site = rehearsal["pages-4"]
    [bisection] = site["results"]["bisections"]
    assert bisection["first_bad"]["date"] == f"{FIRST_STALE:%Y-%m-%d}"
    main_sha = rehearsal["shas"][f"{FIRST_STALE:%Y-%m-%d}"][1]
    git_ranges = [
        r for a in site["affected"]["affected"] for r in a["ranges"] if r["type"] == "GIT"
    ]
    assert {"introduced": main_sha} in git_ranges[0]["events"]
    # the matrix's runs are still there: the bisection was merged into the chain
    assert _cell(MATRIX_DAYS[1]) in {r["cell"]["id"] for r in site["results"]["runs"]}


def test_the_weekly_fix_check_without_a_fix_says_so(rehearsal):
    code, log = rehearsal["weekly"]
    said = f"no fix yet: newest nightly {TODAY:%Y-%m-%d} ({nightly_version(TODAY)}) still affected"
    assert said in _job_lines(log, "notify")
    assert "Summary - ### Fix check" in log  # act shows the job summary the step wrote
    assert code == 0, log[-3000:]  # "no fix yet" is an answer, not a failure
    hub = rehearsal["hub"]
    [issue] = hub.issues.values()
    assert said in issue["body"]
    assert any(said in text for _, text in hub.comments)
    assert rehearsal["pages-5"]["results"]["bisections"]  # the page kept the bisection


def test_a_dispatch_with_another_matrix_file_and_too_many_shards(rehearsal):
    code, log = rehearsal["custom"]
    assert code == 0, log[-3000:]
    # 3 declared, 1 cell: 1 shard, and only the kind that file declares
    assert "H200: 1 shard on ['self-hosted', 'linux', 'x64', 'h200']" in _job_lines(log, "plan")
    assert "uploaded artifact store-shard-H200-1" in log and "store-shard-H200-2" not in log
    assert "GB300" not in _job_lines(log, "probe")
    assert "1 cell: 0 probed now, 1 from the store" in _job_lines(log, "probe")
    assert "Job succeeded" in _job_lines(log, "deploy")


def _wheels(lock: dict) -> set[str]:
    return {b["url"].rsplit("/", 1)[1] for b in lock["builds"].values()}


def test_each_kind_plans_its_own_platform_and_a_refused_kind_is_said_on_the_page(rehearsal):
    code, log = rehearsal["schedule-1"]
    site = rehearsal["pages-1"]
    # one lock per kind, published under data/locks/, each with its own platform's wheels only
    assert set(site["locks"]) == {"H200.lock.json", "GB300.lock.json"}
    x86, arm = _wheels(site["locks"]["H200.lock.json"]), _wheels(site["locks"]["GB300.lock.json"])
    assert len(x86) == len(arm) == len(MATRIX_DAYS)
    assert all(w.endswith("-manylinux_2_28_x86_64.whl") for w in x86)
    assert all(w.endswith("-manylinux_2_28_aarch64.whl") for w in arm)
    assert "no locks/GB300.lock.json published" in log  # each kind's first run: a notice
    # each kind's shards: H200's two and GB300's one, on their own label sets
    plan = _job_lines(log, "plan")
    assert "H200: 2 shards on ['self-hosted', 'linux', 'x64', 'h200']" in plan
    assert "GB300: 1 shard on ['self-hosted', 'linux', 'ARM64', 'gb300']" in plan
    # no RUNNERS_TOKEN here: the online check is not made, said, and drops no kind
    assert "online runners: not checked: no $RUNNERS_TOKEN" in plan
    # the aarch64 kind's job got the x86_64 image: refused with its sentence, nothing probed
    assert (
        "runners.yaml:8 declares kind GB300 as linux_aarch64, but this runner is "
        "linux_x86_64: give the runner the labels of its own kind (or fix that entry); "
        "nothing was probed, so no other kind's wheels run here"
    ) in log
    # one merged store: both H200 shards' attendance, none of GB300's
    # (and the build's roll call of the run: no kind, no shard)
    assert sorted(site["attendance"]) == [
        ("", "", "1-1"),
        ("H200", "1/2", "1-1"),
        ("H200", "2/2", "1-1"),
    ]
    kinds = {k["name"]: k for k in site["results"]["models"]["kinds"]}
    assert kinds["H200"]["state"] == "reported"
    assert kinds["GB300"]["state"] == "never"
    assert kinds["GB300"]["text"] == (
        "declared, never reported — its runners have not run the matrix"
    )
    assert kinds["GB300"]["text"] in site["html"]
    # the re-run (attempt 2 of the same run) still says so, and attendance of both attempts
    # counts as one run for H200
    again = {k["name"]: k["state"] for k in rehearsal["pages-2"]["results"]["models"]["kinds"]}
    assert again == {"H200": "reported", "GB300": "never"}
