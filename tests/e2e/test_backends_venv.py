"""The venv and current backends with real uv and real subprocesses, on a stand-in torch wheel
(pure Python, installs in a blink): venv per cell, hash check, reuse, overlay, the entry's
environment and the GPU pin reach the probe, and crashes and hangs come back as failures."""

from __future__ import annotations

import dataclasses
import functools
import http.server
import json
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from helpers import fake_torch_wheel, make_cell, sha256_of
from helpers.cli import torchbisect

from torchbisect.backends import BACKENDS, BackendOptions, Watcher, backend_class, choose_backend
from torchbisect.backends.current import CurrentBackend
from torchbisect.backends.preinstalled import (
    interpreter_of,
    read_image_answer,
    torch_fingerprint,
)
from torchbisect.backends.venv import VenvBackend
from torchbisect.backends.wheels import extra_index
from torchbisect.errors import BackendUnavailable, ConfigError
from torchbisect.exits import Exit
from torchbisect.model import Cell, Channel, RunStatus, Verdict, split_interpreter
from torchbisect.run import execute

PY = f"{sys.version_info[0]}.{sys.version_info[1]}"
needs_uv = pytest.mark.skipif(shutil.which("uv") is None, reason="uv is not installed")


pytestmark = pytest.mark.usefixtures("fake_probes")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    return fake_torch_wheel(tmp_path_factory.mktemp("wheels"))


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("work")


def dev_cell(wheel: Path, cell_id: str = "dev-fake", **kw):
    values = dict(
        url=str(wheel),
        sha256=sha256_of(wheel),
        python=PY,
        env=(("TB_ENTRY_VAR", "from-the-entry"),),
    )
    return make_cell(cell_id, **{**values, **kw})


def venv_backend(workdir: Path, **options) -> VenvBackend:
    return VenvBackend(BackendOptions(workdir=workdir, **options))


def run(backend, cell, tmp_path, *, gpu=None, **env):
    """execute.run_cell with TB_FAKE_* variables for the stand-in probe."""
    import os

    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        return execute.run_cell(backend, cell, gpu=gpu, logs_dir=tmp_path / "logs")
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@needs_uv
def test_overlay_installs_torch_into_the_cells_venv_and_probes_it(wheel, workdir, tmp_path):
    from torchbisect.utils.gpus import Gpu

    record = tmp_path / "record.json"
    backend = venv_backend(workdir, overlay=True)
    gpu = Gpu(index=3, name="NVIDIA H200", driver="580.159.04")
    result = run(backend, dev_cell(wheel), tmp_path, gpu=gpu, TB_FAKE_RECORD=str(record))
    assert result.status is RunStatus.OK, result.reason
    assert result.verdict is Verdict.SKIPPED
    assert result.wheel_sha256 == sha256_of(wheel)
    seen = json.loads(record.read_text())
    assert seen["version"] == "2.99.0+cpu"
    assert seen["torch"].startswith(str(workdir / "venvs" / "dev-fake"))
    assert seen["env"] == {
        "CUDA_VISIBLE_DEVICES": "3",
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        "TB_ENTRY_VAR": "from-the-entry",
        "PYTHONNOUSERSITE": "1",
    }
    log = (tmp_path / "logs" / "dev-fake.log").read_text()
    assert "--system-site-packages" in log and "--no-deps" in log
    assert "--torch-backend" not in log


@pytest.mark.slow
@needs_uv
def test_an_overlay_over_a_venv_sees_that_venvs_packages_but_its_own_torch(wheel, tmp_path):
    """GPU runners' interpreters are often venvs themselves (the CUDA libraries live there)."""
    base = tmp_path / "base"
    subprocess.run([sys.executable, "-m", "venv", str(base)], check=True)
    site = next((base / "lib").glob("python3*/site-packages"))
    (site / "cuda_libs_stand_in.py").write_text("WHERE = 'base venv'\n")
    older = fake_torch_wheel(tmp_path / "older", version="2.0.0+cpu")
    subprocess.run(
        [
            shutil.which("uv"),
            "pip",
            "install",
            "--python",
            str(base / "bin/python"),
            "--no-deps",
            str(older),
        ],
        check=True,
        capture_output=True,
    )
    backend = VenvBackend(
        BackendOptions(workdir=tmp_path / "work", overlay=True, python=str(base / "bin/python"))
    )
    prepared = backend.prepare(dev_cell(wheel), log=tmp_path / "overlay.log")
    code = "import cuda_libs_stand_in as c, torch; print(c.WHERE, torch.__version__)"
    out = subprocess.run([prepared.python, "-c", code], capture_output=True, text=True)
    assert out.stdout.split() == ["base", "venv", "2.99.0+cpu"], out.stderr


@needs_uv
def test_a_prepared_venv_is_reused_while_the_wheel_is_the_same(wheel, workdir, tmp_path):
    backend = venv_backend(workdir, overlay=True)
    cell = dev_cell(wheel, "dev-reuse")
    backend.prepare(cell, log=tmp_path / "first.log")
    backend.prepare(cell, log=tmp_path / "second.log")
    assert "uv" in (tmp_path / "first.log").read_text()
    assert not (tmp_path / "second.log").exists()  # no command ran


@needs_uv
def test_a_full_install_makes_a_venv_of_the_cells_python(wheel, workdir, tmp_path):
    backend = venv_backend(workdir)
    result = run(backend, dev_cell(wheel, "dev-full"), tmp_path)
    assert result.status is RunStatus.OK, result.reason
    cfg = (workdir / "venvs" / "dev-full" / "pyvenv.cfg").read_text()
    assert "include-system-site-packages = false" in cfg
    assert f"version_info = {PY}" in cfg


@needs_uv
def test_a_wheel_whose_sha256_differs_is_refused(wheel, workdir, tmp_path):
    cell = dev_cell(wheel, "dev-tampered", sha256="0" * 64)
    result = run(venv_backend(workdir, overlay=True), cell, tmp_path)
    assert result.status is RunStatus.INFRA_FAILURE and result.verdict is None
    # the docker backend's sentence, word for word: both take the wheel from backends/wheels.py
    assert result.reason.startswith(f"install: cell dev-tampered: sha256 mismatch for {wheel.name}")
    assert not (workdir / "venvs" / "dev-tampered").exists()  # refused before any venv is made


def test_a_missing_wheel_is_an_infrastructure_failure(workdir, tmp_path):
    cell = make_cell("dev-gone", url=str(tmp_path / "nope.whl"), sha256=None)
    result = run(venv_backend(workdir), cell, tmp_path)
    assert result.status is RunStatus.INFRA_FAILURE
    assert "does not exist" in result.reason


@needs_uv
def test_a_remote_wheel_without_sha256_is_downloaded_hashed_and_installed(
    wheel, workdir, tmp_path, monkeypatch
):
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=wheel.parent)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/{wheel.name.replace('+', '%2B')}"
        cell = dev_cell(wheel, "dev-remote", url=url, sha256=None)
        heard = Heard()
        result = run(venv_backend(workdir, overlay=True, watcher=heard), cell, tmp_path)
    finally:
        server.shutdown()
    assert result.status is RunStatus.OK, result.reason
    assert result.wheel_sha256 == sha256_of(wheel)
    assert not list((workdir / "downloads").glob("*.whl"))  # deleted once installed
    # what a matrix run's rows show, in order, each phase once: the one route is the watcher
    assert heard.phases == ["install", "download", "install", "probe"]
    assert heard.got[-1] == (wheel.stat().st_size, wheel.stat().st_size)


class Heard(Watcher):
    """A watcher that keeps what it hears."""

    def __init__(self) -> None:
        self.phases: list[str] = []
        self.got: list[tuple[int, int | None]] = []

    def phase(self, cell, phase: str) -> None:
        self.phases.append(phase)

    def download(self, cell, got: int, total: int | None, rate: float) -> None:
        self.got.append((got, total))


@needs_uv
@pytest.mark.parametrize(
    ("mode", "reason"),
    [
        ("crash", "probe killed by signal SIGSEGV"),
        ("write_then_crash", "probe killed by signal SIGSEGV"),
        ("exit3", "status 3 (expected 0, 1 or 125): Traceback: something broke"),
        ("nojson", "probe wrote no JSON document"),
        ("badjson", "probe JSON unreadable"),
        ("mismatch", "disagrees with its verdict 'not_affected'"),
    ],
)
def test_a_misbehaving_probe_is_never_a_verdict(wheel, workdir, tmp_path, mode, reason):
    result = run(venv_backend(workdir, overlay=True), dev_cell(wheel), tmp_path, TB_FAKE_MODE=mode)
    assert result.status is RunStatus.INFRA_FAILURE and result.verdict is None
    assert reason in result.reason


@pytest.mark.slow
@needs_uv
def test_a_hanging_probe_is_stopped_at_the_cells_timeout(wheel, workdir, tmp_path):
    cell = dev_cell(wheel, timeout=2.0)
    result = run(venv_backend(workdir, overlay=True), cell, tmp_path, TB_FAKE_MODE="hang")
    assert result.status is RunStatus.INFRA_FAILURE
    assert result.reason.startswith("probe: timed out after 2 s")


def test_the_preinstalled_fingerprint_does_not_import_torch():
    code = (
        "import sys; from torchbisect.backends.preinstalled import torch_fingerprint as f;"
        "print(f()); assert 'torch' not in sys.modules"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if "has no torch" in out.stderr:
        pytest.skip("this interpreter has no torch")
    assert out.returncode == 0, out.stderr
    fingerprint = out.stdout.strip()
    assert fingerprint.startswith("preinstalled:") and len(fingerprint.split(":")[2]) == 64


@needs_uv
def test_another_interpreters_torch_is_fingerprinted_through_that_interpreter(
    wheel, workdir, tmp_path
):
    backend = venv_backend(workdir, overlay=True)
    prepared = backend.prepare(dev_cell(wheel, "dev-fp"), log=tmp_path / "log")
    assert torch_fingerprint(prepared.python).startswith("preinstalled:2.99.0+cpu:")


@needs_uv
def test_the_current_backend_probes_its_interpreters_torch(wheel, workdir, tmp_path):
    backend = venv_backend(workdir, overlay=True)
    venv_python = backend.prepare(dev_cell(wheel, "dev-base"), log=tmp_path / "log").python
    current = CurrentBackend(BackendOptions(workdir=workdir, python=venv_python))
    cell = make_cell("preinstalled", channel=Channel.PREINSTALLED, url=None, sha256=None)
    assert current.fingerprint(cell) == torch_fingerprint(venv_python)
    result = run(current, cell, tmp_path)
    assert result.status is RunStatus.OK, result.reason
    assert result.wheel_sha256.startswith("preinstalled:2.99.0+cpu:")
    assert result.seconds_install == 0.0


def test_the_current_backend_says_when_its_interpreter_has_no_torch(tmp_path):
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    with pytest.raises(BackendUnavailable, match="has no torch"):
        CurrentBackend(BackendOptions(python=str(bare / "bin" / "python"))).check()


def test_extra_index_for_nightly_and_test_never_torch_backend():
    nightly = make_cell(channel=Channel.NIGHTLY, cuda="cu130")
    assert extra_index(nightly) == "https://download.pytorch.org/whl/nightly/cu130"
    assert extra_index(make_cell(channel=Channel.TEST, cuda="cu128")) == (
        "https://download.pytorch.org/whl/test/cu128"
    )
    assert extra_index(make_cell(channel=Channel.STABLE, cuda="cu130")) is None
    mirror = make_cell(channel=Channel.NIGHTLY, index_url="https://mirror/whl/nightly/cu130")
    assert extra_index(mirror) == "https://mirror/whl/nightly/cu130"


def test_the_registry_names_the_three_backends_and_refuses_others():
    assert set(BACKENDS) == {"docker", "venv", "current"}
    assert backend_class("venv") is VenvBackend
    with pytest.raises(ConfigError, match="unknown backend 'podman'"):
        backend_class("podman")


def test_choosing_without_a_name_says_which_and_why(monkeypatch, tmp_path):
    import torchbisect.backends as backends

    said = []
    monkeypatch.setattr(backends, "docker_answers", lambda timeout=5.0: False)
    backend = choose_backend(None, BackendOptions(workdir=tmp_path), say=said.append)
    assert backend.name == "venv"
    assert said == ["backend: venv (no Docker engine answers; choose with --backend)"]


@pytest.mark.parametrize("name", [None, "venv", "current", "docker"])
def test_an_option_no_backend_has_is_refused_not_dropped(monkeypatch, tmp_path, name):
    import torchbisect.backends as backends

    asked = []
    monkeypatch.setattr(backends, "docker_answers", lambda timeout=5.0: asked.append(1))
    with pytest.raises(TypeError, match="work_root"):
        choose_backend(name, BackendOptions(workdir=tmp_path, work_root=tmp_path / "docker"))
    assert asked == []  # refused before any engine is asked


def test_backend_options_are_frozen_and_keyword_only(tmp_path):
    options = BackendOptions(workdir=tmp_path)
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.overlay = True  # type: ignore[misc]
    with pytest.raises(TypeError):
        BackendOptions(tmp_path)  # type: ignore[misc]


@pytest.mark.parametrize(
    ("written", "python", "named"),
    [
        ("", "", None),
        ("3.12", "3.12", None),
        ("3", "3", None),
        ("3.13t", "3.13t", None),
        ("3.12.4", "3.12.4", None),
        ("python3.11", "", "python3.11"),
        ("/opt/venv/bin/python", "", "/opt/venv/bin/python"),
    ],
)
def test_a_preinstalled_interpreter_is_a_name_or_path_and_a_bare_version_means_the_default(
    written, python, named
):
    """One rule (model.split_interpreter) for matrix.yaml's `preinstalled.interpreter` and for a
    stored cell written before Cell had `interpreter` (its `python` carried the interpreter):
    "3.12.4" is a version, as the backends always read it (`plan` once called it an
    interpreter)."""
    assert split_interpreter(written) == (python, named)
    cell = make_cell(
        "preinstalled", channel=Channel.PREINSTALLED, python=python, url=None, interpreter=named
    )
    old = {k: v for k, v in cell.to_json().items() if k != "interpreter"} | {"python": written}
    assert Cell.from_json(old) == cell
    expected = named if named is None or named.startswith("/") else (shutil.which(named) or named)
    assert interpreter_of(cell, "/default/python") == (expected or "/default/python")


def test_an_images_answer_gives_its_python_and_fingerprint_or_says_no_torch():
    fingerprint = "preinstalled:2.13.0+cpu:" + "a" * 64
    assert read_image_answer(f"noise\n{fingerprint}\n/usr/bin/python3\n") == (
        "/usr/bin/python3",
        fingerprint,
    )
    assert read_image_answer("/usr/bin/python3\n") is None  # exit 3: no torch in that python
    assert read_image_answer("") is None


@needs_uv
def test_cache_shows_and_prunes_what_the_venv_backend_keeps(wheel, tmp_path, monkeypatch):
    """`torchbisect cache --backend venv` as a user runs it: the venvs' size, then --prune
    removes them and prunes uv's cache (a cache of this test's own, not the machine's)."""
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    work = tmp_path / "work"
    venv_backend(work).prepare(dev_cell(wheel, "dev-kept"), log=tmp_path / "install.log")

    def cache(*argv: str) -> subprocess.CompletedProcess:
        return torchbisect(
            "cache", "--backend", "venv", "--workdir", work, *argv, timeout=300, cwd=tmp_path
        )

    shown = cache()
    assert shown.returncode == Exit.OK, shown.stderr
    venvs = next(line for line in shown.stdout.splitlines() if line.startswith("venvs: "))
    assert venvs.startswith("venvs: 1 venv, ") and venvs.endswith(f"in {work / 'venvs'}")
    assert "uv cache: " in shown.stdout and str(tmp_path / "uv-cache") in shown.stdout
    pruned = cache("--prune")
    assert pruned.returncode == Exit.OK, pruned.stderr
    assert f"removed 1 venv(s) under {work / 'venvs'}" in pruned.stdout
    assert not (work / "venvs" / "dev-kept").exists()
    assert cache().stdout.splitlines()[1].startswith("venvs: 0 venvs, 0.0 MB")
    assert shown.stdout.startswith("backend: venv (--backend), which keeps a venv per cell")


@needs_uv
def test_cache_speaks_of_the_backend_the_runs_used_and_says_so(tmp_path, monkeypatch):
    """It spoke of the docker backend whenever an engine answered: another job's uv cache
    volume, and a plain --prune would have pruned it (issue 49, friction 1).  The newest run of
    a backend that keeps something names it; a run of `current` (which keeps nothing) does not."""
    from helpers import make_run
    from helpers.cli import torchbisect

    from torchbisect.store.db import Store

    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    store = tmp_path / "results.sqlite"
    with Store(store) as db:
        db.add(make_run(make_cell("dev-old"), backend="docker", started="2026-11-01T10:00:00"))
        db.add(make_run(make_cell("dev-new"), backend="venv", started="2026-11-02T10:00:00"))
        db.add(make_run(make_cell("dev-own"), backend="current", started="2026-11-03T10:00:00"))
    shown = torchbisect("cache", "--store", store, "--workdir", tmp_path / "work", cwd=tmp_path)
    assert shown.returncode == Exit.OK, shown.stderr
    first, second = shown.stdout.splitlines()[:2]
    assert first == (
        f"backend: venv (the newest run in {store} used it; choose with --backend), "
        "which keeps a venv per cell under the work folder, and uv's cache on this "
        "host"
    )
    assert second.startswith("venvs: 0 venvs, ")


def test_cache_of_a_backend_that_keeps_nothing_is_refused_naming_those_that_do(capsys):
    from helpers.cli import call, one_sentence

    status = call("cache", "--backend", "current")
    assert one_sentence(capsys.readouterr().err, status, Exit.MISTAKE, command="cache").endswith(
        "the current backend (--backend) keeps nothing between runs: choose --backend docker "
        "or --backend venv"
    )
