"""The docker backend against a real engine: real images, real containers, the real torch wheel.

Needs what .ci/docker-setup.sh makes: a Docker engine, the offline base image
`torchbisect/base:bookworm` and its `-torch` twin (the base plus torch 2.13.0+cpu in the system
python, standing in for an NGC image).  torch's dependencies come from PyPI through the host's CA
bundle; the shared uv cache volume makes every install after the first a local copy.
"""

from __future__ import annotations

import dataclasses
import shutil
import signal
import socket
import subprocess
import textwrap
import threading
import time
import uuid
from pathlib import Path

import pytest
from helpers import IN_CI, find_test_wheel, sha256_of

from torchbisect.backends.base import BackendOptions, Prepared
from torchbisect.backends.docker import LABEL, OWNER_LABEL, DockerBackend
from torchbisect.errors import BackendUnavailable, ConfigError, InfraError
from torchbisect.model import Cell, Channel, ProbeResult, RunStatus, Verdict
from torchbisect.run import execute

BASE = "torchbisect/base:bookworm"
TORCH_BASE = "torchbisect/base:bookworm-torch"
RUN = uuid.uuid4().hex[:8]

# Stand-ins for probes/stale_replay.py: its command line and JSON document; this one also says
# which torch it imported.
SKIPPING_PROBE = """
    import argparse, json, torch
    parser = argparse.ArgumentParser()
    parser.add_argument("--json")
    args, _ = parser.parse_known_args()
    case = {"verdict": "skipped", "detail": "no CUDA device"}
    doc = {"schema": 1, "probe": "stale_replay", "probe_version": "0", "verdict": "skipped",
           "cases": {"capture_data_ptr": case, "side_stream_race": case},
           "env": {"torch": torch.__version__, "torch_file": torch.__file__,
                   "cuda_available": torch.cuda.is_available()}}
    with open(args.json, "w") as fh:
        json.dump(doc, fh)
"""
HANGING_PROBE = "import time; time.sleep(600)"
CRASHING_PROBE = "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"


def _torch_wheel() -> Path:
    found = find_test_wheel()
    if found is None:
        (pytest.fail if IN_CI else pytest.skip)(
            "no torch 2.13.0+cpu cp311 wheel (TORCHBISECT_TEST_WHEEL or pip's find-links)"
        )
    return found


def _id(name: str) -> str:
    """A cell id of this test run: another run on the same engine must not see our containers."""
    return f"{name}-{RUN}"


def _probes(folder: Path, source: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    # a document probe (the contract's stand-in), however little of it the test needs
    (folder / "stale_replay.py").write_text('PROBE_OUTPUT = "document"\n' + textwrap.dedent(source))
    return folder


def _dev_cell(wheel: Path, **changes) -> Cell:
    cell = Cell(
        id=_id("dev-2.13.0-cpu-cp311"),
        channel=Channel.DEV,
        version="2.13.0+cpu",
        cuda="cpu",
        python="3.11",
        url=str(wheel),
        base_image=BASE,
        timeout=120,
    )
    return dataclasses.replace(cell, **changes)


def _leftovers(client, cell: Cell) -> list:
    return client.containers.list(all=True, filters={"label": f"{LABEL}={cell.id}"})


@pytest.fixture(scope="module")
def client():
    import docker

    engine = docker.from_env()
    for image in (BASE, TORCH_BASE):
        if not engine.images.list(name=image):
            pytest.fail(f"image {image} is missing: run .ci/docker-setup.sh")
    return engine


@pytest.fixture(scope="module")
def backend(client, tmp_path_factory) -> DockerBackend:
    backend = DockerBackend(BackendOptions(workdir=tmp_path_factory.mktemp("work"), client=client))
    backend.check()
    return backend


@pytest.fixture(scope="module")
def skipping_probes(tmp_path_factory) -> Path:
    return _probes(tmp_path_factory.mktemp("probes"), SKIPPING_PROBE)


@pytest.fixture(scope="module")
def prepared(backend, tmp_path_factory) -> Prepared:
    """The real torch wheel installed as a dev cell, deps from PyPI (reused by later tests)."""
    log = tmp_path_factory.mktemp("logs") / "dev.log"
    return backend.prepare(_dev_cell(_torch_wheel()), log=log)


@pytest.mark.docker
def test_a_dev_wheel_installs_and_the_probe_reports_skipped_without_a_gpu(
    backend, prepared, tmp_path
):
    assert prepared.wheel_sha256 == sha256_of(_torch_wheel())

    out = backend.probe(prepared, gpu=None, probe_args=[], log=tmp_path / "probe.log")

    result = ProbeResult.from_json(out.json_text)  # the repository's probes/stale_replay.py
    assert out.exit_code == Verdict.SKIPPED.exit_code
    assert result.verdict is Verdict.SKIPPED
    assert result.cases and {c.verdict for c in result.cases} == {Verdict.SKIPPED}
    assert result.env["torch"] == "2.13.0+cpu"
    assert result.env["cuda_available"] is False


@pytest.mark.docker
def test_preparing_the_same_cell_again_reuses_its_venv(backend, prepared, tmp_path):
    log = tmp_path / "again.log"
    again = backend.prepare(prepared.cell, log=log)
    assert again.python == prepared.python
    assert again.wheel_sha256 == prepared.wheel_sha256 == backend.fingerprint(prepared.cell)
    assert not log.exists() or "[install" not in log.read_text()


@pytest.mark.docker
def test_a_hanging_probe_is_killed_at_the_cell_timeout_and_its_container_removed(
    backend, client, prepared, fake_probes, tmp_path
):
    fake_probes(_probes(tmp_path / "probes", HANGING_PROBE))
    quick = dataclasses.replace(prepared, cell=dataclasses.replace(prepared.cell, timeout=3))

    with pytest.raises(InfraError, match="timed out after 3 s"):
        backend.probe(quick, gpu=None, probe_args=[], log=tmp_path / "probe.log")

    assert _leftovers(client, quick.cell) == []


@pytest.mark.docker
def test_ctrl_c_during_a_probe_still_removes_the_container(
    backend, client, prepared, fake_probes, tmp_path
):
    fake_probes(_probes(tmp_path / "probes", HANGING_PROBE))

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.alarm(3)
    try:
        with pytest.raises(KeyboardInterrupt):
            backend.probe(prepared, gpu=None, probe_args=[], log=tmp_path / "probe.log")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)

    assert _leftovers(client, prepared.cell) == []


@pytest.mark.docker
def test_release_from_another_thread_stops_a_running_probe(
    backend, client, prepared, fake_probes, tmp_path
):
    fake_probes(_probes(tmp_path / "probes", HANGING_PROBE))
    outcome: list[BaseException] = []

    def probe() -> None:
        try:
            backend.probe(prepared, gpu=None, probe_args=[], log=tmp_path / "probe.log")
        except BaseException as err:  # noqa: BLE001 - handed to the test thread
            outcome.append(err)

    worker = threading.Thread(target=probe)
    worker.start()
    deadline = time.monotonic() + 30
    while not _leftovers(client, prepared.cell) and time.monotonic() < deadline:
        time.sleep(0.2)
    backend.release(prepared)  # what the scheduler does on Ctrl-C
    worker.join(30)

    assert not worker.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], InfraError)
    assert _leftovers(client, prepared.cell) == []


@pytest.mark.docker
def test_check_removes_containers_left_by_a_killed_run(backend, client):
    dead = subprocess.Popen(["true"])
    dead.wait()
    owner = f"{socket.gethostname()}:{dead.pid}"
    box = client.containers.create(
        BASE, ["sleep", "600"], labels={LABEL: _id("orphan"), OWNER_LABEL: owner}
    )
    box.start()

    backend.check()

    assert client.containers.list(all=True, filters={"label": f"{LABEL}={_id('orphan')}"}) == []


@pytest.mark.docker
def test_a_probe_that_segfaults_is_an_infrastructure_failure(
    backend, prepared, fake_probes, tmp_path
):
    fake_probes(_probes(tmp_path / "probes", CRASHING_PROBE))
    with pytest.raises(InfraError, match="SIGSEGV"):
        backend.probe(prepared, gpu=None, probe_args=[], log=tmp_path / "probe.log")


@pytest.mark.docker
def test_a_missing_wheel_is_an_infrastructure_failure(backend, tmp_path):
    cell = _dev_cell(tmp_path / "torch-2.13.0-cp311-cp311-linux_x86_64.whl", id=_id("dev-missing"))
    with pytest.raises(InfraError, match="does not exist"):
        backend.prepare(cell, log=tmp_path / "prepare.log")


@pytest.mark.docker
def test_a_cell_without_a_wheel_url_fails_that_cell_and_the_run_goes_on(backend, tmp_path):
    # It stopped the whole run (a ConfigError) here, and failed only its cell on venv; both
    # backends now take the wheel from backends/wheels.py and say the same.
    cell = _dev_cell(_torch_wheel(), id=_id("dev-no-url"), url=None)
    run = execute.run_cell(backend, cell, gpu=None, logs_dir=tmp_path / "logs")
    assert run.status is RunStatus.INFRA_FAILURE and run.verdict is None
    assert run.reason == f"install: cell {cell.id} has no wheel URL to install"


@pytest.mark.docker
def test_a_wheel_whose_sha256_differs_from_the_plan_is_not_installed(backend, tmp_path):
    cell = _dev_cell(_torch_wheel(), id=_id("dev-bad-sha"), sha256="0" * 64)
    with pytest.raises(InfraError, match="sha256 mismatch"):
        backend.prepare(cell, log=tmp_path / "prepare.log")
    assert not (backend.cells_dir / cell.id / "venv").exists()


@pytest.mark.docker
def test_a_wheel_that_uv_cannot_install_names_the_reason_and_the_log(backend, client, tmp_path):
    broken = tmp_path / "torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl"
    broken.write_bytes(b"not a zip file")
    cell = _dev_cell(broken, id=_id("dev-broken"))
    log = tmp_path / "prepare.log"

    reason = r"installing dev-broken-\w+ failed \(exit \d+\): ."
    with pytest.raises(InfraError, match=reason) as err:
        backend.prepare(cell, log=log)

    assert str(log) in str(err.value)
    assert _leftovers(client, cell) == []


@pytest.mark.docker
def test_a_runner_image_that_fails_to_build_is_an_infrastructure_failure(
    client, monkeypatch, tmp_path
):
    (tmp_path / "Dockerfile").write_text("ARG BASE_IMAGE\nFROM ${BASE_IMAGE}\nRUN exit 7\n")
    monkeypatch.setenv("TORCHBISECT_CONTAINERS", str(tmp_path))
    backend = DockerBackend(
        BackendOptions(workdir=tmp_path / "work", client=client, ca_bundle=None)
    )
    with pytest.raises(InfraError, match=f"building the runner image on {BASE} failed"):
        backend.prepare(
            _dev_cell(_torch_wheel(), id=_id("dev-no-image")), log=tmp_path / "prepare.log"
        )


@pytest.mark.docker
def test_a_base_image_that_is_not_here_and_cannot_be_pulled_is_an_infrastructure_failure(
    backend, tmp_path
):
    cell = _dev_cell(
        _torch_wheel(), id=_id("dev-no-base"), base_image="torchbisect/no-such-image:1"
    )
    with pytest.raises(InfraError, match="torchbisect/no-such-image:1 is not here and cannot"):
        backend.prepare(cell, log=tmp_path / "prepare.log")


@pytest.mark.docker
def test_a_preinstalled_cell_probes_the_torch_in_its_image(
    backend, skipping_probes, fake_probes, tmp_path
):
    fake_probes(skipping_probes)
    cell = Cell(
        id=_id("preinstalled-bookworm"),
        channel=Channel.PREINSTALLED,
        version="",
        cuda="",
        python="3.11",
        base_image=TORCH_BASE,
        timeout=120,
    )

    prepared = backend.prepare(cell, log=tmp_path / "prepare.log")
    out = backend.probe(prepared, gpu=None, probe_args=[], log=tmp_path / "probe.log")

    assert prepared.python == "/usr/bin/python3"
    assert prepared.wheel_sha256.startswith("preinstalled:2.13.0+cpu:")
    assert backend.fingerprint(cell) == prepared.wheel_sha256
    result = ProbeResult.from_json(out.json_text)
    assert result.verdict is Verdict.SKIPPED
    assert result.env["torch_file"].startswith("/usr/local/lib/python3.11/")


@pytest.mark.docker
def test_a_preinstalled_cell_needs_an_image_with_torch(backend, tmp_path):
    bare = Cell(
        id=_id("preinstalled-bare"),
        channel=Channel.PREINSTALLED,
        version="",
        cuda="",
        python="3.11",
        base_image=BASE,
    )
    with pytest.raises(InfraError, match="has no torch"):
        backend.prepare(bare, log=tmp_path / "prepare.log")
    with pytest.raises(ConfigError, match="preinstalled: {image"):
        backend.prepare(dataclasses.replace(bare, base_image=None), log=tmp_path / "p.log")


@pytest.mark.docker
def test_an_overlay_cell_shadows_the_image_torch_without_installing_dependencies(
    backend, skipping_probes, fake_probes, tmp_path
):
    fake_probes(skipping_probes)
    cell = _dev_cell(_torch_wheel(), id=_id("dev-overlay"), base_image=TORCH_BASE, overlay=True)
    log = tmp_path / "prepare.log"

    prepared = backend.prepare(cell, log=log)
    out = backend.probe(prepared, gpu=None, probe_args=[], log=tmp_path / "probe.log")

    assert "--no-deps" in log.read_text()
    torch_file = ProbeResult.from_json(out.json_text).env["torch_file"]
    assert torch_file.startswith(str(backend.cells_dir / cell.id / "venv"))


# An image whose python3 is itself a venv holding the "CUDA libraries" (a marker package), as
# many GPU images are; the probe reports where the marker and the overlay's packages come from.
VENV_BASE = "torchbisect/test:python3-is-a-venv"
MARKER_PROBE = """
    import argparse, json, sys
    import cuda_libs_stand_in
    parser = argparse.ArgumentParser()
    parser.add_argument("--json")
    args, _ = parser.parse_known_args()
    case = {"verdict": "skipped", "detail": "no CUDA device"}
    doc = {"schema": 1, "probe": "stale_replay", "probe_version": "0", "verdict": "skipped",
           "cases": {"capture_data_ptr": case},
           "env": {"marker": cuda_libs_stand_in.__file__, "path": sys.path}}
    with open(args.json, "w") as fh:
        json.dump(doc, fh)
"""


@pytest.mark.docker
def test_an_overlay_on_an_image_whose_python3_is_a_venv_sees_that_venvs_packages(
    backend, client, fake_probes, tmp_path
):
    import io

    site = "/opt/venv/lib/python3.11/site-packages"
    client.images.build(
        fileobj=io.BytesIO(
            textwrap.dedent(f"""
        FROM {BASE}
        RUN python3 -m venv /opt/venv && mkdir {site}/cuda_libs_stand_in \\
            && touch {site}/cuda_libs_stand_in/__init__.py
        ENV PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
        """).encode()
        ),
        tag=VENV_BASE,
        rm=True,
        pull=False,
    )
    fake_probes(_probes(tmp_path / "probes", MARKER_PROBE))
    cell = _dev_cell(_torch_wheel(), id=_id("dev-overlay-venv"), base_image=VENV_BASE, overlay=True)

    prepared = backend.prepare(cell, log=tmp_path / "prepare.log")
    out = backend.probe(prepared, gpu=None, probe_args=[], log=tmp_path / "probe.log")

    assert out.exit_code == 0, out.log_tail
    env = ProbeResult.from_json(out.json_text).env
    assert env["marker"].startswith(site + "/")
    own = str(backend.cells_dir / cell.id / "venv")
    first_own = next(i for i, p in enumerate(env["path"]) if p.startswith(own))
    assert first_own < env["path"].index(site)  # the overlay's torch still comes first


@pytest.mark.docker
@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this host has GPUs")
def test_asking_for_a_gpu_where_the_engine_has_none_is_an_infrastructure_failure(
    backend, client, prepared, skipping_probes, fake_probes, tmp_path
):
    fake_probes(skipping_probes)
    with pytest.raises(InfraError, match="cannot start the probe container"):
        backend.probe(prepared, gpu=0, probe_args=[], log=tmp_path / "probe.log")
    assert _leftovers(client, prepared.cell) == []


def test_without_an_engine_check_says_what_to_do(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    with pytest.raises(BackendUnavailable, match="unix:///nonexistent/docker.sock.*--backend venv"):
        DockerBackend(BackendOptions(ca_bundle=None)).check()
