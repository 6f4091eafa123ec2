"""torchbisect installs as a tool: `uv build` makes an sdist and a wheel that carry the probes and
the default matrix, and the wheel, installed into a fresh venv, probes (writing nothing) and runs
its whole job from an empty folder, its results in the per-user data folder; the probe the
rendered site carries runs on its own.

The build runs on a copy of the files git tracks (what a clone holds), so it writes nothing into
the checkout; the venv has no PYTHONPATH and no TORCHBISECT_PROBES, so the probe the command runs
can only be the one inside the wheel.
"""

from __future__ import annotations

import email
import json
import os
import re
import shlex
import shutil
import sqlite3
import subprocess
import sys
import tarfile
import zipfile
from datetime import date
from pathlib import Path

import pytest
from helpers import IN_CI, REPO, python_with_torch
from helpers.indexserver import make_nightly_index, make_release_index, serve

from torchbisect.exits import Exit
from torchbisect.probe.scripts import probe_version

pytestmark = pytest.mark.slow

# what `torchbisect probe` may answer here: a verdict, or cannot tell (no GPU)
ANSWERS = (Exit.OK, Exit.AFFECTED, Exit.CANNOT_TELL)


def _need(what: str, found: str | None) -> str:
    if found is None:
        (pytest.fail if IN_CI else pytest.skip)(f"{what} is not available")
    return found


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """The sdist and the wheel `uv build` makes from a copy of the tracked files."""
    uv = _need("uv", shutil.which("uv"))
    tmp = tmp_path_factory.mktemp("build")
    names = (
        subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=REPO,
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .split("\0")
    )
    for name in filter(None, names):
        if (REPO / name).is_file():
            (tmp / "tree" / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, tmp / "tree" / name)
    done = subprocess.run(
        [uv, "build", "--out-dir", str(tmp / "dist"), str(tmp / "tree")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return tmp / "dist"


def test_the_wheel_and_the_sdist_carry_the_probes_and_the_license(built):
    (wheel,) = built.glob("torchbisect-*.whl")
    (sdist,) = built.glob("torchbisect-*.tar.gz")
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        for script in ("stale_replay.py", "script.py"):
            shipped = zf.read(f"torchbisect/_probes/{script}")
            assert shipped == (REPO / "probes" / script).read_bytes()
        assert zf.read("torchbisect/_data/matrix.yaml") == (REPO / "matrix.yaml").read_bytes()
        meta = email.message_from_bytes(zf.read(next(n for n in names if n.endswith("METADATA"))))
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert meta["License-Expression"] == "BSD-3-Clause" and meta["License-File"] == "LICENSE"
    with tarfile.open(sdist) as tar:
        inside = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    assert {"LICENSE", "probes/stale_replay.py", "probes/script.py", "setup.py"} <= inside


def test_the_installed_tool_probes_and_runs_a_matrix_outside_a_checkout(built, tmp_path):
    uv = _need("uv", shutil.which("uv"))
    (wheel,) = built.glob("torchbisect-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([uv, "venv", "-q", "-p", sys.executable, str(venv)], check=True, timeout=120)
    done = subprocess.run(
        [uv, "pip", "install", "-q", "-p", str(venv / "bin" / "python"), str(wheel)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    tool = str(venv / "bin" / "torchbisect")
    work = tmp_path / "work"
    work.mkdir()
    home = tmp_path / "data"  # the per-user data folder (platformdirs reads XDG_DATA_HOME)
    env = {
        **{
            k: v
            for k, v in os.environ.items()
            if k not in ("PYTHONPATH", "TORCHBISECT_PROBES", "VIRTUAL_ENV")
        },
        "XDG_DATA_HOME": str(home),
    }

    def run(*argv: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [tool, *argv], cwd=work, env=env, capture_output=True, text=True, timeout=600
        )

    version = run("--version")
    assert version.returncode == Exit.OK and version.stdout.strip() == "torchbisect 0.1.0"

    # uvx's or pipx's environment has no torch: one line says which interpreter to name
    bare = run("probe")
    assert bare.returncode not in (Exit.OK, Exit.AFFECTED), bare.stderr
    assert bare.stderr.count("\n") == 1, bare.stderr
    assert "the interpreter running torchbisect" in bare.stderr
    assert '--interpreter "$(command -v python3)"' in bare.stderr

    here = "{}.{}".format(*sys.version_info[:2])
    torch_python = _need(f"a Python {here} with torch", python_with_torch(here))
    probed = run("probe", "--interpreter", torch_python, "--backend", "current")
    assert probed.returncode in ANSWERS, probed.stdout + probed.stderr  # a verdict, or no GPU
    assert "Traceback" not in probed.stderr
    assert not list(work.iterdir()) and not home.exists()  # a one-off probe writes nothing
    kept = run(
        "probe",
        "--interpreter",
        torch_python,
        "--backend",
        "current",
        "--store",
        str(tmp_path / "kept.sqlite"),
    )
    assert kept.returncode == probed.returncode, kept.stdout + kept.stderr
    with sqlite3.connect(tmp_path / "kept.sqlite") as db:
        (stored,) = db.execute("SELECT probe_version FROM runs").fetchall()
    assert stored[0] == probe_version()  # the wheel's copy of the checkout's probe

    # The main job from an empty folder: the packaged matrix, results in the data folder.
    # Without a GPU only the preinstalled torch is probed, so no index is asked.
    whole = run("matrix", "--interpreter", torch_python, "--backend", "venv")
    assert whole.returncode == Exit.OK, whole.stdout + whole.stderr
    assert "no matrix.yaml here, so torchbisect's default matrix is planned" in whole.stderr
    data = home / "torchbisect"
    assert (data / "matrix.yaml").read_text() == (REPO / "matrix.yaml").read_text()
    assert (data / "reports" / "index.html").is_file() and not list(work.iterdir())
    report = run("report")
    assert report.returncode == Exit.OK, report.stdout + report.stderr
    assert str(data / "reports" / "index.html") in report.stdout
    # `init` makes the folder a project: its matrix.yaml, then its own reports/
    assert run("init").returncode == Exit.OK
    assert (work / "matrix.yaml").read_text() == (REPO / "matrix.yaml").read_text()
    assert run("init").returncode == Exit.MISTAKE  # never overwritten without --force
    (work / "matrix.yaml").unlink()
    (work / "matrix.schema.json").unlink()

    (work / "small.yaml").write_text("preinstalled: true\n")
    matrix = run(
        "matrix",
        "--matrix",
        "small.yaml",
        "--interpreter",
        torch_python,
        "--backend",
        "current",
        "--out",
        "site",
    )
    assert matrix.returncode == Exit.OK, matrix.stdout + matrix.stderr
    assert "preinstalled" in matrix.stdout and (work / "site" / "index.html").is_file()

    # The page's self-check, as a reader who downloaded the file beside it runs it.
    alone = subprocess.run(
        [torch_python, "stale_replay.py", "--cases", "capture_data_ptr"],
        cwd=work / "site",
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert alone.returncode in (0, 1, 125), alone.stderr
    assert json.loads(alone.stdout)["probe"] == "stale_replay"


def _readme_block(heading: str) -> list[str]:
    """The command lines of the first code block under `## heading` in README.md."""
    section = (REPO / "README.md").read_text(encoding="utf-8").split(f"\n## {heading}\n", 1)[1]
    block = re.search(r"(?:^ {4}\S.*\n)+", section.split("\n## ", 1)[0], re.MULTILINE)
    return [re.split(r"\s{2,}#", line.strip(), maxsplit=1)[0] for line in block[0].splitlines()]


def test_the_readmes_commands_run_as_written_from_an_empty_folder(built, tmp_path):
    """ "Check your own torch" and "The main job", line by line, with the installed wheel in a
    folder that is no checkout; the matrix `init` writes is pointed at a local index (the real
    one is out of reach here), and the interpreter the README calls ~/venv/bin/python is one
    that has torch."""
    uv = _need("uv", shutil.which("uv"))
    here = "{}.{}".format(*sys.version_info[:2])
    torch_python = _need(f"a Python {here} with torch", python_with_torch(here))
    (wheel,) = built.glob("torchbisect-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([uv, "venv", "-q", "-p", sys.executable, str(venv)], check=True, timeout=120)
    subprocess.run(
        [uv, "pip", "install", "-q", "-p", str(venv / "bin" / "python"), str(wheel)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    work = tmp_path / "work"
    work.mkdir()
    env = {
        **{
            k: v
            for k, v in os.environ.items()
            if k not in ("PYTHONPATH", "TORCHBISECT_PROBES", "VIRTUAL_ENV")
        },
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "UV_CACHE_DIR": str(tmp_path / "uv"),
        "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}",
    }

    def run(line: str, cwd: Path = work) -> subprocess.CompletedProcess:
        argv = shlex.split(line.replace("~/venv/bin/python", torch_python))
        if argv[0] == "python":
            argv[0] = torch_python
        done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
        assert "Traceback" not in done.stderr, f"{line}:\n{done.stderr}"
        return done

    check = _readme_block("Check your own torch")
    assert check[0] == "python probes/stale_replay.py"
    assert run(check[0], cwd=REPO).returncode in (0, 1, 125)  # the probe script's own statuses
    for line in check[1:]:  # the venv's own python has no torch: one sentence, no verdict
        done = run(line)
        assert done.returncode in ANSWERS or "has no torch" in done.stderr, done.stderr
    assert not list(work.iterdir())  # a one-off probe writes nothing

    root = tmp_path / "site"
    make_release_index(root, {"cu126": ["2.15.0"], "cu130": ["2.15.0"]}, pythons=("cp312",))
    make_nightly_index(root, [date.today()], pythons=("cp312",))
    main_job = _readme_block("The main job")
    assert [line.split()[:2] for line in main_job] == [
        ["torchbisect", "init"],
        ["torchbisect", "plan"],
        ["torchbisect", "matrix"],
    ]
    with serve(root) as url:
        assert run(main_job[0]).returncode == Exit.OK
        with (work / "matrix.yaml").open("a") as matrix:
            matrix.write(
                f"indexes:\n  stable: {url}/whl/{{cuda}}/\n"
                f"  test: {url}/whl/test/{{cuda}}/\n"
                f"  nightly: {url}/whl/nightly/{{cuda}}/\n"
            )
        planned = run(main_job[1])
        assert planned.returncode == Exit.OK, planned.stdout + planned.stderr
        assert "stable-2.15.0-cu130-cp312" in planned.stdout
        probed = run(main_job[2])
        assert probed.returncode == Exit.OK, probed.stdout + probed.stderr
    assert (work / "reports" / "index.html").is_file()  # init made the folder a project
