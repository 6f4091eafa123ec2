"""One container run, start to end, for the docker backend: labelled, streamed, waited, removed.

Every container carries its cell, its owner (host and pid) and its run, and is removed in
`finally`, also on Ctrl-C; a run killed with SIGKILL leaves its containers to the watchdog
(`proc.at_end`), and `remove_orphans` clears those of dead runs on this host.  Its output goes to
the cell's log as it comes.  A timeout, a signal or the OOM killer raise InfraError: they are
never a verdict.  Every container sees its cell's work folder at the same path, uv's cache
volume (pruned by docker_cache.py) and uv's Pythons volume, and the host's CA bundle when there
is one.  A container that is no cell's (the GPU preflight, the cache prune) carries its job's
name where a cell id goes.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import InfraError
from ..model import Cell
from ..utils import files, proc
from .base import note

LABEL = "torchbisect.cell"  # `docker ps -a --filter label=torchbisect.cell`
PROBE_LABEL = "torchbisect.probe"  # one build probed by two probes at once: each its own
OWNER_LABEL = "torchbisect.owner"  # "<hostname>:<pid>" of the run that made the container
_REMOVE_OWNED = (
    "import docker\nfor box in docker.from_env(timeout=60).containers.list(all=True, "
    "filters={'label': %r}):\n    box.remove(force=True)\n"
)
UV_CACHE_VOLUME = "torchbisect-uv-cache"  # unless $TORCHBISECT_UV_CACHE_VOLUME names another
UV_CACHE = "/var/cache/torchbisect-uv"
# uv's Pythons live in a volume of their own: `uv cache prune` deletes every folder of the cache
# that is none of its buckets, and a venv whose interpreter went with it would break, under the
# probe of another run too.
UV_PYTHON_VOLUME = "torchbisect-uv-python"
UV_PYTHON = "/opt/torchbisect/python"
ALL_GPUS = "all"  # run(gpu=ALL_GPUS): every GPU, as `docker run --gpus all`
CA_PATH = "/etc/torchbisect/ca-bundle.crt"
_TAIL_LINES = 60
_POLL = 2.0  # seconds between checks that the run is still alive while a container runs


@dataclass(frozen=True, kw_only=True)
class Exit:
    code: int
    oom_killed: bool
    seconds: float
    tail: str  # the last lines of its output


class Containers:
    """The containers of this run on one engine (`client()`: the SDK client, made on first use)."""

    def __init__(self, client: Callable[[], Any], *, ca_bundle: Path | None) -> None:
        self._client = client
        self.ca_bundle = ca_bundle
        self.owner = f"{socket.gethostname()}:{os.getpid()}"
        self._cleanup_registered = False

    def run(
        self,
        cell: Cell,
        step: str,
        image: str,
        command: list[str],
        *,
        workdir: Path,
        log: Path,
        timeout: float,
        mounts: tuple[Any, ...] | list[Any] = (),
        gpu: int | str | None = None,
        env: dict[str, str] | None = None,
    ) -> Exit:
        """Run one container to its end; InfraError for a timeout, a signal or the OOM killer."""
        on = "" if gpu is None else f" on GPU {gpu}"
        note(log, f"[{step} in {image}{on}] {shlex.join(command)}")
        with self._container(
            cell,
            step,
            image,
            command,
            workdir=workdir,
            mounts=[*self._mounts(workdir), *mounts],
            env=self._environment(env or {}, gpu, network=step != "probe"),
            gpu=gpu,
            log=log,
        ) as (box, pump):
            import docker

            started = time.monotonic()
            try:
                status = _wait(box, started + timeout)
                if status is not None:
                    box.reload()
            except docker.errors.NotFound:  # removed under us: release() on Ctrl-C, or by hand
                raise InfraError(
                    f"{step} of {cell.id} was stopped: its container was removed "
                    f"while it ran; see {log}"
                ) from None
            seconds = time.monotonic() - started
            if status is None:
                raise InfraError(
                    f"{step} of {cell.id} timed out after {timeout:g} s and was killed; see {log}"
                )
            pump.join(10)
            done = Exit(
                code=int(status.get("StatusCode", -1)),
                seconds=seconds,
                oom_killed=bool(box.attrs["State"].get("OOMKilled")),
                tail=pump.tail(),
            )
        _raise_if_killed(done, f"{step} of {cell.id}", log)
        return done

    def remove(self, labels: dict[str, str]) -> None:
        """Remove (forcibly) the containers carrying all of `labels`; failures are ignored."""
        wanted = [f"{key}={value}" for key, value in labels.items()]
        with contextlib.suppress(Exception):
            for box in self._client().containers.list(all=True, filters={"label": wanted}):
                with contextlib.suppress(Exception):
                    box.remove(force=True)

    def remove_orphans(self) -> None:
        """Containers of runs on this host whose process is gone (killed with SIGKILL)."""
        host = socket.gethostname()
        for box in self._client().containers.list(all=True, filters={"label": OWNER_LABEL}):
            owner_host, _, pid = box.labels.get(OWNER_LABEL, "").rpartition(":")
            if owner_host == host and pid.isdigit() and not _alive(int(pid)):
                with contextlib.suppress(Exception):
                    box.remove(force=True)

    @contextlib.contextmanager
    def _container(
        self,
        cell: Cell,
        step: str,
        image: str,
        command: list[str],
        *,
        workdir: Path,
        mounts: list[Any],
        gpu: int | str | None,
        env: dict[str, str],
        log: Path,
    ) -> Iterator[tuple[Any, _LogPump]]:
        import docker
        from docker.types import DeviceRequest

        self._remove_when_we_die()
        run = uuid.uuid4().hex[:12]
        labels = {
            LABEL: cell.id,
            PROBE_LABEL: cell.probe,
            OWNER_LABEL: self.owner,
            "torchbisect.step": step,
            "torchbisect.run": run,
        }
        gpus = (
            []
            if gpu is None
            else [
                DeviceRequest(count=-1, capabilities=[["gpu"]])
                if gpu == ALL_GPUS
                else DeviceRequest(device_ids=[str(gpu)], capabilities=[["gpu"]])
            ]
        )
        try:
            try:
                box = self._client().containers.create(
                    image,
                    command,
                    name=f"torchbisect-{_safe(cell.id)}-{step}-{run[:6]}",
                    labels=labels,
                    environment=env,
                    mounts=mounts,
                    device_requests=gpus,
                    working_dir=str(workdir),
                    init=True,
                    privileged=False,
                )
                box.start()
            except docker.errors.APIError as exc:  # e.g. no GPU runtime, a bad mount
                raise InfraError(
                    f"cannot start the {step} container of {cell.id}: {exc.explanation or exc}"
                ) from None
            yield box, _LogPump(box, log)
        finally:  # also on Ctrl-C, and when that came in the middle of create()
            self.remove({"torchbisect.run": run})

    def _remove_when_we_die(self) -> None:
        """Killed with SIGKILL, we cannot remove our containers: the watchdog will (proc.at_end)."""
        if self._cleanup_registered:
            return
        self._cleanup_registered = True
        label = f"{OWNER_LABEL}={self.owner}"
        proc.at_end([sys.executable, "-c", _REMOVE_OWNED % (label,)])

    def _mounts(self, workdir: Path) -> list[Any]:
        from docker.types import Mount

        mounts = [
            bind(workdir, str(workdir)),
            Mount(target=UV_CACHE, source=uv_cache_volume(), type="volume"),
            Mount(target=UV_PYTHON, source=UV_PYTHON_VOLUME, type="volume"),
        ]
        if self.ca_bundle:
            mounts.append(bind(self.ca_bundle, CA_PATH, read_only=True))
        return mounts

    def _environment(
        self, extra: dict[str, str], gpu: int | str | None, *, network: bool = True
    ) -> dict[str, str]:
        """The container's whole environment: nothing of the host's but its proxies, and those
        only for the steps that download (a proxy URL may carry a password; a probe needs none).
        """
        env = {
            "PYTHONUNBUFFERED": "1",
            "UV_CACHE_DIR": UV_CACHE,
            "UV_LINK_MODE": "copy",
            "UV_PYTHON_INSTALL_DIR": UV_PYTHON,
            "UV_NO_PROGRESS": "1",
            # bytecode stays in the container: no root-owned __pycache__ in the host's venv
            "PYTHONPYCACHEPREFIX": "/tmp/torchbisect-pycache",
        }
        if self.ca_bundle:  # uv reads SSL_CERT_FILE (UV_NATIVE_TLS is deprecated since 0.13)
            env.update(SSL_CERT_FILE=CA_PATH, PIP_CERT=CA_PATH, REQUESTS_CA_BUNDLE=CA_PATH)
        for var in (
            "HTTP_PROXY",
            "HTTPS_PROXY",
            "NO_PROXY",
            "http_proxy",
            "https_proxy",
            "no_proxy",
        ):
            if network and var in os.environ:
                env[var] = os.environ[var]
        if gpu is None:  # nvidia/cuda images say NVIDIA_VISIBLE_DEVICES=all
            env["NVIDIA_VISIBLE_DEVICES"] = "void"
        return {**env, **extra}


class _LogPump(threading.Thread):
    """Copies a container's output to the cell's log as it comes, masked, keeping the last lines.

    Only the first `proc.KEEP_BYTES` are written as they come; after that only the last
    KEEP_BYTES are held, and written (with the count of what was cut) when the container ends:
    a container printing 2 GB makes neither a 2 GB log nor a 2 GB torchbisect.
    """

    def __init__(self, container: Any, log: Path) -> None:
        super().__init__(daemon=True)
        self._container, self._log = container, log
        self._kept = proc.Kept()
        self.start()

    def run(self) -> None:
        with contextlib.suppress(Exception), files.open_append(self._log) as out:
            try:
                for chunk in self._container.logs(stream=True, follow=True):
                    self._kept.add(chunk)
                    if text := self._kept.new_lines():
                        out.write(text)
                        out.flush()
            finally:
                out.write(self._kept.rest())

    def tail(self) -> str:
        return "\n".join(self._kept.text().splitlines()[-_TAIL_LINES:])


def uv_cache_volume() -> str:
    """The named volume every container uses as uv's cache (two deployments on one host, or a
    test, keep theirs apart with $TORCHBISECT_UV_CACHE_VOLUME)."""
    return os.environ.get("TORCHBISECT_UV_CACHE_VOLUME") or UV_CACHE_VOLUME


def bind(source: Path, target: str, *, read_only: bool = False) -> Any:
    """A bind mount of a host path."""
    from docker.types import Mount

    return Mount(
        target=target, source=str(Path(source).resolve()), type="bind", read_only=read_only
    )


def _wait(box: Any, deadline: float) -> dict[str, Any] | None:
    """The container's exit status, or None at the deadline; gives up when the run ends."""
    import requests

    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        try:
            status: dict[str, Any] = box.wait(timeout=min(_POLL, left))
            return status
        except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError):
            pass
        # A worker thread whose run was interrupted: the interpreter is exiting.
        if not threading.main_thread().is_alive():
            raise InfraError("interrupted: torchbisect is exiting")


def _raise_if_killed(done: Exit, what: str, log: Path) -> None:
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


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _safe(text: str) -> str:
    return "".join(c if c.isalnum() or c in "_.-" else "_" for c in text)
