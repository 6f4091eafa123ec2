"""The declared runner kinds on the page: `torchbisect report --runners runners.yaml` says, from the
store's attendance alone, which kinds reported in the latest run, which did not (and when they
last did) and which never have, in index.html, summary.md and results.json; a kind name or GPU
name cannot inject HTML or Markdown; an older store is read without a byte changed."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import REPO
from helpers.cli import invoke

from torchbisect.bench.synthetic import synthetic_run as run
from torchbisect.exits import Exit
from torchbisect.model import Attendance
from torchbisect.store.db import Store

OLDER_EVIDENCE = REPO / "tests" / "data" / "store" / "h200-evidence-before-attendance.sqlite"
BAD = {"capture_data_ptr": (5, 5), "capture_write": (5, 5)}
GOOD = {"capture_data_ptr": (0, 5), "capture_write": (0, 5)}
RUNNERS = """\
kinds:
  - name: H200
    gpu: NVIDIA H200
    labels: [self-hosted, linux, x64, h200]
    platform: linux_x86_64
    shards: 2
  - name: GB300
    gpu: NVIDIA GB300
    labels: [self-hosted, linux, ARM64, gb300]
    platform: linux_aarch64
  - name: GH200
    gpu: NVIDIA GH200
    labels: [self-hosted, linux, ARM64, gh200]
    platform: linux_aarch64
"""


def came(
    kind: str,
    shard: str,
    run_id: str,
    day: str,
    *,
    gpu: str = "",
    cells: int = 4,
    probed: int = 3,
    reused: int = 1,
    failed: int = 0,
) -> Attendance:
    return Attendance(
        kind=kind,
        shard=shard,
        run=run_id,
        gpu=gpu,
        host="runner-1",
        started=f"{day}T06:00:00+00:00",
        finished=f"{day}T07:00:00+00:00",
        cells=cells,
        probed=probed,
        reused=reused,
        failed=failed,
    )


def report(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return invoke("report", *args, cwd=tmp_path)


def page_text(folder: Path) -> str:
    html = (folder / "index.html").read_text()
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def store_with(path: Path, runs, attendance) -> Path:
    with Store(path) as store:
        store.add_many(runs)
        for a in attendance:
            store.add_attendance(a)
    return path


def test_each_declared_kind_is_said_as_the_attendance_has_it(tmp_path):
    (tmp_path / "runners.yaml").write_text(RUNNERS)
    store = store_with(
        tmp_path / "results.sqlite",
        [
            run("2.15.0+cu130", BAD),
            run("2.14.0+cu130", BAD),
            run("2.15.0+cu130", GOOD, gpu="NVIDIA GB300"),
        ],
        [
            came("GB300", "1/1", "99-1", "2026-11-29", gpu="NVIDIA GB300"),
            came("H200", "1/2", "100-1", "2026-11-30", gpu="NVIDIA H200"),
            came("H200", "2/2", "100-1", "2026-11-30", gpu="NVIDIA H200", failed=1),
        ],
    )
    before = hashlib.sha256(store.read_bytes()).hexdigest()
    done = report(tmp_path, "--store", str(store), "--out", "site", "--runners", "runners.yaml")
    assert done.returncode == Exit.OK, done.stderr
    text = page_text(tmp_path / "site")
    h200 = (
        "reported in the latest run (run 100-1, 2026-11-30): shards 1/2, 2/2 seen; 8 cells: "
        "6 probed, 2 reused, 1 without a verdict"
    )
    gb300 = (
        "did not report in the latest run (run 100-1, 2026-11-30); last reported 2026-11-29 "
        "(run 99-1)"
    )
    never = "declared, never reported — its runners have not run the matrix"
    assert f"H200 · NVIDIA H200 · linux_x86_64 · NVIDIA H200’s results {h200}" in text
    assert f"GB300 · NVIDIA GB300 · linux_aarch64 · NVIDIA GB300’s results {gb300}" in text
    assert f"GH200 · NVIDIA GH200 · linux_aarch64 {never}" in text
    assert "Not every runner kind reported in the latest run: GB300, GH200" in text
    # said before the models' own headlines
    assert text.index("Runner kinds") < text.index("releases tested")
    summary = (tmp_path / "site" / "summary.md").read_text()
    assert "**Not every runner kind reported in the latest run: GB300, GH200**" in summary
    assert f"- **GH200** (NVIDIA GH200 · linux\\_aarch64): {never}" not in summary  # no escape
    assert f"- **GH200** (NVIDIA GH200 · linux_aarch64): {never}" in summary
    assert f"- **GB300** (NVIDIA GB300 · linux_aarch64): {gb300}" in summary
    models = json.loads((tmp_path / "site" / "results.json").read_text())["models"]
    assert models["measured"] == ["NVIDIA GB300", "NVIDIA H200"]
    assert [(k["name"], k["state"], k["gpus"]) for k in models["kinds"]] == [
        ("H200", "reported", ["NVIDIA H200"]),
        ("GB300", "absent", ["NVIDIA GB300"]),
        ("GH200", "never", []),
    ]
    assert models["differences"] == [
        "2.15.0: not affected on NVIDIA GB300; affected on NVIDIA H200"
    ]
    assert hashlib.sha256(store.read_bytes()).hexdigest() == before


def test_a_shard_that_did_not_report_is_named(tmp_path):
    (tmp_path / "runners.yaml").write_text(RUNNERS)
    store = store_with(
        tmp_path / "results.sqlite",
        [run("2.15.0+cu130", BAD)],
        [came("H200", "1/2", "100-1", "2026-11-30", gpu="NVIDIA H200")],
    )
    done = report(tmp_path, "--store", str(store), "--out", "site", "--runners", "runners.yaml")
    assert done.returncode == Exit.OK, done.stderr
    text = page_text(tmp_path / "site")
    assert (
        "reported in the latest run (run 100-1, 2026-11-30): shard 1/2 seen, shard 2/2 did "
        "not report; 4 cells: 3 probed, 1 reused, 0 without a verdict"
    ) in text
    assert "Not every runner kind reported in the latest run: H200, GB300, GH200" in text
    # one GPU model: no side-by-side table, but the kinds are said
    assert (
        "Across GPU models" in text
        and 'class="matrix cmp"' not in (tmp_path / "site" / "index.html").read_text()
    )


def test_a_kind_whose_results_kept_no_attendance_did_not_report_but_is_never_never_reported(
    tmp_path,
):
    # the evidence after the H100's shard was merged (issue 54): the H200's runs were made before
    # the store kept attendance, the H100's as a kind; "never reported" would deny those runs
    h100 = (
        "  - name: H100\n    gpu: NVIDIA H100\n    labels: [self-hosted, linux, x64, h100]\n"
        "    platform: linux_x86_64\n"
    )
    (tmp_path / "runners.yaml").write_text(RUNNERS + h100)
    store = store_with(
        tmp_path / "results.sqlite",
        [run("2.15.0+cu130", BAD), run("2.15.0+cu130", BAD, gpu="NVIDIA H100")],
        [came("H100", "1/1", "local-1", "2026-12-07", gpu="NVIDIA H100")],
    )
    done = report(tmp_path, "--store", str(store), "--out", "site", "--runners", "runners.yaml")
    assert done.returncode == Exit.OK, done.stderr
    kinds = {
        k["name"]: k["state"]
        for k in json.loads((tmp_path / "site" / "results.json").read_text())["models"]["kinds"]
    }
    assert kinds == {"H200": "absent", "H100": "reported", "GB300": "never", "GH200": "never"}
    text = page_text(tmp_path / "site")
    assert (
        "H200 · NVIDIA H200 · linux_x86_64 · NVIDIA H200’s results did not report in the latest "
        "run (run local-1, 2026-12-07); its results in the store come from runs that kept no "
        "attendance"
    ) in text
    assert "Not every runner kind reported in the latest run: H200, GB300, GH200" in text
    assert "H200 declared, never reported" not in text


def test_without_runners_the_page_lists_no_kinds(tmp_path):
    store = store_with(
        tmp_path / "results.sqlite",
        [run("2.15.0+cu130", BAD)],
        [came("H200", "1/1", "100-1", "2026-11-30", gpu="NVIDIA H200")],
    )
    assert report(tmp_path, "--store", str(store), "--out", "site").returncode == Exit.OK
    assert "Runner kinds" not in page_text(tmp_path / "site")
    assert json.loads((tmp_path / "site" / "results.json").read_text())["models"]["kinds"] == []


def test_an_older_store_is_read_without_a_byte_changed_and_says_no_kind_is_known(tmp_path):
    (tmp_path / "runners.yaml").write_text(RUNNERS)
    evidence = tmp_path / "evidence" / "results.sqlite"  # schema 1: no attendance table
    evidence.parent.mkdir()
    # the H200 evidence as it was before the H100's shard was merged into it (issue 54)
    shutil.copyfile(OLDER_EVIDENCE, evidence)
    before = hashlib.sha256(evidence.read_bytes()).hexdigest()
    done = report(tmp_path, "--store", str(evidence), "--out", "site", "--runners", "runners.yaml")
    assert done.returncode == Exit.OK, done.stderr
    assert hashlib.sha256(evidence.read_bytes()).hexdigest() == before
    assert sorted(p.name for p in evidence.parent.iterdir()) == ["results.sqlite"]
    # the evidence holds two regressions (issue 47): the lazy-clone one is drawn in its folder
    assert (tmp_path / "site" / "index.html").is_file()
    text = page_text(tmp_path / "site" / "stale_replay")
    # no attendance at all: not "never reported", which the store cannot tell
    assert "never reported" not in text and "Not every runner kind" not in text
    assert text.count("so whether its runners ran is not known") == 3
    assert (
        "H200 · NVIDIA H200 · linux_x86_64 · NVIDIA H200’s results declared; the store holds "
        "no attendance"
    ) in text


def test_a_hostile_kind_or_gpu_name_stays_text(tmp_path):
    hostile_gpu = '<img src=x onerror="alert(1)"> @team [x](https://evil.example)'
    (tmp_path / "runners.yaml").write_text(
        "kinds:\n  - name: H200\n    gpu: '" + hostile_gpu.replace("'", "''") + "'\n"
        "    labels: [self-hosted, h200]\n    platform: linux_x86_64\n"
    )
    store = store_with(
        tmp_path / "results.sqlite",
        [run("2.15.0+cu130", BAD)],
        [
            came(
                "<script>alert(2)</script>",
                "1/1",
                "100-1",
                "2026-11-30",
                gpu="<b>NVIDIA</b> | H200",
            )
        ],
    )
    done = report(tmp_path, "--store", str(store), "--out", "site", "--runners", "runners.yaml")
    assert done.returncode == Exit.OK, done.stderr
    html = (tmp_path / "site" / "index.html").read_text()
    assert "<img" not in html and "<script>alert" not in html and "<b>NVIDIA" not in html
    assert "&lt;img src=x onerror=" in html and "&lt;script&gt;alert(2)&lt;/script&gt;" in html
    assert "not declared in runners.yaml; reported in the latest run" in page_text(
        tmp_path / "site"
    )
    summary = (tmp_path / "site" / "summary.md").read_text()
    kinds = summary[summary.index("Runner kinds") : summary.index("### What to do")]
    assert "<" not in kinds and "[x](" not in kinds and "@team" not in kinds
    assert "&lt;script&gt;" in kinds


def test_runners_with_probe_documents_is_one_sentence(tmp_path):
    (tmp_path / "runners.yaml").write_text(RUNNERS)
    doc = next((REPO / "reports" / "evidence" / "hand").glob("h200-torch-*.json"))
    done = report(tmp_path, "--probe-json", str(doc), "--out", "site", "--runners", "runners.yaml")
    assert done.returncode == Exit.MISTAKE and "--runners needs the result store" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_a_mistake_in_runners_yaml_is_its_sentence(tmp_path):
    (tmp_path / "runners.yaml").write_text("kinds:\n  - name: H200\n")
    store = store_with(tmp_path / "results.sqlite", [run("2.15.0+cu130", BAD)], [])
    done = report(tmp_path, "--store", str(store), "--out", "site", "--runners", "runners.yaml")
    assert done.returncode == Exit.MISTAKE
    assert "runners.yaml" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "site").exists()


@pytest.mark.chromium
def test_on_a_phone_the_kinds_stay_inside_the_screen(tmp_path):
    from torchbisect.pages.chromium import Browser

    (tmp_path / "runners.yaml").write_text(
        RUNNERS.replace("gpu: NVIDIA GH200", "gpu: NVIDIA GH200 " + "X" * 80)
    )  # a long name without a space
    store = store_with(
        tmp_path / "results.sqlite",
        [run("2.15.0+cu130", BAD), run("2.15.0+cu130", GOOD, gpu="NVIDIA GB300")],
        [came("H200", "1/2", "100-1", "2026-11-30", gpu="NVIDIA H200")],
    )
    done = report(tmp_path, "--store", str(store), "--out", "site", "--runners", "runners.yaml")
    assert done.returncode == Exit.OK, done.stderr
    with Browser(390, 844, mobile=True) as browser:
        browser.open(tmp_path / "site" / "index.html")
        assert browser.eval("document.documentElement.scrollWidth") <= 390
        rights = browser.eval(
            "[...document.querySelectorAll('.kinds li, #runner-kinds')]"
            ".map(e => e.getBoundingClientRect().right)"
        )
        assert len(rights) == 4 and max(rights) <= 390
        from torchbisect.pages.chromium import CONTRAST_JS  # the page's one contrast measure

        low = [x for x in browser.eval(CONTRAST_JS) if x["ratio"] < 4.5]
    assert low == [], low[:5]


def test_a_re_run_shard_counts_for_its_run_with_its_newest_attempt(tmp_path):
    from torchbisect.config.runners import load_runners
    from torchbisect.page.kinds import kind_views

    (tmp_path / "runners.yaml").write_text(RUNNERS)
    runners = load_runners(tmp_path / "runners.yaml")
    attendance = [
        came("H200", "1/2", "100-1", "2026-11-30"),
        came("H200", "2/2", "100-1", "2026-11-30", probed=0, reused=0, failed=4),
        came("H200", "2/2", "100-2", "2026-12-01"),
    ]  # the failed shard, re-run
    h200, gb300, _ = kind_views(runners.kinds, attendance, ["NVIDIA H200"])
    assert (h200.state, h200.text) == (
        "reported",
        (
            "reported in the latest run (run 100-1, 100-2, 2026-12-01): shards 1/2, 2/2 seen; "
            "8 cells: 6 probed, 2 reused, 0 without a verdict"
        ),
    )
    assert gb300.text.startswith("declared, never reported")
    # a local run's id has dashes of its own and no attempt
    local = [came("H200", "1/1", "local-2026-11-30T06:00:00", "2026-11-30")]
    assert kind_views(runners.kinds, local, [])[0].text.startswith(
        "reported in the latest run (run local-2026-11-30T06:00:00, 2026-11-30): shard 1/1 seen;"
    )


@pytest.mark.slow  # over 2 s on a 2-core machine: out of the fast loop
def test_a_run_in_which_no_shard_reported_is_still_the_latest_run_through_its_roll_call(tmp_path):
    """Yesterday every kind reported; today every probe job failed before storing anything (a
    broken driver on every runner, say).  The build's `merge --roll-call` records today's run,
    so the page says each kind missed it, instead of showing yesterday's run as the latest."""
    shard = tmp_path / "yesterday.sqlite"
    with Store(shard) as db:
        db.add_many([run("2.15.0+cu132", BAD, gpu="NVIDIA H200")])
        for a in (
            came("H200", "1/2", "100-1", "2026-11-30", gpu="NVIDIA H200"),
            came("H200", "2/2", "100-1", "2026-11-30", gpu="NVIDIA H200"),
        ):
            db.add_attendance(a)
    (tmp_path / "runners.yaml").write_text(RUNNERS)
    env = {"GITHUB_RUN_ID": "101", "GITHUB_RUN_ATTEMPT": "1"}
    merged = tmp_path / "site" / "data" / "results.sqlite"
    # no probe job uploaded a store-shard artifact: the download made no folder at all
    done = invoke(
        "merge", merged, shard, "--shards", "shards", "--roll-call", cwd=tmp_path, env_extra=env
    )
    assert done.returncode == Exit.OK, done.stderr
    assert (
        "shards: no shard store (*/shard.sqlite) there: no shard of any runner kind "
        "reported, so none is merged"
    ) in done.stdout
    assert "roll call: run 101-1 merged" in done.stdout
    done = report(tmp_path, "--store", str(merged), "--out", "site", "--runners", "runners.yaml")
    assert done.returncode == Exit.OK, done.stderr
    kinds = {
        k["name"]: k
        for k in json.loads((tmp_path / "site" / "results.json").read_text())["models"]["kinds"]
    }
    assert kinds["H200"]["state"] == "absent"
    assert kinds["H200"]["text"].startswith("did not report in the latest run (run 101-1, ")
    assert "last reported 2026-11-30 (run 100-1)" in kinds["H200"]["text"]
    assert kinds["GB300"]["state"] == "never"
    assert set(kinds) == {"H200", "GB300", "GH200"}  # the roll call is no kind of its own
    # merging it again changes nothing: the same run's roll call is kept once
    assert (
        invoke("merge", merged, shard, "--roll-call", cwd=tmp_path, env_extra=env).returncode
        == Exit.OK
    )
    with Store(merged) as db:
        assert [a.run for a in db.attendance() if a.is_roll_call] == ["101-1"]


def test_merge_takes_every_shard_artifact_folder_under_shards(tmp_path):
    for n in (1, 2):
        with Store(tmp_path / "shards" / f"store-shard-H200-{n}" / "shard.sqlite") as db:
            db.add_many([run(f"2.1{n + 3}.0+cu130", BAD, gpu="NVIDIA H200")])
            db.add_attendance(came("H200", f"{n}/2", "7-1", "2026-12-01", gpu="NVIDIA H200"))
    (tmp_path / "shards" / "store-shard-H200-3").mkdir()  # a job that uploaded only its logs
    done = invoke(
        "merge",
        "out.sqlite",
        "prev.sqlite",
        "--allow-missing",
        "prev.sqlite",
        "--shards",
        "shards",
        cwd=tmp_path,
    )
    assert done.returncode == Exit.OK, done.stderr
    assert "shards/store-shard-H200-1/shard.sqlite: 1 runs added" in done.stdout
    assert "shards/store-shard-H200-2/shard.sqlite: 1 runs added" in done.stdout
    with Store(tmp_path / "out.sqlite") as db:
        assert db.count() == 2 and [a.shard for a in db.attendance()] == ["1/2", "2/2"]
