"""The docker backend: one container per cell step, from a runner image built once per base image
(docker_image.py).

`prepare` runs one container that creates the cell's venv with uv and installs its wheel; `probe`
runs a second one that runs the probe with that venv's python.  The venv lives on the host, in
`<workdir>/docker/<cell id>/venv`, bind-mounted at the same path in both containers (a venv's
paths are absolute); uv's cache is the named volume `torchbisect-uv-cache`, shared by every
container of the host, so each wheel and dependency is downloaded once.  The runner image
(`containers/Dockerfile`: base image + python3 + uv) is built with the docker SDK and tagged by a
hash of its inputs, so it is reused until they change.  A `preinstalled` cell runs the python of
its base image (an NGC image, say) and installs nothing.

Every container is labelled with its cell and its owner (host and pid) and is removed in `finally`,
also on Ctrl-C; `release` removes a cell's containers from another thread; `check` removes those a
killed run left behind.  A signal, the OOM killer, a timeout or a failed install raise InfraError.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import re
import shlex
import signal
import socket
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import proc
from ..errors import BackendUnavailable, ConfigError, InfraError
from ..index import local_path
from ..model import Cell, Channel
from ..probes import probe_path
from .base import Backend, Prepared, ProbeOutput
from .current import FINGERPRINT_SNIPPET
from .docker_image import RunnerImages, default_base_image, host_ca_bundle, note
from .venv import (
    DEFAULT_WORKDIR,
    PhaseHook,
    cell_lock,
    extra_index,
    local_wheel,
    read_document,
)
from .wheels import DownloadHook, discard, download, progress_of, sha256_file

LABEL = "torchbisect.cell"  # `docker ps -a --filter label=torchbisect.cell`
OWNER_LABEL = "torchbisect.owner"  # "<hostname>:<pid>" of the run that made the container
_REMOVE_OWNED = ("import docker\nfor box in docker.from_env(timeout=60).containers.list(all=True, "
                 "filters={'label': %r}):\n    box.remove(force=True)\n")
UV_CACHE_VOLUME = "torchbisect-uv-cache"
UV_CACHE = "/var/cache/torchbisect-uv"
CA_PATH = "/etc/torchbisect/ca-bundle.crt"
_TAIL_LINES = 60
_POLL = 2.0  # seconds between checks that the run is still alive while a container runs


@dataclass(frozen=True, kw_only=True)
class _Handle:
    image: str
    workdir: Path


@dataclass(frozen=True, kw_only=True)
class _Exit:
    code: int
    oom_killed: bool
    seconds: float
    tail: str


class DockerBackend(Backend):
    """Cells in containers; see the module docstring."""

    name = "docker"

    def __init__(self, *, workdir: str | Path = DEFAULT_WORKDIR, overlay: bool = False,
                 on_phase: PhaseHook | None = None, on_download: DownloadHook | None = None,
                 ca_bundle: Path | str | None = "auto",
                 install_timeout: float = 3600.0, client: Any = None) -> None:
        self.cells_dir = Path(workdir).absolute() / "docker"
        self.overlay = overlay
        self.on_phase = on_phase
        self.on_download = on_download
        self.ca_bundle = host_ca_bundle() if ca_bundle == "auto" else (
            Path(ca_bundle).resolve() if ca_bundle else None)
        self.install_timeout = install_timeout
        self._client = client
        self._owner = f"{socket.gethostname()}:{os.getpid()}"
        self._cleanup_registered = False
        self.images = RunnerImages(lambda: self.client, ca_bundle=self.ca_bundle,
                                   timeout=install_timeout)
        self._images: dict[tuple[str, str], tuple[str, str]] = {}  # → (python, fingerprint)
        self._lock = threading.Lock()

    # -- the Backend interface ----------------------------------------------------------------

    def check(self) -> None:
        host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
        try:
            self.client.ping()
        except Exception as exc:  # the SDK raises several unrelated types for "nobody answers"
            raise BackendUnavailable(
                f"no Docker engine answers at {host} ({type(exc).__name__}): "
                "start dockerd (.ci/docker-setup.sh) or use --backend venv") from None
        self._remove_orphans()
        from ..gpus import list_gpus
        from .docker_gpu import require_gpu_support

        if list_gpus():  # every probe will ask for a GPU: can this engine attach one?
            require_gpu_support(self.client)

    def fingerprint(self, cell: Cell) -> str | None:
        """What `Prepared.wheel_sha256` will be, when it is known without installing."""
        if cell.channel is Channel.PREINSTALLED:
            return self._inspect(cell, log=None)[1]
        if cell.sha256:
            return cell.sha256
        path = local_wheel(cell)
        if path is None or not path.is_file():
            return None
        old = _read_json(self.cells_dir / cell.id / "prepared.json") or {}
        if old.get("url") == cell.url and old.get("wheel_stat") == _stat(cell.url):
            return old["wheel_sha256"]  # hashed when installed, and not rebuilt since
        return sha256_file(path)

    def prepare(self, cell: Cell, *, log: Path) -> Prepared:
        started = time.monotonic()
        workdir = self.cells_dir / cell.id
        workdir.mkdir(parents=True, exist_ok=True)
        if cell.channel is Channel.PREINSTALLED:
            python, fingerprint = self._inspect(cell, log=log)
            return Prepared(cell=cell, python=python, wheel_sha256=fingerprint,
                            seconds_install=time.monotonic() - started, env=dict(cell.env),
                            handle=_Handle(image=cell.base_image or "", workdir=workdir))
        image = self.images.runner(cell.base_image or default_base_image(cell.cuda), log)
        # Another run sharing this work directory may be installing the same cell: wait for it.
        with cell_lock(workdir.with_name(f"{cell.id}.lock")):
            sha = self._installed(cell, image, workdir, log)
        return Prepared(cell=cell, python=str(workdir / "venv" / "bin" / "python"),
                        wheel_sha256=sha, seconds_install=time.monotonic() - started,
                        env=dict(cell.env), handle=_Handle(image=image, workdir=workdir))

    def _installed(self, cell: Cell, image: str, workdir: Path, log: Path) -> str:
        """The cell's venv in `workdir`, reused or (re)built; its wheel's sha256."""
        venv, marker = workdir / "venv", workdir / "prepared.json"
        want = {"image": image, "url": cell.url, "wheel_stat": _stat(cell.url),
                "overlay": self.overlay or cell.overlay, "python": cell.python,
                "index": extra_index(cell)}
        old = _read_json(marker) or {}
        if (want == {k: old.get(k) for k in want} and (venv / "bin" / "python").exists()
                and cell.sha256 in (None, old.get("wheel_sha256"))):
            sha = old["wheel_sha256"]  # installed by an earlier run: keep that venv
        else:
            marker.unlink(missing_ok=True)
            wheel, sha, downloaded = self._wheel(cell, workdir, log)
            try:
                self._install(cell, image, wheel, venv, overlay=want["overlay"], log=log)
            finally:
                if downloaded:
                    discard(wheel)  # uv's cache and the venv hold it now
            marker.write_text(json.dumps({**want, "wheel_sha256": sha}))
        return sha

    def probe(self, prepared: Prepared, *, gpu: int | None, probe_args: list[str],
              log: Path) -> ProbeOutput:
        cell, handle = prepared.cell, prepared.handle
        script = probe_path(cell.probe)
        # A fresh name per run: a container orphaned by a killed run must not answer for this one.
        doc = handle.workdir / f"result-{uuid.uuid4().hex}.json"
        command = [prepared.python, f"/probes/{script.name}", *probe_args, "--json", str(doc)]
        probes = _bind(script.parent, "/probes", read_only=True)
        try:
            done = self._run(cell, "probe", handle.image, command, workdir=handle.workdir,
                             mounts=[probes], log=log, timeout=cell.timeout, gpu=gpu,
                             env=prepared.env)
            text = read_document(doc)
        finally:
            doc.unlink(missing_ok=True)
        return ProbeOutput(json_text=text, exit_code=done.code, seconds=done.seconds,
                           log_tail=done.tail)

    def release(self, prepared: Prepared) -> None:
        """Remove the cell's containers (a probe still running on Ctrl-C); keep its venv."""
        self._remove({LABEL: prepared.cell.id, OWNER_LABEL: self._owner})

    # -- preparing ------------------------------------------------------------------------------

    @property
    def client(self) -> Any:
        if self._client is None:
            import docker

            try:
                self._client = docker.from_env(timeout=120)
            except docker.errors.DockerException as exc:
                raise BackendUnavailable(f"cannot reach a Docker engine ({exc}): start dockerd "
                                         "or use --backend venv") from None
        return self._client

    def _inspect(self, cell: Cell, *, log: Path | None) -> tuple[str, str]:
        """(python, torch fingerprint) of a preinstalled cell's image, once per image."""
        if not cell.base_image:
            raise ConfigError(f"cell {cell.id}: on the docker backend a preinstalled cell needs "
                              "an image whose python has torch: name one (an NGC image, say) "
                              "as `preinstalled: {image: …}` in matrix.yaml")
        # The plan puts `preinstalled.interpreter` in `python`; a bare version means "python3".
        wanted = "" if re.fullmatch(r"[\d.]*t?", cell.python) else cell.python
        key = (self.images.ensure(cell.base_image, log).id, wanted)
        if key not in self._images:
            pick = ('py=$(command -v "${1:-python3}" || command -v python) && '
                    '"$py" -c "$0" && echo "$py"')
            workdir = self.cells_dir / cell.id
            workdir.mkdir(parents=True, exist_ok=True)
            done = self._run(cell, "inspect", cell.base_image,
                             ["sh", "-c", pick, FINGERPRINT_SNIPPET, wanted], workdir=workdir,
                             log=log or workdir / "inspect.log", timeout=300)
            lines = done.tail.strip().splitlines()
            if done.code != 0 or len(lines) < 2 or not lines[-2].startswith("preinstalled:"):
                raise InfraError(f"cell {cell.id}: the python of {cell.base_image} has no torch "
                                 f"({_last_line(done.tail)})")
            self._images[key] = (lines[-1].strip(), lines[-2].strip())
        return self._images[key]

    def _wheel(self, cell: Cell, workdir: Path, log: Path) -> tuple[Path, str, bool]:
        """(local wheel, its sha256, whether we downloaded it), checked against the plan."""
        if not cell.url:
            raise ConfigError(f"cell {cell.id} names no wheel (url)")
        path = local_wheel(cell)
        downloaded = path is None
        if path is None:
            if self.on_phase:
                self.on_phase(cell, "download")
            # a folder of its own under workdir, named by the link's validated wheel name
            path, sha = download(cell.url.split("#", 1)[0], workdir / "downloads", log=log,
                                 progress=progress_of(cell, self.on_download))
            if self.on_phase:
                self.on_phase(cell, "install")
        elif path.is_file():
            sha = sha256_file(path)
        else:
            raise InfraError(f"cell {cell.id}: the wheel {path} does not exist")
        if cell.sha256 and sha != cell.sha256.lower():
            if downloaded:
                discard(path)
            raise InfraError(f"cell {cell.id}: sha256 mismatch for {path.name}: "
                             f"expected {cell.sha256}, got {sha}")
        return path.resolve(), sha, downloaded

    def _install(self, cell: Cell, image: str, wheel: Path, venv: Path, *, overlay: bool,
                 log: Path) -> None:
        target = f"/wheels/{wheel.name}"
        create = ["uv", "venv", "--clear", "--no-project", "--python"]
        if overlay:  # the image's python and packages, torch shadowed by the venv's
            create += ["python3", "--python-preference", "only-system", "--system-site-packages"]
        else:
            create += [cell.python]
        install = ["uv", "pip", "install", "--python", str(venv / "bin" / "python"),
                   "--reinstall-package", "torch"]  # a base torch must not count as installed
        index = extra_index(cell)  # nightlies' pytorch-triton; uv ranks extra indexes first
        if overlay:
            install.append("--no-deps")
        elif index:
            install += ["--extra-index-url", index]
        script = f"{shlex.join([*create, str(venv)])} && {shlex.join([*install, target])}"
        # root in the container; the venv must belong to whoever runs torchbisect, or a runner
        # that is not root cannot delete it on its next job
        script += f" && chown -R {os.getuid()}:{os.getgid()} {shlex.quote(str(venv))}"
        done = self._run(cell, "install", image, ["sh", "-c", script], workdir=venv.parent,
                         mounts=[_bind(wheel, target, read_only=True)], log=log,
                         timeout=self.install_timeout)
        if done.code != 0:
            raise InfraError(f"installing {cell.id} failed (exit {done.code}): "
                             f"{_last_line(done.tail)}; see {log}")

    # -- running one container ------------------------------------------------------------------

    def _run(self, cell: Cell, step: str, image: str, command: list[str], *, workdir: Path,
             log: Path, timeout: float, mounts: tuple[Any, ...] | list[Any] = (),
             gpu: int | None = None, env: dict[str, str] | None = None) -> _Exit:
        """Run one container to its end; InfraError for a timeout, a signal or the OOM killer."""
        on = "" if gpu is None else f" on GPU {gpu}"
        note(log, f"[{step} in {image}{on}] {shlex.join(command)}")
        with self._container(cell, step, image, command, workdir=workdir,
                             mounts=[*self._mounts(workdir), *mounts],
                             env=self._environment(env or {}, gpu), gpu=gpu,
                             log=log) as (box, pump):
            started = time.monotonic()
            status = self._wait(box, started + timeout)
            seconds = time.monotonic() - started
            if status is None:
                raise InfraError(f"{step} of {cell.id} timed out after {timeout:g} s and was "
                                 f"killed; see {log}")
            box.reload()
            pump.join(10)
            done = _Exit(code=int(status.get("StatusCode", -1)), seconds=seconds,
                         oom_killed=bool(box.attrs["State"].get("OOMKilled")), tail=pump.tail())
        _raise_if_killed(done, f"{step} of {cell.id}", log)
        return done

    def _wait(self, box: Any, deadline: float) -> dict | None:
        """The container's exit status, or None at the deadline; gives up when the run ends."""
        import requests

        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            try:
                return box.wait(timeout=min(_POLL, left))
            except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError):
                pass
            # A worker thread whose run was interrupted: the interpreter is exiting.
            if not threading.main_thread().is_alive():
                raise InfraError("interrupted: torchbisect is exiting")

    @contextlib.contextmanager
    def _container(self, cell: Cell, step: str, image: str, command: list[str], *,
                   workdir: Path, mounts: list[Any], gpu: int | None, env: dict[str, str],
                   log: Path) -> Iterator[tuple[Any, _LogPump]]:
        import docker
        from docker.types import DeviceRequest

        self._remove_when_we_die()
        run = uuid.uuid4().hex[:12]
        labels = {LABEL: cell.id, OWNER_LABEL: self._owner, "torchbisect.step": step,
                  "torchbisect.run": run}
        gpus = [] if gpu is None else [DeviceRequest(device_ids=[str(gpu)],
                                                     capabilities=[["gpu"]])]
        try:
            try:
                box = self.client.containers.create(
                    image, command, name=f"torchbisect-{_safe(cell.id)}-{step}-{run[:6]}",
                    labels=labels, environment=env, mounts=mounts, device_requests=gpus,
                    working_dir=str(workdir), init=True, privileged=False)
                box.start()
            except docker.errors.APIError as exc:  # e.g. no GPU runtime, a bad mount
                raise InfraError(f"cannot start the {step} container of {cell.id}: "
                                 f"{exc.explanation or exc}") from None
            yield box, _LogPump(box, log)
        finally:  # also on Ctrl-C, and when that came in the middle of create()
            self._remove({"torchbisect.run": run})

    def _remove_when_we_die(self) -> None:
        """Killed with SIGKILL, we cannot remove our containers: the watchdog will (proc.at_end)."""
        if self._cleanup_registered:
            return
        self._cleanup_registered = True
        label = f"{OWNER_LABEL}={self._owner}"
        proc.at_end([sys.executable, "-c", _REMOVE_OWNED % (label,)])

    def _remove(self, labels: dict[str, str]) -> None:
        wanted = [f"{key}={value}" for key, value in labels.items()]
        with contextlib.suppress(Exception):
            for box in self.client.containers.list(all=True, filters={"label": wanted}):
                with contextlib.suppress(Exception):
                    box.remove(force=True)

    def _remove_orphans(self) -> None:
        """Containers of runs on this host whose process is gone (killed with SIGKILL)."""
        host = socket.gethostname()
        for box in self.client.containers.list(all=True, filters={"label": OWNER_LABEL}):
            owner_host, _, pid = box.labels.get(OWNER_LABEL, "").rpartition(":")
            if owner_host == host and pid.isdigit() and not _alive(int(pid)):
                with contextlib.suppress(Exception):
                    box.remove(force=True)

    def _mounts(self, workdir: Path) -> list[Any]:
        from docker.types import Mount

        mounts = [_bind(workdir, str(workdir)),
                  Mount(target=UV_CACHE, source=UV_CACHE_VOLUME, type="volume")]
        if self.ca_bundle:
            mounts.append(_bind(self.ca_bundle, CA_PATH, read_only=True))
        return mounts

    def _environment(self, extra: dict[str, str], gpu: int | None) -> dict[str, str]:
        env = {"PYTHONUNBUFFERED": "1", "UV_CACHE_DIR": UV_CACHE, "UV_LINK_MODE": "copy",
               "UV_PYTHON_INSTALL_DIR": f"{UV_CACHE}/python", "UV_NO_PROGRESS": "1",
               # bytecode stays in the container: no root-owned __pycache__ in the host's venv
               "PYTHONPYCACHEPREFIX": "/tmp/torchbisect-pycache"}
        if self.ca_bundle:  # uv reads SSL_CERT_FILE (UV_NATIVE_TLS is deprecated since 0.13)
            env.update(SSL_CERT_FILE=CA_PATH, PIP_CERT=CA_PATH, REQUESTS_CA_BUNDLE=CA_PATH)
        for var in ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy",
                    "no_proxy"):
            if var in os.environ:
                env[var] = os.environ[var]
        if gpu is None:  # nvidia/cuda images say NVIDIA_VISIBLE_DEVICES=all
            env["NVIDIA_VISIBLE_DEVICES"] = "void"
        return {**env, **extra}


class _LogPump(threading.Thread):
    """Copies a container's output to the cell's log as it comes, keeping the last lines."""

    def __init__(self, container: Any, log: Path) -> None:
        super().__init__(daemon=True)
        self._container, self._log = container, log
        self._lines: collections.deque[str] = collections.deque(maxlen=_TAIL_LINES)
        self.start()

    def run(self) -> None:
        with contextlib.suppress(Exception), self._log.open("a", encoding="utf-8") as out:
            for chunk in self._container.logs(stream=True, follow=True):
                text = chunk.decode(errors="replace")
                out.write(text)
                out.flush()
                self._lines.extend(text.splitlines())

    def tail(self) -> str:
        return "\n".join(self._lines)


def _raise_if_killed(done: _Exit, what: str, log: Path) -> None:
    """A signal or the OOM killer is an infrastructure failure, never a verdict."""
    if done.oom_killed:
        raise InfraError(f"{what} was killed: out of memory (exit {done.code}); see {log}")
    if done.code > 128:
        try:
            name = signal.Signals(done.code - 128).name
        except ValueError:
            name = f"signal {done.code - 128}"
        hint = ", often out of memory" if name == "SIGKILL" else ""
        raise InfraError(f"{what} died of {name} (exit {done.code}{hint}); see {log}")


def _stat(url: str | None) -> list[int] | None:
    """Size and mtime of a local wheel: a rebuilt dev wheel at the same path is reinstalled."""
    path = local_path(url) if url else None
    with contextlib.suppress(OSError):
        if path is not None:
            info = path.stat()
            return [info.st_size, info.st_mtime_ns]
    return None


def _bind(source: Path, target: str, *, read_only: bool = False) -> Any:
    from docker.types import Mount

    return Mount(target=target, source=str(Path(source).resolve()), type="bind",
                 read_only=read_only)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _safe(text: str) -> str:
    return "".join(c if c.isalnum() or c in "_.-" else "_" for c in text)


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else "no output"
