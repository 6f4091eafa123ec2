"""`torchbisect plan --runners runners.yaml`: every declared kind planned for its own platform and
driver from the declaration alone, one lock per kind, and the job matrix of the kinds' shards.

The index is the act rehearsal's stand-in nightly folder: every build is published for manylinux
x86_64 and aarch64, as download.pytorch.org publishes them."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from helpers.cli import invoke

from torchbisect.exits import Exit


def plan(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return invoke("plan", "--store", "none.sqlite", *args, cwd=cwd)


def _wheels(lock: Path) -> list[str]:
    return [b["url"].rsplit("/", 1)[1] for b in json.loads(lock.read_text())["builds"].values()]


def test_each_kind_locks_its_own_platforms_wheels_and_lists_its_own_shards(kinds_world):
    done = plan(
        kinds_world,
        "--runners",
        "runners.yaml",
        "--lock-dir",
        "locks",
        "--json-dir",
        "plans",
        "--github-output",
        "out",
    )
    assert done.returncode == Exit.OK, done.stdout + done.stderr
    x86, arm = (
        _wheels(kinds_world / "locks" / "H200.lock.json"),
        _wheels(kinds_world / "locks" / "GB300.lock.json"),
    )
    assert len(x86) == len(arm) == 3
    assert all(w.endswith("-manylinux_2_28_x86_64.whl") for w in x86)
    assert all(w.endswith("-manylinux_2_28_aarch64.whl") for w in arm)
    [probes] = [
        line
        for line in (kinds_world / "out").read_text().splitlines()
        if line.startswith("probes=")
    ]
    entries = json.loads(probes.removeprefix("probes="))
    # 2 H200 runners; GB300 declares 5 but has 3 cells: never a runner with nothing to probe;
    # the A100's driver runs no cu126/cu130 build: no runner asked for at all, and said
    assert [(e["kind"], e["shard"]) for e in entries] == [
        ("H200", "1/2"),
        ("H200", "2/2"),
        ("GB300", "1/3"),
        ("GB300", "2/3"),
        ("GB300", "3/3"),
    ]
    assert entries[2]["labels"] == ["self-hosted", "linux", "ARM64", "gb300"]
    assert "A100: no cell to probe, so no runner of this kind is asked for" in done.stdout
    # each kind's table under its name, with the line that declares it
    assert "\nGB300: NVIDIA GB300, linux_aarch64, driver 580.95.05 (runners.yaml:8)" in done.stdout
    assert json.loads((kinds_world / "plans" / "GB300.plan.json").read_text())["cells"]


def test_a_previous_lock_per_kind_and_a_kind_without_one(kinds_world):
    plan(kinds_world, "--runners", "runners.yaml", "--lock-dir", "old")
    (kinds_world / "old" / "GB300.lock.json").unlink()
    done = plan(
        kinds_world,
        "--runners",
        "runners.yaml",
        "--lock-dir",
        "locks",
        "--previous-lock-dir",
        "old",
        "--kind",
        "GB300",
    )
    assert done.returncode == Exit.OK, done.stdout + done.stderr
    assert "no previous lock of GB300 at old/GB300.lock.json: its first run" in done.stdout
    assert [p.name for p in (kinds_world / "locks").iterdir()] == ["GB300.lock.json"]  # --kind: one


def test_the_declared_kinds_without_planning(kinds_world):
    done = plan(
        kinds_world,
        "--runners",
        "runners.yaml",
        "--kinds-only",
        "--kind=",
        "--github-output",
        "out",
    )
    assert done.returncode == Exit.OK, done.stderr
    assert (kinds_world / "out").read_text().splitlines() == [
        "kinds=H200 GB300 A100",
        "kind=H200",
        'labels=["self-hosted", "linux", "x64", "h200"]',
    ]
    assert not (kinds_world / "matrix.locks").exists()  # nothing was planned


@pytest.mark.parametrize(
    "args, said",
    [
        (
            ["--runners", "runners.yaml", "--lock", "x.json"],
            "--lock plans one machine, but --runners plans every kind",
        ),
        (["--runners", "runners.yaml", "--shards", "3"], "(use `shards:` in runners.yaml)"),
        (["--runners", "runners.yaml", "--platform", "linux_aarch64"], "leave --platform out"),
        (["--lock-dir", "locks"], "--lock-dir is for runner kinds: add --runners runners.yaml"),
        (["--kind", "H200"], "--kind is for runner kinds"),
        (
            ["--runners", "runners.yaml", "--kinds-only", "--hash", "--github-output", "o"],
            "--kinds-only plans nothing, so --hash has nothing to do",
        ),
        (["--runners", "runners.yaml", "--kinds-only"], "add --github-output FILE"),
        (
            ["--runners", "runners.yaml", "--kind", "B200"],
            "runners.yaml declares no kind named 'B200'; it declares H200, GB300, A100",
        ),
    ],
)
def test_flags_that_do_not_go_together_are_one_sentence(kinds_world, args, said):
    done = plan(kinds_world, *args)
    assert done.returncode == Exit.MISTAKE
    assert said in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not (kinds_world / "locks").exists() and not (kinds_world / "o").exists()
