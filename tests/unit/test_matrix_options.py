"""`matrix`'s flags become one frozen `MatrixOptions`, once, with what they imply worked out (a
runner kind's driver and lock); the flags themselves are never written to; and the benchmarks
probe through the run stage's own probing step."""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path

import pytest
from helpers import ScriptedBackend, make_cell
from helpers.runner_kinds import make_world

from torchbisect.cli import _parse
from torchbisect.commands import matrix as matrix_cli
from torchbisect.exits import Exit
from torchbisect.run.matrix_run import MatrixRun


@pytest.fixture
def world(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.chdir(make_world(tmp_path))
    return tmp_path


def _args(*argv: str):
    return _parse(["matrix", *argv], "matrix")


def test_the_options_are_frozen_and_hold_the_kinds_driver_and_lock(world):
    args = _args("--runners", "runners.yaml", "--kind", "H200", "--cells", "nightly-*")
    before = copy.deepcopy(vars(args))
    options = matrix_cli.matrix_options(args)
    assert options.driver == "580.95.05"  # declared by the kind, not given as a flag
    assert options.lock == Path("matrix.locks") / "H200.lock.json"
    assert options.kind is not None and options.kind.name == "H200"
    assert options.cells == "nightly-*" and options.logs == args.out / "logs"
    assert vars(args) == before  # nothing derived is written back into the flags
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.driver = "1"  # type: ignore[misc]


def test_flags_given_win_over_the_kinds(world):
    args = _args(
        "--runners",
        "runners.yaml",
        "--kind",
        "H200",
        "--driver",
        "999.1",
        "--lock",
        "mine.lock.json",
    )
    options = matrix_cli.matrix_options(args)
    assert (options.driver, options.lock) == ("999.1", Path("mine.lock.json"))
    plain = matrix_cli.matrix_options(_args())
    assert (plain.driver, plain.kind, plain.lock) == (None, None, Path("matrix.lock.json"))


def test_the_command_builds_the_options_once_and_hands_them_to_run_matrix(world, monkeypatch):
    built, given = [], []
    real = matrix_cli.matrix_options

    def counted(args):
        built.append(real(args))
        return built[-1]

    def run_matrix(options, handler):
        given.append(options)
        return MatrixRun(new=(), reused=())

    monkeypatch.setattr(matrix_cli, "matrix_options", counted)
    monkeypatch.setattr("torchbisect.run.matrix_run.run_matrix", run_matrix)
    args = _args("--no-report")
    assert matrix_cli.run(args) == Exit.OK
    assert len(built) == 1 and given == built


def test_the_overhead_bench_probes_through_the_run_stage(monkeypatch, tmp_path, fake_probes):
    from torchbisect.bench import stage as bench
    from torchbisect.run import matrix_run as run

    called = []
    real = run.run_picked

    def spy(picked, **kw):
        called.append(picked.to_run)
        return real(picked, **kw)

    monkeypatch.setattr(run, "run_picked", spy)
    monkeypatch.setattr(bench, "_bare_probe", lambda *a, **kw: 1.0)
    monkeypatch.setattr("torchbisect.utils.gpus.list_gpus", lambda: [])
    cell = make_cell("dev-bench")
    result = bench.cell_overhead(cell=cell, backend=ScriptedBackend(), repeats=2)
    assert called == [(cell,), (cell,)]
    assert result["cell"] == "dev-bench" and result["repeats"] == 2 and "ratio" in result
