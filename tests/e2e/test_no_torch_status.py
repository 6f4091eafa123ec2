"""Issue 52.6: matrix.yaml's `preinstalled.interpreter` is the torch a run without a GPU probes,
whatever Python runs torchbisect; and "this Python has no torch" is one status, 125 (cannot tell,
as the probe script itself exits there), from `probe` and `matrix` alike.

Real parts: a bare venv (no torch) made by the standard library, the interpreter running these
tests (torch installed), torchbisect run as a user's shell runs it, its store."""

from __future__ import annotations

import sys
import venv
from pathlib import Path

import pytest
from helpers.cli import one_sentence, torchbisect

from torchbisect.exits import Exit
from torchbisect.store.db import Store

pytest.importorskip("torch")  # the interpreter of the tests is the one that has a torch

MINE = 'import sys\nimport torch\nprint("not affected: torch %s" % torch.__version__)\n'


@pytest.fixture(scope="module")
def bare(tmp_path_factory) -> str:
    """An interpreter that certainly has no torch."""
    where = tmp_path_factory.mktemp("bare") / "venv"
    venv.EnvBuilder(with_pip=False, system_site_packages=False).create(where)
    return str(where / "bin" / "python")


def _project(tmp_path: Path, interpreter: str) -> Path:
    (tmp_path / "matrix.yaml").write_text(
        f"preinstalled: {{interpreter: '{interpreter}', probe: mine}}\n"
    )
    (tmp_path / "probes").mkdir()
    (tmp_path / "probes" / "mine.py").write_text(MINE)
    return tmp_path


def test_without_a_gpu_the_matrix_probes_the_interpreter_matrix_yaml_names(tmp_path, bare):
    # torchbisect's own Python (as the backend sees it) has no torch; matrix.yaml names one that
    # has: it exited 5 ("the interpreter running torchbisect has no torch"), ignoring it
    project = _project(tmp_path, sys.executable)
    done = torchbisect(
        "matrix", "--no-report", cwd=project, env_extra={"TORCHBISECT_HOST_PYTHON": bare}
    )
    assert done.returncode == Exit.OK, done.stderr
    assert f"only the torch of {sys.executable} is probed" in done.stdout + done.stderr
    with Store(project / "reports" / "results.sqlite") as store:
        (run,) = store.latest()
    assert run.cell.probe == "mine" and run.verdict is not None
    assert run.verdict.value == "not_affected"


def test_an_interpreter_without_torch_is_cannot_tell_from_probe_and_matrix(tmp_path, bare):
    project = _project(tmp_path, bare)
    done = torchbisect("probe", "--interpreter", bare, cwd=project)
    said = one_sentence(done.stderr, done.returncode, Exit.CANNOT_TELL, command="probe")
    assert "has no torch" in said
    # the run's torch is that interpreter's alone: it exited 5, "a backend that cannot run here"
    done = torchbisect(
        "matrix",
        "--allow-no-gpu",
        "--backend",
        "current",
        "--no-report",
        cwd=project,
        env_extra={"TORCHBISECT_HOST_PYTHON": bare},
    )
    said = one_sentence(
        done.stderr.replace(_note(done.stderr), ""),
        done.returncode,
        Exit.CANNOT_TELL,
        command="matrix",
    )
    assert f"{bare} has no torch" in said


def _note(stderr: str) -> str:
    """What matrix says before its error (the plan's notes), left out of the one sentence."""
    lines = stderr.strip().splitlines()
    return "\n".join(lines[:-1]) + "\n" if len(lines) > 1 else ""
