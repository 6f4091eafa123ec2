"""`torchbisect preflight`, the step a GPU job runs before probing: the backend the run will choose
must give its probes the GPUs.

The docker cases run against this machine's real engine (marker `docker`), which has no NVIDIA
Container Toolkit: exactly the runner that must fail at preflight, in one sentence, with exit 5.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest
from helpers.cli import torchbisect

from torchbisect.backends.docker_gpu import NO_TOOLKIT
from torchbisect.exits import Exit

IMAGE = "torchbisect/base:bookworm"  # on the host already (.ci/docker-setup.sh): nothing pulled
no_toolkit = pytest.mark.skipif(
    shutil.which("nvidia-container-runtime-hook") is not None or shutil.which("nvidia-ctk"),
    reason="the NVIDIA Container Toolkit is installed here",
)


def _preflight(tmp_path, *args: str) -> subprocess.CompletedProcess:
    done = torchbisect(
        "preflight",
        "--image",
        IMAGE,
        "--workdir",
        tmp_path / "work",
        *args,
        cwd=tmp_path,
        timeout=300,
    )
    assert "Traceback" not in done.stdout + done.stderr
    return done


def _leftovers() -> list:
    import docker

    return docker.from_env().containers.list(
        all=True, filters={"label": ["torchbisect.step=gpu-check"]}
    ) + docker.from_env().containers.list(
        all=True, filters={"label": ["torchbisect.cell=gpu-preflight"]}
    )


@pytest.mark.docker
@no_toolkit
@pytest.mark.parametrize(
    "how", [["--backend", "docker"], ["--flags=--overlay --backend=docker"], []]
)
def test_a_runner_whose_docker_cannot_attach_a_gpu_fails_in_one_sentence(tmp_path, how):
    """Named, named among the run's flags, or chosen because an engine answers: exit 5."""
    done = _preflight(tmp_path, *how)
    said = done.stdout + done.stderr
    assert done.returncode == Exit.BACKEND_UNAVAILABLE, said
    assert said.strip().splitlines()[-1] == f"torchbisect preflight: error: {NO_TOOLKIT}"
    assert "could not select device driver" not in said
    if not how:
        assert "backend: docker (a Docker engine answers" in said
    assert _leftovers() == []


@pytest.mark.parametrize("flags", ["--backend venv --overlay", "--index-url x --script ./t.sh"])
def test_a_run_on_the_venv_backend_has_nothing_to_check(tmp_path, flags):
    done = _preflight(tmp_path, f"--flags={flags}")
    said = done.stdout + done.stderr
    assert done.returncode == Exit.OK, said
    assert "the venv backend probes on this host, not in a container" in said


@pytest.mark.parametrize(
    "flags, error",
    [
        ("--backend", "argument --backend: expected one argument"),
        ("--backend 'venv", "No closing quotation"),
        ("--backend=podman", "unknown backend 'podman'"),
    ],
)
def test_flags_the_run_would_refuse_are_refused_before_it(tmp_path, flags, error):
    done = _preflight(tmp_path, f"--flags={flags}")
    said = done.stdout + done.stderr
    assert done.returncode == Exit.MISTAKE, said
    assert said.count("\n") == 1 and error in said
