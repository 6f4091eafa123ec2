"""End to end with the venv backend and the real torch 2.13.0+cpu wheel: `torchbisect matrix`
installs it into a real uv venv (overlay over an interpreter that has torch's dependencies),
probes it and the preinstalled torch with the real probe, stores the `skipped` verdicts (no GPU
here), renders the report; a second run re-runs nothing."""

from __future__ import annotations

import shutil
import time

import pytest
from helpers import IN_CI, find_test_wheel, python_with_torch, sha256_of, wheel_python
from helpers.cli import call, torchbisect

from torchbisect.backends.preinstalled import torch_version
from torchbisect.exits import Exit
from torchbisect.model import RunStatus, Verdict
from torchbisect.store.db import Store


def _need(what, why: str):
    if what is None:
        (pytest.fail if IN_CI else pytest.skip)(why)
    return what


@pytest.fixture(scope="module")
def wheel():
    return _need(
        find_test_wheel(),
        "no torch 2.13.0+cpu wheel (set TORCHBISECT_TEST_WHEEL or pip's find-links)",
    )


@pytest.fixture(scope="module")
def base_python(wheel):
    version = wheel_python(wheel)
    return _need(
        python_with_torch(version),
        f"no Python {version} with torch and its dependencies to overlay the wheel on",
    )


def matrix(tmp_path, base_python, *extra):
    argv = [
        "matrix",
        "--matrix",
        "matrix.yaml",
        "--offline",
        "--allow-no-gpu",
        "--backend",
        "venv",
        "--interpreter",
        base_python,
        "--store",
        "results.sqlite",
        "--out",
        "reports",
        "--workdir",
        "work",
        *extra,
    ]
    began = time.monotonic()
    done = torchbisect(*argv, cwd=tmp_path, timeout=900)
    return done, time.monotonic() - began


@pytest.mark.slow
def test_matrix_with_the_venv_backend_stores_verdicts_then_reruns_nothing(
    tmp_path, wheel, base_python
):
    (tmp_path / "matrix.yaml").write_text(
        f"defaults:\n  timeout: 600\n"
        f"dev:\n  - wheel: {wheel}\n    overlay: true\n"
        f"preinstalled: {{}}\n"
    )
    first, _ = matrix(tmp_path, base_python)
    assert first.returncode == Exit.OK, first.stdout + first.stderr
    assert "2 cells to probe" in first.stdout + first.stderr

    with Store(tmp_path / "results.sqlite") as store:
        runs = {r.cell.id: r for r in store.runs()}
    assert set(runs) == {"dev-2.13.0-cpu", "preinstalled"}
    for run in runs.values():
        assert run.status is RunStatus.OK, run.reason
        assert run.verdict is Verdict.SKIPPED
        assert run.result.cases and all(c.verdict is Verdict.SKIPPED for c in run.result.cases)
        assert (run.backend, run.gpu) == ("venv", "none")
        assert (tmp_path / "reports" / "logs" / f"{run.cell.id}.log").is_file()
    assert runs["dev-2.13.0-cpu"].wheel_sha256 == sha256_of(wheel)
    for run in runs.values():  # the probe really ran under that torch
        assert run.result.env["torch"] == "2.13.0+cpu"
        assert run.result.env["cuda_available"] is False
    assert runs["preinstalled"].wheel_sha256.startswith("preinstalled:2.13.0+cpu:")
    assert runs["preinstalled"].cell.version == "2.13.0+cpu"
    venv_torch = (
        tmp_path
        / "work"
        / "venvs"
        / "dev-2.13.0-cpu"
        / "lib"
        / f"python{wheel_python(wheel)}"
        / "site-packages"
        / "torch"
    )
    assert venv_torch.is_dir()  # the wheel went into the cell's own venv
    assert (tmp_path / "reports" / "index.html").is_file()

    second, seconds = matrix(tmp_path, base_python)
    assert second.returncode == Exit.OK, second.stdout + second.stderr
    assert "0 cells to probe; 2 already have a verdict" in second.stdout + second.stderr
    with Store(tmp_path / "results.sqlite") as store:
        assert len(store.runs()) == 2
    print(f"re-run of the unchanged matrix: {seconds:.1f} s")


@pytest.mark.slow
def test_rerunning_an_unchanged_matrix_probes_nothing():
    from torchbisect.bench.stage import rerun_unchanged

    result = rerun_unchanged(n_cells=5)
    assert result["rerun_cells"] == 0


# -- the commands on stand-in wheels and the stand-in probe (seconds, not minutes) ----------------


@pytest.fixture
def stand_in(tmp_path, monkeypatch, fake_probes):
    """A work folder with two stand-in wheels, the stand-in probe, and no GPU."""
    from helpers import fake_torch_wheel

    import torchbisect.utils.gpus

    if shutil.which("uv") is None:
        pytest.skip("uv is not installed")
    monkeypatch.setattr(torchbisect.utils.gpus, "list_gpus", lambda: ())
    monkeypatch.chdir(tmp_path)
    wheels = [fake_torch_wheel(tmp_path / "wheels", f"2.99.{i}+cpu") for i in range(2)]
    entries = "".join(
        f"  - wheel: {w}\n    name: w{i}\n    overlay: true\n" for i, w in enumerate(wheels)
    )
    (tmp_path / "matrix.yaml").write_text(f"dev:\n{entries}preinstalled: {{}}\n")
    return tmp_path


MATRIX = ("matrix", "--offline", "--no-report", "--backend", "venv", "--workdir", "work")


def test_an_infrastructure_failure_exits_3_and_is_retried_next_run(stand_in, monkeypatch, capsys):
    monkeypatch.setenv("TB_FAKE_MODE", "crash")
    assert call(*MATRIX, "--allow-no-gpu", "--cells", "dev-w0,dev-w1") == Exit.NO_VERDICT
    out = capsys.readouterr().out
    assert "infra failure" in out and "probe killed by signal SIGSEGV" in out
    monkeypatch.delenv("TB_FAKE_MODE")
    assert call(*MATRIX, "--allow-no-gpu", "--cells", "dev-w0,dev-w1") == Exit.OK
    with Store("reports/results.sqlite") as store:
        latest = store.latest()
        assert [r.status for r in store.runs()].count(RunStatus.INFRA_FAILURE) == 2
    assert {r.cell.id: r.verdict for r in latest} == {
        "dev-w0": Verdict.SKIPPED,
        "dev-w1": Verdict.SKIPPED,
    }


def test_shards_of_the_matrix_probe_each_cell_once(stand_in, capsys):
    for i in (1, 2, 3):
        assert (
            call(
                *MATRIX,
                "--allow-no-gpu",
                "--cells",
                "dev-w0,dev-w1",
                "--shard",
                f"{i}/3",
                "--store",
                f"shard{i}.sqlite",
            )
            == Exit.OK
        )
    assert (
        call(
            "merge",
            "all.sqlite",
            "shard1.sqlite",
            "shard2.sqlite",
            "shard3.sqlite",
            "missing.sqlite",
            "--allow-missing",
            "missing.sqlite",
        )
        == Exit.OK
    )
    assert "missing.sqlite: does not exist, which --allow-missing allows" in (
        capsys.readouterr().out
    )
    with Store("all.sqlite") as store:
        assert sorted(r.cell.id for r in store.runs()) == ["dev-w0", "dev-w1"]


@pytest.mark.slow  # over 2 s on a 2-core machine: out of the fast loop
def test_without_a_gpu_only_the_interpreters_torch_is_probed(stand_in, capsys):
    # Nightlies on an index that cannot answer: without a GPU no index is asked at all.
    with open("matrix.yaml", "a") as fh:
        fh.write(
            "indexes:\n  nightly: http://127.0.0.1:9/nightly/{cuda}/\n"
            "nightly:\n  last: 7\n  cuda: cu130\n"
        )
    code = call(*MATRIX)
    out = capsys.readouterr().out
    with Store("reports/results.sqlite") as store:
        probed = [r.cell.id for r in store.runs()]
    assert "No GPU is visible" in out and "--allow-no-gpu" in out
    if torch_version() is None:  # e.g. a test venv that does not see the system's torch
        assert (code, probed) == (Exit.OK, [])
    else:
        assert (code, probed) == (Exit.OK, ["preinstalled"])
    assert not (stand_in / "work" / "venvs").exists()  # no wheel was installed


def test_probe_runs_one_cell_prints_its_cases_and_stores_it(stand_in, capsys):
    # exit 125 as the probe's own: no GPU, so every case is skipped and it cannot tell
    assert (
        call(
            "probe",
            "dev-w1",
            "--offline",
            "--backend",
            "venv",
            "--workdir",
            "work",
            "--store",
            "reports/results.sqlite",
        )
        == Exit.CANNOT_TELL
    )
    out = capsys.readouterr().out
    assert "dev-w1: skipped" in out and "capture_data_ptr" in out
    with Store("reports/results.sqlite") as store:
        (run,) = store.runs()
    assert run.cell.id == "dev-w1" and run.result.env["torch_version"] == "2.99.1+cpu"


def test_configuration_mistakes_are_one_sentence_and_exit_2(stand_in, capsys):
    assert call(*MATRIX, "--cells", "dev-nope") == Exit.MISTAKE
    assert "--cells: no cell of matrix.yaml can match dev-nope" in capsys.readouterr().err
    assert call(*MATRIX, "--shard", "4/3") == Exit.MISTAKE  # argparse's own: the usage, exit 2
    assert capsys.readouterr().err.startswith("usage: torchbisect matrix ")
    assert call("probe", "dev-w", "--offline") == Exit.MISTAKE
    assert "; did you mean dev-w" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.skipif(
    torch_version() is None, reason="the plan's preinstalled cell needs torch in this interpreter"
)
def test_sharded_rehearsal_renders_the_same_page_as_one_run(stand_in, capsys):
    """The scheduled workflow's shape: shards 1/3 … 3/3 over one matrix, merged, rendered — the
    page must say what a single unsharded run says."""
    from helpers import fake_torch_wheel

    wheels = [fake_torch_wheel(stand_in / "more", f"2.98.{i}+cpu") for i in range(5)]
    extra = "".join(
        f"  - wheel: {w}\n    name: x{i}\n    overlay: true\n" for i, w in enumerate(wheels)
    )
    text = (stand_in / "matrix.yaml").read_text().replace("dev:\n", "dev:\n" + extra)
    (stand_in / "matrix.yaml").write_text(text)
    run = ("matrix", "--offline", "--backend", "venv", "--workdir", "work", "--allow-no-gpu")
    for i in (1, 2, 3):
        assert call(*run, "--no-report", "--shard", f"{i}/3", "--store", f"s{i}.sqlite") == Exit.OK
    assert call("merge", "merged.sqlite", "s1.sqlite", "s2.sqlite", "s3.sqlite") == Exit.OK
    assert call("report", "--store", "merged.sqlite", "--out", "sharded") == Exit.OK
    assert call(*run, "--store", "single.sqlite", "--out", "single") == Exit.OK
    capsys.readouterr()
    with Store("merged.sqlite") as merged, Store("single.sqlite") as single:
        ids = sorted(r.cell.id for r in merged.runs())
        assert ids == sorted(r.cell.id for r in single.runs())
        assert len(ids) == len(set(ids)) == 8  # 7 dev wheels + preinstalled, each once

    def page(folder: str) -> list[str]:
        lines = (stand_in / folder / "summary.md").read_text().splitlines()
        # the line naming the store read differs by its name, and only by it
        return [line for line in lines if not line.startswith(("<sub>Generated", "Measured with"))]

    assert page("sharded") == page("single")
    for folder, store in (("sharded", "merged.sqlite"), ("single", "single.sqlite")):
        assert f"read from {store}." in (stand_in / folder / "summary.md").read_text()
    assert len([line for line in page("single") if line.startswith("| ")]) >= 8
