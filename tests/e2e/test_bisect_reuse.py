"""The matrix and the bisection share their stored runs, both ways, by one rule (`reuse.covers`).

Real parts: the `matrix` and `bisect` commands, the venv backend installing stand-in torch wheels
(one per nightly date, two on a version-bump date) from a folder index, SQLite, and a probe script
that decides by the torch it imports.  The bisection asks for one case, so a full matrix run of a
wheel answers for it; a matrix cell reuses a bisection's one-case run only when it asks for just
that case with the same settings.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from helpers import fake_torch_wheel
from helpers.cli import call

from torchbisect.exits import Exit
from torchbisect.store.db import Store

pytestmark = pytest.mark.skipif(shutil.which("uv") is None, reason="uv is not installed")

PY = f"{sys.version_info.major}.{sys.version_info.minor}"
DAYS = ["2025-08-01", "2025-08-02", "2025-08-04", "2025-08-05", "2025-08-06", "2025-08-07"]
BUMP = "2025-08-05"  # two nightlies that date: 2.10.0.dev… and 2.11.0.dev…
FIRST_BAD = "2025-08-05"
PROBE = '''"""Decides by the nightly date of the torch it imports."""
PROBE_VERSION = "reuse-test"
BISECT_CASE = "capture_data_ptr"
import argparse, json, sys
import torch
p = argparse.ArgumentParser()
p.add_argument("--cases", default="capture_data_ptr,control_clone")
p.add_argument("--trials")
p.add_argument("--json")
a = p.parse_args()
day = torch.__version__.split("dev")[1][:8]
bad = day >= "FIRST_BAD"
verdict = "affected" if bad else "not_affected"
cases = {c: {"verdict": "not_affected" if c.startswith("control") else verdict, "detail": day}
         for c in a.cases.split(",")}
doc = {"schema": 1, "probe": "stale_replay", "probe_version": PROBE_VERSION, "verdict": verdict,
       "cases": cases, "env": {"torch_version": torch.__version__, "git_version": "g" + day}}
open(a.json, "w").write(json.dumps(doc))
sys.exit(1 if bad else 0)
'''.replace("FIRST_BAD", FIRST_BAD.replace("-", ""))


def version_of(day: str, bumped: bool = False) -> str:
    return f"{'2.11.0' if bumped or day > BUMP else '2.10.0'}.dev{day.replace('-', '')}+cpu"


@pytest.fixture
def world(tmp_path, fake_probes):
    index = tmp_path / "index"
    for day in DAYS:
        fake_torch_wheel(index, version_of(day))
    fake_torch_wheel(index, version_of(BUMP, bumped=True))
    (tmp_path / "probes").mkdir()
    (tmp_path / "probes" / "stale_replay.py").write_text(PROBE)
    fake_probes(tmp_path / "probes")
    return tmp_path


def matrix(world: Path, store: Path, cases: str = "") -> int:
    (world / "matrix.yaml").write_text(
        f'defaults:\n  python: "{PY}"\n{cases}'
        f"indexes:\n  nightly: {world / 'index'}\n"
        f"nightly:\n  from: {DAYS[0]}\n  to: {DAYS[-1]}\n  cuda: cpu\n"
    )
    return call(
        "matrix",
        "--matrix",
        str(world / "matrix.yaml"),
        "--allow-no-gpu",
        "--backend",
        "venv",
        "--store",
        str(store),
        "--workdir",
        str(world / "work"),
        "--no-report",
        "--out",
        str(world / "reports"),
    )


def bisect(world: Path, store: Path) -> int:
    return call(
        "bisect",
        "--good",
        DAYS[0],
        "--bad",
        DAYS[-1],
        "--cuda",
        "cpu",
        "--python",
        PY,
        "--index-url",
        str(world / "index"),
        "--backend",
        "venv",
        "--store",
        str(store),
        "--workdir",
        str(world / "work"),
        "--no-github",
        "--json",
        str(world / "bisect.json"),
    )


def runs(store: Path) -> list:
    with Store(store) as s:
        return s.runs()


@pytest.mark.slow
def test_a_bisection_reuses_the_matrix_runs_of_the_same_wheels(world, capsys):
    store = world / "results.sqlite"
    assert matrix(world, store) == Exit.OK
    stored = runs(store)
    assert {r.cell.id for r in stored} >= {
        f"nightly-{BUMP.replace('-', '')}-2.10.0-cpu-cp{PY.replace('.', '')}",
        f"nightly-{BUMP.replace('-', '')}-2.11.0-cpu-cp{PY.replace('.', '')}",
    }
    capsys.readouterr()
    assert bisect(world, store) == Exit.OK
    out = capsys.readouterr().out
    assert "first bad:  2025-08-05" in out
    assert "(0 run now," in out  # every nightly it asked about was judged from the matrix's runs
    assert len(runs(store)) == len(stored)


@pytest.mark.slow
def test_a_longer_limit_does_not_make_the_matrix_verdicts_stale(world, capsys):
    """The matrix ran with `timeout: 120`, the bisection asks 900 s (its default): a verdict that
    finished within 120 s is the one 900 s would give, so nothing is probed again."""
    store = world / "results.sqlite"
    assert matrix(world, store, cases="  timeout: 120\n") == Exit.OK
    stored = runs(store)
    assert {r.cell.timeout for r in stored} == {120}
    capsys.readouterr()
    assert bisect(world, store) == Exit.OK
    out = capsys.readouterr().out
    assert "first bad:  2025-08-05" in out
    assert "(0 run now," in out
    assert len(runs(store)) == len(stored)


@pytest.mark.slow
def test_a_matrix_reuses_a_bisection_run_only_when_it_asks_what_that_run_covered(world):
    store = world / "results.sqlite"
    assert bisect(world, store) == Exit.OK
    bisected = {r.cell.id: r for r in runs(store)}
    bump_id = f"nightly-{BUMP.replace('-', '')}-2.11.0-cpu-cp{PY.replace('.', '')}"
    assert bump_id in bisected  # the matrix's id for the newer build of the bump date

    # the matrix asking for the same one case, same settings: the bisection's runs answer
    assert matrix(world, store, cases="  cases: [capture_data_ptr]\n") == Exit.OK
    after = runs(store)
    new = [r for r in after if r.run_id not in {b.run_id for b in bisected.values()}]
    assert {r.cell.id for r in new}.isdisjoint(bisected)  # only the dates it never probed
    assert len(new) == len(DAYS) + 1 - len(bisected)

    # the probe's default set is more than those runs hold: every cell is probed
    before = len(after)
    assert matrix(world, store) == Exit.OK
    assert len(runs(store)) == before + len(DAYS) + 1
