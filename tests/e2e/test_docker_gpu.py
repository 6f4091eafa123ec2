"""The docker backend on a host whose Docker engine has no NVIDIA Container Toolkit: asking for a
GPU is one sentence and exit 5, before any cell runs, not an engine error per cell.

Against this machine's real engine (marker `docker`), which has no toolkit.  The host's GPU is a
stand-in `nvidia-smi` on PATH: torchbisect asks the engine for a GPU whenever nvidia-smi lists one.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest
from helpers.cli import torchbisect

from torchbisect.backends.docker_gpu import NO_TOOLKIT, require_gpu_support
from torchbisect.errors import BackendUnavailable
from torchbisect.exits import Exit

pytestmark = [
    pytest.mark.docker,
    pytest.mark.skipif(
        shutil.which("nvidia-container-runtime-hook") is not None
        or shutil.which("nvidia-ctk") is not None,
        reason="the NVIDIA Container Toolkit is installed here",
    ),
]
SMI = """#!/bin/sh
if [ "$1" = -L ]; then echo "GPU 0: NVIDIA H200 (UUID: GPU-457b5a25-949a-fdd3-f2af-117c9e1aaa85)"
else echo "0, NVIDIA H200, 580.159.04, GPU-457b5a25-949a-fdd3-f2af-117c9e1aaa85"; fi
"""


def _gpu_checks(client) -> list:
    return client.containers.list(all=True, filters={"label": "torchbisect.step=gpu-check"})


def test_the_engine_refuses_a_gpu_in_one_sentence_and_leaves_no_container():
    import docker

    client = docker.from_env()
    with pytest.raises(BackendUnavailable) as caught:
        require_gpu_support(client)
    assert str(caught.value) == NO_TOOLKIT
    assert caught.value.exit_code == Exit.BACKEND_UNAVAILABLE
    assert _gpu_checks(client) == []


def test_probing_with_the_docker_backend_on_a_gpu_host_exits_5_with_that_sentence(tmp_path):
    pytest.importorskip("torch", reason="the preinstalled cell needs this interpreter's torch")
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.parent.mkdir()
    smi.write_text(SMI)
    smi.chmod(smi.stat().st_mode | stat.S_IXUSR)
    done = torchbisect(
        "probe",
        "preinstalled",
        "--backend",
        "docker",
        "--store",
        tmp_path / "r.sqlite",
        cwd=tmp_path,
        timeout=300,
        env_extra={"PATH": f"{smi.parent}{os.pathsep}{os.environ['PATH']}"},
    )
    said = done.stdout + done.stderr
    assert done.returncode == Exit.BACKEND_UNAVAILABLE, said
    assert NO_TOOLKIT in said.replace("\n", " ")
    assert "Traceback" not in said and "could not select device driver" not in said
    assert not Path(tmp_path / "r.sqlite").exists()  # nothing was run, so nothing stored
