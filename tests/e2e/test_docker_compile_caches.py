"""The docker backend keeps each build's Inductor and Triton caches between its probe runs, in a
named volume of the engine's (no root-owned file on the host), and `torchbisect cache` counts
and `--prune` removes those volumes.

On the real engine with the offline base image `torchbisect/base:bookworm` and stand-in torch
wheels (act.wheels); the deployment is the test's own (TORCHBISECT_UV_CACHE_VOLUME), so the
machine's shared volumes are never touched and every volume the test made is removed after it.
The probe stands in for a compile: it writes a marker into $TORCHINDUCTOR_CACHE_DIR and says
whether it was already there, as a warm Inductor cache would be.
"""

from __future__ import annotations

import contextlib
import json
import re
import textwrap
import uuid
from pathlib import Path

import pytest
from act.wheels import standin_wheel
from helpers.cli import torchbisect

from torchbisect.backends import docker as docker_backend
from torchbisect.backends.base import BackendOptions, Prepared
from torchbisect.backends.docker import DockerBackend
from torchbisect.backends.docker_compile import COMPILE_CACHE, COMPILE_LABEL
from torchbisect.exits import Exit
from torchbisect.model import Cell, Channel

pytestmark = pytest.mark.docker
BASE = "torchbisect/base:bookworm"

CACHE_PROBE = """
    import argparse, json, os, torch
    parser = argparse.ArgumentParser()
    parser.add_argument("--json")
    args, _ = parser.parse_known_args()
    caches = {k: os.environ.get(k) for k in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")}
    seen = None
    if caches["TORCHINDUCTOR_CACHE_DIR"]:  # a compile's stand-in: what a warm cache would hold
        marker = os.path.join(caches["TORCHINDUCTOR_CACHE_DIR"], "kernel.marker")
        seen = os.path.exists(marker)
        os.makedirs(os.path.dirname(marker), exist_ok=True)
        with open(marker, "w") as fh:
            fh.write("compiled")
    case = {"verdict": "skipped", "detail": "no CUDA device"}
    doc = {"schema": 1, "probe": "stale_replay", "probe_version": "0", "verdict": "skipped",
           "cases": {"capture_data_ptr": case},
           "env": {"caches": caches, "seen": seen, "torch": torch.__version__}}
    with open(args.json, "w") as fh:
        json.dump(doc, fh)
"""


@pytest.fixture
def client():
    import docker

    client = docker.from_env()
    if not client.images.list(name=BASE):
        pytest.fail(f"image {BASE} is missing: run .ci/docker-setup.sh")
    return client


@pytest.fixture
def deployment(client, monkeypatch):
    """This test's deployment: its own uv cache volume, whose name labels its compile volumes."""
    import docker

    name = f"torchbisect-test-uv-{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("TORCHBISECT_UV_CACHE_VOLUME", name)
    yield name
    for volume in client.volumes.list(filters={"label": f"{COMPILE_LABEL}={name}"}):
        with contextlib.suppress(docker.errors.APIError):
            volume.remove(force=True)
    with contextlib.suppress(docker.errors.APIError):
        client.volumes.get(name).remove(force=True)


@pytest.fixture
def cache_probe(tmp_path, fake_probes):
    folder = tmp_path / "probes"
    folder.mkdir()
    (folder / "stale_replay.py").write_text(
        'PROBE_OUTPUT = "document"\n' + textwrap.dedent(CACHE_PROBE)
    )
    fake_probes(folder)
    return folder


def _cell(tmp_path: Path, version: str, **changes) -> Cell:
    folder = tmp_path / "wheels" / version
    folder.mkdir(parents=True)
    wheel = standin_wheel(folder, version, stale=False, git="0" * 40)
    return Cell(
        id=f"dev-compile-{uuid.uuid4().hex[:8]}",
        channel=Channel.DEV,
        version=version,
        cuda="cpu",
        python="3.11",
        url=str(wheel),
        base_image=BASE,
        timeout=120,
        **changes,
    )


def _backend(client, tmp_path: Path) -> DockerBackend:
    return DockerBackend(BackendOptions(workdir=tmp_path / "work", client=client))


def _probed(backend: DockerBackend, prepared: Prepared, log: Path) -> dict:
    """What the probe said of its caches."""
    out = backend.probe(prepared, gpu=None, probe_args=[], log=log)
    backend.release(prepared)
    assert out.json_text, log.read_text()
    env: dict = json.loads(out.json_text)["env"]
    return env


def _volumes(client, deployment: str) -> list[str]:
    return sorted(
        v.name for v in client.volumes.list(filters={"label": f"{COMPILE_LABEL}={deployment}"})
    )


def test_a_rerun_of_a_build_finds_what_its_first_probe_compiled_and_builds_never_share(
    client, deployment, cache_probe, tmp_path
):
    one, two = _cell(tmp_path, "2.17.0.dev20261130+cpu"), _cell(tmp_path, "2.17.0.dev20261201+cpu")
    log = tmp_path / "probe.log"
    backend = _backend(client, tmp_path)
    first = _probed(backend, backend.prepare(one, log=log), log)
    assert first["seen"] is False  # cold: nothing compiled yet
    assert first["caches"] == {
        "TORCHINDUCTOR_CACHE_DIR": f"{COMPILE_CACHE}/inductor",
        "TRITON_CACHE_DIR": f"{COMPILE_CACHE}/triton",
    }

    # a later run (a re-ask, --repeat, --force): a backend of its own, the same build
    again = _backend(client, tmp_path)
    assert _probed(again, again.prepare(one, log=log), log)["seen"] is True
    assert len(_volumes(client, deployment)) == 1

    # another build starts cold: its caches are a volume of its own
    assert _probed(again, again.prepare(two, log=log), log)["seen"] is False
    assert len(_volumes(client, deployment)) == 2
    assert _probed(again, again.prepare(two, log=log), log)["seen"] is True


def test_what_a_probe_compiles_leaves_no_root_owned_file_on_the_host(
    client, deployment, cache_probe, tmp_path, monkeypatch
):
    """The containers are root; the caches they fill are the engine's volume, not the venv."""
    monkeypatch.setattr(docker_backend.os, "getuid", lambda: 4242)
    monkeypatch.setattr(docker_backend.os, "getgid", lambda: 4242)
    backend = _backend(client, tmp_path)
    prepared = backend.prepare(_cell(tmp_path, "2.17.0.dev20261130+cpu"), log=tmp_path / "i.log")
    for seen in (False, True):
        assert _probed(backend, prepared, tmp_path / "probe.log")["seen"] is seen

    venv = Path(prepared.python).parent.parent
    owners = {
        (p.stat().st_uid, p.stat().st_gid) for p in [venv, *venv.rglob("*")] if not p.is_symlink()
    }
    assert owners == {(4242, 4242)}, f"files in {venv} not handed back: {owners}"
    # the test runs as root, so the folder's own files are root's: none is a cache's
    assert not list((tmp_path / "work").rglob("kernel.marker"))
    assert not [p for p in (tmp_path / "work").rglob("*") if p.name in ("inductor", "triton")]


def test_a_cells_env_still_chooses_its_caches(client, deployment, cache_probe, tmp_path):
    mine = "/tmp/my-inductor"
    cell = _cell(tmp_path, "2.17.0.dev20261130+cpu", env=(("TORCHINDUCTOR_CACHE_DIR", mine),))
    backend = _backend(client, tmp_path)
    said = _probed(backend, backend.prepare(cell, log=tmp_path / "i.log"), tmp_path / "p.log")
    assert said["caches"] == {
        "TORCHINDUCTOR_CACHE_DIR": mine,
        "TRITON_CACHE_DIR": f"{COMPILE_CACHE}/triton",
    }


def test_cache_counts_the_compile_volumes_and_prune_removes_them(
    client, deployment, cache_probe, tmp_path
):
    backend = _backend(client, tmp_path)
    prepared = backend.prepare(_cell(tmp_path, "2.17.0.dev20261130+cpu"), log=tmp_path / "i.log")
    _probed(backend, prepared, tmp_path / "probe.log")
    [volume] = _volumes(client, deployment)

    def cache(*argv: str) -> str:
        done = torchbisect("cache", "--backend", "docker", "--workdir", "work", *argv, cwd=tmp_path)
        said = done.stdout + done.stderr
        assert done.returncode == Exit.OK, said
        assert "Traceback" not in said
        return said

    said = cache()
    assert "compile cache volume" in said.splitlines()[0]  # what the backend keeps says so
    assert re.search(
        r"^compile cache volumes \(torchbisect-compile-…, one per build probed\): 1, [\d.]+ MB "
        r"\(`torchbisect cache --prune` removes them\)$",
        said,
        re.M,
    ), said

    said = cache("--prune")
    assert re.search(r"^compile cache volumes removed: 1 of 1 \([\d.]+ MB\)$", said, re.M), said
    assert re.search(r"^uv cache volume \S+ pruned", said, re.M), said  # uv's as before
    assert _volumes(client, deployment) == []
    import docker

    with pytest.raises(docker.errors.NotFound):
        client.volumes.get(volume)
    assert "compile cache volumes: none" in cache().splitlines()
