"""A self-hosted runner that is not root can delete what the docker backend's containers wrote.

The containers run as root; the venv they install and everything a probe leaves in it must
belong to the user running torchbisect, or the runner's next checkout or temp-folder cleanup fails
on root-owned files.  Here the test process is root, so "the user running torchbisect" is made
uid/gid 4242 for the backend; the Docker engine, containers, uv and the probe are real.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from act.wheels import standin_wheel
from helpers import FAKE_PROBES

from torchbisect.backends import docker as docker_backend
from torchbisect.backends.base import BackendOptions
from torchbisect.backends.docker import DockerBackend
from torchbisect.model import Cell, Channel

BASE = "torchbisect/base:bookworm"


@pytest.mark.docker
def test_the_venv_and_what_a_probe_leaves_belong_to_the_invoking_user(
    tmp_path, monkeypatch, fake_probes
):
    import docker

    client = docker.from_env()
    if not client.images.list(name=BASE):
        pytest.fail(f"image {BASE} is missing: run .ci/docker-setup.sh")
    (tmp_path / "wheels").mkdir()
    wheel = standin_wheel(tmp_path / "wheels", "2.17.0.dev20261130+cpu", stale=True, git="0" * 40)
    cell = Cell(
        id=f"dev-owner-{uuid.uuid4().hex[:8]}",
        channel=Channel.DEV,
        version="2.17.0.dev20261130+cpu",
        cuda="cpu",
        python="3.11",
        url=str(wheel),
        base_image=BASE,
        timeout=120,
    )
    fake_probes(FAKE_PROBES)
    monkeypatch.setattr(docker_backend.os, "getuid", lambda: 4242)
    monkeypatch.setattr(docker_backend.os, "getgid", lambda: 4242)
    backend = DockerBackend(BackendOptions(workdir=tmp_path / "work", client=client))
    backend.check()

    prepared = backend.prepare(cell, log=tmp_path / "install.log")
    out = backend.probe(prepared, gpu=None, probe_args=[], log=tmp_path / "probe.log")
    backend.release(prepared)

    assert out.exit_code == 1  # the stand-in torch says it is affected: the probe really ran
    venv = Path(prepared.python).parent.parent
    owners = {
        (p.stat().st_uid, p.stat().st_gid) for p in [venv, *venv.rglob("*")] if not p.is_symlink()
    }
    assert owners == {(4242, 4242)}, f"files in {venv} not handed back: {owners}"
    assert not list(venv.rglob("__pycache__"))  # the probe's bytecode stayed in the container
