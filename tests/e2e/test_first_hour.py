"""A newcomer's first hour: every piece of advice an error gives works when followed, and nothing
internal (None, n/a, an empty version, "1 cells") reaches what the user reads.

Each advice test provokes the message, checks it names a flag or step the command really has,
then follows it and checks the command now gets past the problem."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import venv
from datetime import date
from pathlib import Path

import pytest
from helpers import IN_CI, REPO, make_cell, make_run, probe_doc, python_with_torch
from helpers.cli import call, torchbisect
from helpers.indexserver import make_nightly_index, make_release_index, serve

from torchbisect.exits import Exit
from torchbisect.model import Cell, Channel, ProbeResult
from torchbisect.net import retry
from torchbisect.report import render_runs


@pytest.fixture
def served(tmp_path, monkeypatch):
    """A matrix on a local index with cu126 and cu130 builds, `cuda: auto`, in a work folder."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(retry, "_sleep", lambda s: None)
    monkeypatch.setattr("torchbisect.utils.gpus.list_gpus", lambda: [])
    root = tmp_path / "site"
    make_release_index(root, {"cu126": ["2.15.0"], "cu130": ["2.15.0"]}, pythons=("cp312",))
    make_nightly_index(root, [date(2026, 10, 1), date(2026, 10, 3)], pythons=("cp312",))
    with serve(root) as url:
        (tmp_path / "matrix.yaml").write_text(
            f"indexes:\n  stable: {url}/whl/{{cuda}}/\n  nightly: {url}/whl/nightly/{{cuda}}/\n"
            "defaults:\n  python: '3.12'\n  cuda: auto\n"
            "stable:\n  versions: [2.15.0]\nnightly:\n  dates: [2026-10-01, 2026-10-03]\n"
            "  cuda: cu130\npreinstalled: true\n"
        )
        yield url


@pytest.fixture(scope="module")
def no_torch_python(tmp_path_factory) -> str:
    """An interpreter that certainly has no torch: a bare venv without system site-packages."""
    where = tmp_path_factory.mktemp("bare") / "venv"
    venv.EnvBuilder(with_pip=False, system_site_packages=False).create(where)
    return str(where / "bin" / "python")


def test_the_driver_note_names_a_flag_that_matrix_takes_and_it_works(
    served, capsys, no_torch_python
):
    assert call("plan", "--platform", "linux_x86_64") == Exit.OK
    out = capsys.readouterr().out
    assert "pass --driver VERSION" in out
    assert "stable-2.15.0-cu130-cp312" in out  # no driver known: the newest tag is assumed
    # Follow the advice on the command the user was running: a 525 driver runs CUDA 12 only.
    assert (
        call(
            "matrix",
            "--driver",
            "525.60.13",
            "--interpreter",
            no_torch_python,
            "--cells",
            "stable-*,preinstalled",
            "--no-report",
        )
        == Exit.OK
    )
    out = capsys.readouterr().out
    assert "--driver" not in out
    builds = json.loads(Path("matrix.lock.json").read_text())["builds"]
    assert "stable-2.15.0-cu126-cp312" in builds and "stable-2.15.0-cu130-cp312" not in builds


def test_plan_offline_without_a_lock_says_to_plan_first_and_that_works(served, capsys):
    assert call("plan", "--offline", "--driver", "580.65.06") == Exit.MISTAKE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "there is none at matrix.lock.json" in err
    assert "run `torchbisect plan` once with network access" in err
    assert call("plan", "--driver", "580.65.06") == Exit.OK  # the advice …
    assert call("plan", "--offline", "--driver", "580.65.06") == Exit.OK  # … and offline works now
    assert "stable-2.15.0-cu130-cp312" in capsys.readouterr().out


def test_probe_of_an_unknown_cell_names_it_and_the_closest_ids(served, capsys):
    # a date the matrix does not list: said before any lock or index is read
    assert call("probe", "nightly-20261002-cu130-cp312", "--offline") == Exit.MISTAKE
    err = capsys.readouterr().err
    assert "no cell of matrix.yaml can match nightly-20261002-cu130-cp312" in err
    assert "did you mean " in err and "nightly-20261001-*" in err
    # a cell the matrix can give, offline without a lock: the lock is what is missing
    assert call("probe", "nightly-20261001-cu130-cp312", "--offline") == Exit.MISTAKE
    err = capsys.readouterr().err
    assert "cannot look up cell 'nightly-20261001-cu130-cp312'" in err and "lock file" in err
    assert call("plan", "--driver", "580.65.06") == Exit.OK
    capsys.readouterr()
    assert call("probe", "nightly-20261001-cu126-cp312", "--offline") == Exit.MISTAKE
    err = capsys.readouterr().err
    assert "no cell 'nightly-20261001-cu126-cp312'" in err
    assert "did you mean " in err and "nightly-20261001-cu130-cp312" in err


def test_an_unreachable_index_in_bisect_points_at_its_own_flag(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(retry, "_sleep", lambda s: None)
    assert (
        call(
            "bisect",
            "--good",
            "2026-10-01",
            "--bad",
            "2026-10-03",
            "--no-github",
            "--index-url",
            "http://127.0.0.1:9/whl/nightly/cu130/",
        )
        == Exit.INDEX_UNREACHABLE
    )
    err = capsys.readouterr().err.splitlines()[-1]
    assert "pass --index-url with a mirror" in err and "matrix.yaml" not in err
    # Following it: the same bisection over a mirror gets past the index (to its ends' check).
    make_nightly_index(
        tmp_path / "mirror",
        [date(2026, 10, 1), date(2026, 10, 3)],
        pythons=(f"cp{sys.version_info.major}{sys.version_info.minor}",),
    )
    with serve(tmp_path / "mirror") as url:
        code = call(
            "bisect",
            "--good",
            "2026-10-01",
            "--bad",
            "2026-10-03",
            "--no-github",
            "--cuda",
            "cu130",
            "--index-url",
            f"{url}/whl/nightly/cu130/",
            "--script",
            "exit 0",
            "--backend",
            "venv",
            "--workdir",
            "work",
        )
    out = capsys.readouterr()
    assert code != Exit.INDEX_UNREACHABLE and "did not give a usable answer" not in out.err
    assert "2026-10-01" in out.out + out.err


def test_probe_of_an_interpreter_without_torch_cannot_tell_and_stores_nothing(
    tmp_path, capsys, monkeypatch, no_torch_python
):
    monkeypatch.chdir(tmp_path)
    for backend in ((), ("--backend", "venv"), ("--backend", "current")):
        # 125, as the probe script itself exits under that interpreter
        assert call("probe", "--interpreter", no_torch_python, *backend) == Exit.CANNOT_TELL
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "has no torch" in err and "--backend venv" not in err
        assert "cannot tell: the interpreter" in err
        assert "pass --interpreter with an interpreter that has one" in err
    assert not Path("reports/results.sqlite").exists()


@pytest.mark.slow  # a real probe run / a real nox session
def test_probe_advice_followed_with_an_interpreter_that_has_torch(tmp_path, no_torch_python):
    with_torch = python_with_torch("{}.{}".format(*sys.version_info[:2]))
    if with_torch is None:
        (pytest.fail if IN_CI else pytest.skip)("following the advice needs a Python with torch")
    argv = ("probe", "--cases", "capture_data_ptr")
    bad = torchbisect(*argv, "--interpreter", no_torch_python, cwd=tmp_path, timeout=300)
    assert bad.returncode == Exit.CANNOT_TELL  # cannot tell, as the probe script says there
    good = torchbisect(*argv, "--interpreter", with_torch, cwd=tmp_path, timeout=300)
    refused = (Exit.MISTAKE, Exit.NO_VERDICT, Exit.BACKEND_UNAVAILABLE)
    assert good.returncode not in refused, good.stdout + good.stderr
    assert "without a GPU" in good.stdout or "on " in good.stdout.splitlines()[0]
    assert "on none" not in good.stdout
    assert not list(tmp_path.iterdir())  # a one-off probe stores nothing unless --store asks


# ---- nothing internal leaks ------------------------------------------------------------------

NOW = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.timezone.utc)


def _image_run(**env):
    cell = Cell(
        id="preinstalled",
        channel=Channel.PREINSTALLED,
        version="",
        cuda="",
        python="",
        base_image="nvcr.io/nvidia/pytorch:26.10-py3",
    )
    doc = probe_doc("skipped")
    doc["env"] = {"torch": "2.13.0+cpu", "cuda_runtime": None, "driver": None, **env}
    return make_run(cell, gpu="none", driver="", result=ProbeResult.from_json(doc))


def test_a_cpu_torch_without_gpu_reads_as_such_on_every_output(tmp_path):
    render_runs([_image_run()], [], tmp_path, generated=NOW)
    page = (tmp_path / "index.html").read_text()
    summary = (tmp_path / "summary.md").read_text()
    assert "None" not in page and "None" not in summary
    assert "skipped (no GPU)" in summary and "n/a" not in summary
    assert "no CUDA runtime" in summary and "driver ?" not in summary
    assert "no CUDA GPU was visible" in page  # the legend explains the skipped mark


def test_an_images_preinstalled_torch_has_its_version_everywhere(tmp_path):
    render_runs([_image_run()], [], tmp_path, generated=NOW)
    results = json.loads((tmp_path / "results.json").read_text())
    (cell,) = [r["cell"] for r in results["runs"]]
    assert cell["version"] == "2.13.0+cpu" and cell["cuda"] == "cpu"
    assert "| 2.13.0 | stable, preinstalled |" in (tmp_path / "summary.md").read_text()
    page = (tmp_path / "index.html").read_text()
    # the build's name is the release, its CUDA tag on the line below, the full version in its
    # details
    assert '<span class="ver">2.13.0</span><span class="sub">cpu · py' in page
    assert "<dd>2.13.0+cpu</dd>" in page


def test_plan_names_an_images_torch_and_counts_in_english(capsys):
    from torchbisect.commands.plan_table import source_of

    image = Cell(
        id="preinstalled",
        channel=Channel.PREINSTALLED,
        version="",
        cuda="",
        python="",
        base_image="nvcr.io/nvidia/pytorch:26.10-py3",
    )
    assert source_of(image) == "the torch in image nvcr.io/nvidia/pytorch:26.10-py3"
    assert (
        source_of(make_cell("preinstalled", channel=Channel.PREINSTALLED, url=None, python="3.12"))
        == "the torch of the interpreter running torchbisect"
    )


def test_one_cell_is_one_cell(served, capsys):
    Path("matrix.yaml").write_text("preinstalled: true\n")
    assert call("plan", "--driver", "580.65.06") == Exit.OK
    assert "1 cell, 0 requested builds missing" in capsys.readouterr().out


def test_cells_selects_before_planning_and_without_a_gpu_names_the_cells_not_probed(
    served, capsys, no_torch_python
):
    """The README's "start small": `--cells 'stable-2.15*'` reads only the stable indexes (the
    nightly entry cannot give such a cell, so its index is never asked), and without a GPU it
    says which selected cells it did not probe instead of probing some other torch."""
    assert (
        call("matrix", "--cells", "stable-2.15*", "--interpreter", no_torch_python, "--no-report")
        == Exit.OK
    )
    out = " ".join(capsys.readouterr().out.split())  # however the console wraps it
    assert "these selected cells are not probed: stable-2.15.0-cu130-cp312;" in out
    assert "--allow-no-gpu" in out and "torch of" not in out  # no other torch stands in
    # what --allow-no-gpu would cost is said with it (issue 49, friction 6)
    assert (
        "--allow-no-gpu would install and probe them anyway (1 download: the torch wheel of "
        "each build alone is 0.7-1 GB)" in out
    )
    # `cuda: auto` reads the stable index of every CUDA tag; the nightly index is never asked.
    assert served.hits and all(h.startswith("/whl/cu") for h in served.hits)
    builds = json.loads(Path("matrix.lock.json").read_text())["builds"]
    assert list(builds) == ["stable-2.15.0-cu130-cp312"]


@pytest.mark.slow
def test_cells_selects_before_planning_on_the_path_that_probes(served, capsys, tmp_path):
    """The same selection where cells are installed and probed (a GPU, or --allow-no-gpu): the
    nightly index is not asked either; a wheel that cannot be fetched is an infrastructure
    failure of the one selected cell."""
    assert (
        call(
            "matrix",
            "--cells",
            "stable-2.15*",
            "--allow-no-gpu",
            "--backend",
            "venv",
            "--workdir",
            str(tmp_path / "work"),
            "--no-report",
        )
        == Exit.NO_VERDICT
    )
    assert "stable-2.15.0-cu130-cp312" in capsys.readouterr().out
    assert served.hits and not [h for h in served.hits if h.startswith("/whl/nightly/")]


def test_without_a_gpu_the_way_to_run_every_cell_says_its_cost_and_suggests_cells(no_torch_python):
    """It said "pass --allow-no-gpu to run every cell anyway": about 30 downloads of 0.7-1 GB
    each, to read `skipped` (issue 49, friction 6)."""
    from torchbisect.run.no_gpu import no_gpu_cells

    lines: list[str] = []
    assert no_gpu_cells((), python=no_torch_python, backend=None, say=lines.append) == (
        (),
        "current",
    )
    [said] = lines
    assert said.endswith(
        "--allow-no-gpu would install and probe every cell anyway, though a probe "
        "that needs a GPU tells nothing without one: the torch wheel of each build "
        "alone is 0.7-1 GB, "
        "and `torchbisect plan` gives the total, so choose a few with --cells "
        "first."
    )


def test_without_a_gpu_the_docker_backend_probes_the_images_torch(no_torch_python):
    from torchbisect.run.no_gpu import no_gpu_cells

    image = Cell(
        id="preinstalled",
        channel=Channel.PREINSTALLED,
        version="",
        cuda="",
        python="",
        base_image="torchbisect/base:bookworm-torch",
    )
    lines = []
    cells, backend = no_gpu_cells(
        (image,), python=no_torch_python, backend="docker", say=lines.append
    )
    said = "\n".join(lines)
    assert cells == (image,) and backend == "docker"
    assert "the torch in image torchbisect/base:bookworm-torch is probed" in said
    assert "has no torch" not in said


# ---- the first page ----------------------------------------------------------------------------


def test_an_empty_page_says_why_and_links_the_committed_examples(
    tmp_path, no_torch_python, monkeypatch, capsys
):
    for name in ("sample", "h200"):
        (tmp_path / "reports" / name).mkdir(parents=True)
        (tmp_path / "reports" / name / "index.html").write_text("<html></html>")
    (tmp_path / "matrix.yaml").write_text("preinstalled: true\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("torchbisect.utils.gpus.list_gpus", lambda: [])
    assert call("matrix", "--interpreter", no_torch_python) == Exit.OK
    page = (tmp_path / "reports" / "index.html").read_text()
    assert "No GPU is visible" in page and "has no torch" in page
    assert 'href="sample/index.html"' in page and 'href="h200/index.html"' in page
    assert "No GPU is visible" in (tmp_path / "reports" / "summary.md").read_text()
    # Another --out still links the checkout's committed pages, relative to where it is.
    assert call("report", "--store", "reports/results.sqlite", "--out", "elsewhere/page") == Exit.OK
    page = (tmp_path / "elsewhere" / "page" / "index.html").read_text()
    assert 'href="../../reports/sample/index.html"' in page
    assert "Nothing has been probed into this store yet" in page


# ---- the test command itself ---------------------------------------------------------------------


@pytest.mark.slow  # a real probe run / a real nox session
def test_nox_tests_runs_the_sessions_own_pytest_whatever_the_base_holds(tmp_path):
    """The base interpreter here has pytest but not torchbisect: a session that ran the base's
    pytest (as `session.run("pytest")` did with --system-site-packages) could not import it."""
    import shutil

    nox = shutil.which("nox")
    if nox is None:
        (pytest.fail if IN_CI else pytest.skip)("nox is not installed")
    repo = REPO
    for name in ("noxfile.py", "pyproject.toml", "setup.py", "README.md", "LICENSE"):
        shutil.copy(repo / name, tmp_path / name)
    shutil.copytree(
        repo / "src", tmp_path / "src", ignore=shutil.ignore_patterns("*.egg-info", "__pycache__")
    )
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_smoke.py").write_text(
        "import torchbisect\n\n\ndef test_the_package_is_the_checkouts():\n"
        f"    assert torchbisect.__file__.startswith({str(tmp_path / 'src')!r})\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the copy's, no other
    done = subprocess.run(
        [nox, "-s", "tests", "--", "-p", "no:cacheprovider", "-o", "addopts="],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout + done.stderr
    assert "pytest is not installed into the virtualenv" not in done.stderr


def test_without_a_gpu_and_no_preinstalled_entry_the_matrixs_own_probes_run(tmp_path):
    """`probe: check` under `defaults:` and `preinstalled: false`: without a GPU the
    interpreter's torch was probed with the shipped stale_replay, and its page drawn."""
    project = tmp_path / "project"
    (project / "probes").mkdir(parents=True)
    (project / "probes" / "check.py").write_text(
        '"""My own regression."""\nimport sys\n\nimport torch\n\nsys.exit(0)\n'
    )
    (project / "matrix.yaml").write_text(
        "defaults:\n  probe: check\npreinstalled: false\nstable:\n"
        "  - versions: [2.10.0]\n    cuda: cpu\n"
    )
    if shutil.which("nvidia-smi"):
        pytest.skip("this machine has a GPU: the no-GPU path is not taken")
    python = python_with_torch("{}.{}".format(*sys.version_info[:2]))
    if python is None:
        (pytest.fail if IN_CI else pytest.skip)("no Python here has torch")
    done = torchbisect("matrix", "--interpreter", python, "--backend", "current", cwd=project)
    assert done.returncode == Exit.OK, done.stderr
    assert "preinstalled.check" in done.stdout, done.stdout
    assert (project / "reports" / "check.py").is_file()
    assert not (project / "reports" / "stale_replay.py").exists()


def test_a_matrix_that_probed_nothing_draws_its_own_probes_empty_page(
    tmp_path, no_torch_python, monkeypatch
):
    """`defaults: probe: check`, no GPU and an interpreter without torch: nothing is probed,
    and the empty page was the shipped stale_replay's ("torch._lazy_clone copies …", its
    script offered for download) for a matrix that never named it."""
    (tmp_path / "probes").mkdir()
    (tmp_path / "probes" / "check.py").write_text(
        '"""My model returns zeros."""\nimport sys\n\nimport torch\n\nsys.exit(0)\n'
    )
    (tmp_path / "matrix.yaml").write_text(
        "defaults:\n  probe: check\npreinstalled: false\nstable:\n"
        "  - versions: [2.10.0]\n    cuda: cpu\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("torchbisect.utils.gpus.list_gpus", lambda: [])
    assert call("matrix", "--interpreter", no_torch_python, "--offline") == Exit.OK
    summary = (tmp_path / "reports" / "summary.md").read_text()
    assert summary.startswith("## My model returns zeros.") and "No results yet" in summary
    assert "_lazy_clone" not in (tmp_path / "reports" / "index.html").read_text()
    assert (tmp_path / "reports" / "check.py").is_file()
    assert not (tmp_path / "reports" / "stale_replay.py").exists()
