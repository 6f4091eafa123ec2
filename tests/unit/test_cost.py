"""What a run will cost, said before it starts: `plan`'s cost line, sizes kept in the lock, the
time from stored runs, and the matrix run's download bytes and time left."""

from __future__ import annotations

import io
import json
import shutil
from datetime import date
from pathlib import Path

import pytest
from helpers.cli import call
from helpers.indexserver import fake_wheel, make_nightly_index, make_release_index, serve
from rich.console import Console

from torchbisect.errors import ConfigError
from torchbisect.exits import Exit
from torchbisect.model import Cell, CellRun, Channel, RunStatus
from torchbisect.plan.cost import Cost, TagCost, describe, duration, estimate
from torchbisect.plan.deps import head_size
from torchbisect.plan.lock import Lock, LockedBuild
from torchbisect.run.progress import RichHandler
from torchbisect.store.db import Store

STABLE = "stable-2.15.0-cu130-cp312"
WHEEL = "torch-2.15.0+cu130-cp312-cp312-manylinux_2_28_x86_64.whl"


@pytest.fixture
def served(tmp_path):
    """An index whose wheels are really there, so HEAD requests answer their length."""
    root = tmp_path / "site"
    make_release_index(root, {"cu130": ["2.15.0"]}, pythons=("cp312",), write_wheels=True)
    make_nightly_index(root, [date(2026, 10, 1)], pythons=("cp312",), write_wheels=True)
    with serve(root) as url:
        matrix = tmp_path / "matrix.yaml"
        matrix.write_text(
            f"indexes:\n  stable: {url}/whl/{{cuda}}/\n  nightly: {url}/whl/nightly/{{cuda}}/\n"
            "defaults:\n  python: '3.12'\n  cuda: cu130\nstable:\n  versions: [2.15.0]\n"
            "nightly:\n  dates: [2026-10-01]\npreinstalled: true\n"
        )
        yield root, matrix


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
        str(matrix.parent / "results.sqlite"),
        *extra,
    )


def test_plan_says_cells_gigabytes_and_that_no_timings_are_stored_yet(served, capsys):
    root, matrix = served
    assert plan_cli(matrix) == Exit.OK
    sizes = json.loads((matrix.parent / "matrix.lock.json").read_text())["builds"]
    assert sizes[STABLE]["size"] == len(fake_wheel(WHEEL))  # from the HEAD request
    total = sum(b["size"] for b in sizes.values())
    assert capsys.readouterr().out.splitlines()[-1] == (
        f"3 cells to probe; none stored yet; {total / 1e9:.1f} GB of torch wheels to "
        "download plus the CUDA libraries of 2 wheels, unknown; no stored runs yet to estimate "
        "the time from."
    )  # the stand-in wheels have no metadata beside them


def test_a_second_plan_takes_the_sizes_from_the_lock_and_asks_nothing(served, capsys):
    root, matrix = served
    assert plan_cli(matrix) == Exit.OK
    lock = (matrix.parent / "matrix.lock.json").read_bytes()
    for wheel in root.rglob("*.whl"):  # a HEAD now would answer 404 and lose the size
        wheel.unlink()
    assert plan_cli(matrix) == Exit.OK
    assert (matrix.parent / "matrix.lock.json").read_bytes() == lock
    assert "lock unchanged" in capsys.readouterr().out


def test_plan_estimates_the_time_from_stored_runs(served, capsys):
    _, matrix = served
    with Store(matrix.parent / "results.sqlite") as store:
        for i, (install, probe) in enumerate([(30, 50), (60, 60), (100, 80)]):
            store.add(_run(f"stable-2.{i}.0-cu130-cp312", install, probe))
        store.add(_run("preinstalled", 0, 20))
    assert plan_cli(matrix) == Exit.OK
    # median of 80, 120, 180, 20 s = 100 s; two cells left (preinstalled is stored)
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.startswith("2 cells to probe; 1 already have a verdict in the store; ")
    assert last.endswith(
        "GB of torch wheels to download plus the CUDA libraries of 2 wheels, "
        "unknown; about 3 min 20 s (the median of 4 stored runs, 1 min 40 s a "
        "cell, on one GPU)."
    )


def test_offline_asks_no_sizes_and_says_which_are_unknown(served, capsys):
    _, matrix = served
    assert plan_cli(matrix) == Exit.OK
    path = matrix.parent / "matrix.lock.json"
    doc = json.loads(path.read_text())
    for build in doc["builds"].values():
        del build["size"]
    path.write_text(json.dumps(doc))
    assert plan_cli(matrix, "--offline") == Exit.OK
    assert (
        "0.0 GB of torch wheels to download plus 2 wheels of unknown size"
        in capsys.readouterr().out
    )


def test_a_size_that_is_not_a_number_is_one_sentence(tmp_path):
    path = tmp_path / "matrix.lock.json"
    path.write_text(
        json.dumps(
            {
                "format": 1,
                "builds": {
                    STABLE: {
                        "channel": "stable",
                        "version": "2.15.0+cu130",
                        "cuda": "cu130",
                        "python": "3.12",
                        "url": f"https://example.org/{WHEEL}",
                        "size": "big",
                    }
                },
            }
        )
    )
    with pytest.raises(ConfigError, match="the size of entry .* is not a whole number"):
        Lock.load(path)


def test_head_size_is_none_when_nobody_answers():
    assert head_size("http://127.0.0.1:9/" + WHEEL) is None


def test_estimate_counts_stored_cells_and_divides_the_time_over_gpus(tmp_path):
    url = f"https://example.org/{WHEEL}"
    cells = [
        Cell(id=f"c{i}", channel=Channel.DEV, version="", cuda="", python="3.12", url=url)
        for i in range(4)
    ]
    lock = Lock(
        builds={
            c.id: LockedBuild(channel="dev", version="", cuda="", python="3.12", url=url, size=1000)
            for c in cells
        }
    )
    cost = estimate(cells, stored=["c0"], lock=lock, runs=[_run("c0", 40, 20)], gpus=2)
    assert cost == Cost(
        to_probe=3,
        stored=1,
        wheels=3,
        download_bytes=3000,
        unknown_sizes=0,
        seconds_per_cell=60.0,
        timed_runs=1,
        gpus=2,
        tags=(TagCost(tag="", wheels=3, wheel_bytes=3000, no_metadata=3),),
    )
    assert cost.seconds == 90.0
    preinstalled = Cell(
        id="preinstalled", channel=Channel.PREINSTALLED, version="", cuda="", python=""
    )
    assert describe(estimate([preinstalled], stored=[], lock=Lock(), runs=[], gpus=1)) == (
        "1 cell to probe; none stored yet; nothing to download; no stored runs yet to estimate "
        "the time from."
    )
    assert (
        describe(estimate(cells, stored=[c.id for c in cells], lock=Lock(), runs=[], gpus=1))
        == "0 cells to probe; 4 already have a verdict in the store."
    )


@pytest.mark.parametrize(
    ("seconds", "said"), [(45, "45 s"), (140, "2 min 20 s"), (3600, "1 h"), (3900, "1 h 5 min")]
)
def test_durations_read_as_a_person_would_say_them(seconds, said):
    assert duration(seconds) == said


def test_a_ci_log_shows_download_bytes_and_time_left(monkeypatch):
    monkeypatch.setenv("CI", "true")
    out = io.StringIO()
    handler = RichHandler(Console(file=out, width=200))
    cell = Cell(id=STABLE, channel=Channel.STABLE, version="", cuda="", python="3.12")
    cost = Cost(
        to_probe=2,
        stored=0,
        wheels=2,
        download_bytes=2_000_000_000,
        unknown_sizes=0,
        seconds_per_cell=600.0,
        timed_runs=3,
        gpus=1,
    )
    with handler:
        handler.start(to_run=2, reused=0, cost=cost)
        handler.download(cell, 300_000_000, 1_000_000_000, 50_000_000)
        handler.download(cell, 310_000_000, 1_000_000_000, 50_000_000)  # within 15 s: quiet
        handler.download(cell, 1_000_000_000, 1_000_000_000, 50_000_000)
        handler.finished(_run(STABLE, 20, 30))
    lines = out.getvalue().splitlines()
    assert lines[0] == describe(cost)
    assert lines[1].endswith(f"{STABLE}: download 300 of 1,000 MB, 50 MB/s, 14 s left")
    assert lines[2].endswith(f"{STABLE}: download 1,000 of 1,000 MB, 50 MB/s, 0 s left")
    assert "1/2 cells done, about" in lines[3] and lines[3].endswith(" left]")
    assert len(lines) == 4


def test_matrix_starts_with_the_cost_and_shows_its_download(
    tmp_path, monkeypatch, capsys, fake_probes
):
    """The venv backend downloads a nightly (no sha256 on the index) through torchbisect."""
    from helpers import fake_torch_wheel

    import torchbisect.utils.gpus

    if shutil.which("uv") is None:
        pytest.skip("uv is not installed")
    monkeypatch.setattr(torchbisect.utils.gpus, "list_gpus", lambda: ())
    monkeypatch.setenv("CI", "true")  # plain lines, as in a CI log
    monkeypatch.chdir(tmp_path)
    page = tmp_path / "site" / "nightly" / "cpu" / "torch"
    wheel = fake_torch_wheel(page.parent, "2.99.0.dev20261001+cpu")
    href = f"/nightly/cpu/{wheel.name.replace('+', '%2B')}"
    page.mkdir(parents=True)
    (page / "index.html").write_text(
        f'<html><body><a href="{href}">{wheel.name}</a></body></html>\n'
    )
    with serve(tmp_path / "site") as url:
        Path("matrix.yaml").write_text(
            f"indexes:\n  nightly: {url}/nightly/{{cuda}}/\ndefaults:\n  cuda: cpu\n"
            "  overlay: true\nnightly:\n  dates: [2026-10-01]\n"
        )
        assert (
            call(
                "matrix", "--allow-no-gpu", "--backend", "venv", "--workdir", "work", "--no-report"
            )
            == Exit.OK
        )
    out = capsys.readouterr()
    said = " ".join((out.out + out.err).split())  # rich wraps at 80 columns off a terminal
    size = wheel.stat().st_size
    assert (
        "1 cell to probe; none stored yet; 0.0 GB of torch wheels to download; "
        "no stored runs yet to estimate the time from." in said
    )
    assert "nightly-20261001-cpu-" in said and ": download 0.0 of 0.0 MB, " in said
    # without a GPU the probe decided nothing: the cell is done, but never ticked as decided
    assert "skipped, no verdict (install" in said and "✓" not in said
    lock = json.loads(Path("matrix.lock.json").read_text())["builds"]
    assert [b["size"] for b in lock.values()] == [size]


def _run(cell_id: str, install: float, probe: float) -> CellRun:
    cell = Cell(id=cell_id, channel=Channel.STABLE, version="2.15.0", cuda="cu130", python="3.12")
    return CellRun(
        cell=cell,
        status=RunStatus.OK,
        seconds_install=install,
        seconds_probe=probe,
        started="2026-11-30T10:00:00+00:00",
        gpu="H200",
        driver="580.159.04",
        probe_version="1",
        wheel_sha256="ab" * 32,
    )


def test_a_local_wheel_is_not_counted_as_a_download(tmp_path):
    from helpers import fake_torch_wheel, make_cell

    wheel = fake_torch_wheel(tmp_path)
    local = make_cell("dev-local", url=str(wheel))
    cost = estimate([local], stored=(), lock=Lock(builds={}), runs=(), gpus=1)
    assert describe(cost) == (
        "1 cell to probe; none stored yet; nothing to download; no stored "
        "runs yet to estimate the time from."
    )
