"""The docker backend: one container per cell step, from a runner image built once per base image
(docker_image.py); each container is run by `container.py`.

`prepare` runs one container that creates the cell's venv with uv and installs its wheel; `probe`
runs a second one that runs the probe with that venv's python: a copy of the probe's file made
for that run in the cell's folder (probe/scripts.py `snapshot`), mounted read-only.  The venv
lives on the host, in `<workdir>/docker/<cell id>/venv`, bind-mounted at the same path in both
containers (a venv's paths are absolute); the probe container also mounts the build's own compile
cache volume, so a rerun of that build starts with the Inductor and Triton kernels it compiled
(docker_compile.py: an engine-owned volume, no root-owned file on the host); uv's cache is the
named volume `torchbisect-uv-cache`, shared by every container of the host, so each wheel and
dependency is downloaded once per run (the run prunes it when it ends: docker_cache.py).  The
runner image (`containers/Dockerfile`: base image + python3 + uv) is built with the docker SDK
and tagged by a hash of its inputs, so it is reused until they change.  A `preinstalled` cell
runs the python of its base image (an NGC image, say) and installs nothing.

`release` removes a cell's containers from another thread; `check` removes those a killed run
left behind; `finish` prunes the uv cache volume at the end of a run that installed through it.
A signal, the OOM killer, a timeout or a failed install raise InfraError.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import BackendUnavailable, ConfigError, InfraError
from ..model import Cell, Channel
from ..probe.scripts import snapshot
from ..utils import files
from ..utils.words import last_line
from .base import (
    Backend,
    BackendOptions,
    Capabilities,
    Prepared,
    ProbeOutput,
    cell_lock,
    read_document,
)
from .container import LABEL, OWNER_LABEL, PROBE_LABEL, Containers, bind
from .docker_compile import compile_env, volume_mount
from .docker_image import RunnerImages, default_base_image, host_ca_bundle
from .preinstalled import FINGERPRINT_SNIPPET, IMAGE_ANSWER, read_image_answer
from .wheels import cell_wheel, discard, extra_index, local_wheel, sha256_file

__all__ = ["LABEL", "OWNER_LABEL", "DockerBackend"]


@dataclass(frozen=True, kw_only=True)
class _Handle:
    image: str
    workdir: Path


class DockerBackend(Backend):
    """Cells in containers; see the module docstring."""

    name = "docker"
    label = "the docker backend"
    can = Capabilities(
        containers=True,
        keeps="a uv cache volume and a compile cache volume per build probed on the Docker engine",
    )

    def __init__(self, options: BackendOptions | None = None) -> None:
        options = options or BackendOptions()  # `python` is not read: cells run the image's
        self.cells_dir = Path(options.workdir).absolute() / "docker"
        self.overlay = options.overlay
        self.watcher = options.watcher
        ca_bundle = options.ca_bundle
        self.ca_bundle = (
            host_ca_bundle()
            if ca_bundle == "auto"
            else (Path(ca_bundle).resolve() if ca_bundle else None)
        )
        self.install_timeout = options.install_timeout
        self._client = options.client
        self.containers = Containers(lambda: self.client, ca_bundle=self.ca_bundle)
        self.images = RunnerImages(
            lambda: self.client, ca_bundle=self.ca_bundle, timeout=self.install_timeout
        )
        self._images: dict[tuple[str, str], tuple[str, str]] = {}  # → (python, fingerprint)

    # -- the Backend interface ----------------------------------------------------------------

    def check(self) -> None:
        self.ping()
        self.containers.remove_orphans()
        from ..utils.gpus import list_gpus
        from .docker_gpu import require_gpu_support

        if list_gpus():  # every probe will ask for a GPU: can this engine attach one?
            require_gpu_support(self.client)

    def ping(self) -> None:
        """BackendUnavailable (one sentence) when no engine answers."""
        host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
        try:
            self.client.ping()
        except Exception as exc:  # the SDK raises several unrelated types for "nobody answers"
            raise BackendUnavailable(
                f"no Docker engine answers at {host} ({type(exc).__name__}): "
                "start dockerd (.ci/docker-setup.sh) or use --backend venv"
            ) from None

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
        if old.get("url") == cell.url and old.get("wheel_stat") == _stat(cell):
            return str(old["wheel_sha256"])  # hashed when installed, and not rebuilt since
        return sha256_file(path)

    def prepare(self, cell: Cell, *, log: Path) -> Prepared:
        started = time.monotonic()
        self.watcher.phase(cell, "install")
        workdir = self.cells_dir / cell.id
        workdir.mkdir(parents=True, exist_ok=True)
        if cell.channel is Channel.PREINSTALLED:
            python, fingerprint = self._inspect(cell, log=log)
            return Prepared(
                cell=cell,
                python=python,
                wheel_sha256=fingerprint,
                seconds_install=time.monotonic() - started,
                env=dict(cell.env),
                handle=_Handle(image=cell.base_image or "", workdir=workdir),
            )
        image = self.images.runner(cell.base_image or default_base_image(cell.cuda), log)
        # Another run sharing this work directory may be installing the same cell: wait for it.
        with cell_lock(workdir.with_name(f"{cell.id}.lock")):
            sha = self._installed(cell, image, workdir, log)
        return Prepared(
            cell=cell,
            python=str(workdir / "venv" / "bin" / "python"),
            wheel_sha256=sha,
            seconds_install=time.monotonic() - started,
            env=dict(cell.env),
            handle=_Handle(image=image, workdir=workdir),
        )

    def _installed(self, cell: Cell, image: str, workdir: Path, log: Path) -> str:
        """The cell's venv in `workdir`, reused or (re)built; its wheel's sha256."""
        venv, marker = workdir / "venv", workdir / "prepared.json"
        want = {
            "image": image,
            "url": cell.url,
            "wheel_stat": _stat(cell),
            "overlay": self.overlay or cell.overlay,
            "python": cell.python,
            "index": extra_index(cell, credentials=False),
        }  # no password in the marker
        old = _read_json(marker) or {}
        if (
            want == {k: old.get(k) for k in want}
            and (venv / "bin" / "python").exists()
            and cell.sha256 in (None, old.get("wheel_sha256"))
        ):
            sha = old["wheel_sha256"]  # installed by an earlier run: keep that venv
        else:
            marker.unlink(missing_ok=True)
            # a folder of its own under workdir, named by the link's validated wheel name
            wheel = cell_wheel(cell, workdir / "downloads", log=log, watcher=self.watcher)
            sha = wheel.sha256
            try:
                self._install(cell, image, wheel.path, venv, overlay=bool(want["overlay"]), log=log)
            finally:
                if wheel.downloaded:
                    discard(wheel.path)  # uv's cache and the venv hold it now
            files.write_text(marker, json.dumps({**want, "wheel_sha256": sha}))
        return str(sha)

    def probe(
        self, prepared: Prepared, *, gpu: int | str | None, probe_args: list[str], log: Path
    ) -> ProbeOutput:
        cell, handle = prepared.cell, prepared.handle
        self.watcher.phase(cell, "probe")
        # A fresh name per run: a container orphaned by a killed run must not answer for this one.
        run = uuid.uuid4().hex
        doc = handle.workdir / f"result-{run}.json"
        copies = handle.workdir / f"probe-{run}"
        try:
            # the probe (or the adapter and the exit-status probe it runs), read once into the
            # cell's folder; the container is given those copies, each mounted read-only
            how = snapshot(cell.probe, copies)
            command = how.launch.argv(prepared.python, probe_args, str(doc), where=_in_container)
            probes = [bind(path, _in_container(path), read_only=True) for path in how.launch.files]
            build = [handle.image] if cell.channel is Channel.PREINSTALLED else []
            caches = volume_mount(cell, "\0".join([*build, prepared.wheel_sha256]))
            done = self.containers.run(
                cell,
                "probe",
                handle.image,
                command,
                workdir=handle.workdir,
                mounts=[*probes, caches],
                log=log,
                timeout=cell.timeout,
                gpu=gpu,
                env={**compile_env(), **prepared.env},  # the cell's own env: wins
            )
            text = read_document(doc)
        finally:
            doc.unlink(missing_ok=True)
            shutil.rmtree(copies, ignore_errors=True)
        return ProbeOutput(
            json_text=text,
            exit_code=done.code,
            seconds=done.seconds,
            log_tail=done.tail,
            probe_version=how.version,
        )

    def release(self, prepared: Prepared) -> None:
        """Remove the cell's containers of this probe (one still running on Ctrl-C), not another
        probe's of the same build; keep its venv."""
        self.containers.remove(
            {
                LABEL: prepared.cell.id,
                PROBE_LABEL: prepared.cell.probe,
                OWNER_LABEL: self.containers.owner,
            }
        )

    def finish(self, *, say: Callable[[str], None]) -> None:
        """Prune uv's cache volume when this run installed through it (docker_cache.py)."""
        if self.images.used():
            from .docker_cache import prune_at_end

            prune_at_end(self, say)

    def measure_kept(self) -> Iterator[str]:
        """The size of uv's cache volume (docker_cache.py) and the builds' compile cache volumes
        (docker_compile.py), after asking the engine."""
        from . import docker_compile
        from .docker_cache import measured

        self.ping()
        yield measured(self)
        yield docker_compile.measured(self.client)

    def prune_kept(self) -> Iterator[str]:
        """`uv cache prune --ci` in uv's volume (docker_cache.py), then remove the builds' compile
        cache volumes (a line when there were any: docker_compile.py), after asking the engine."""
        from . import docker_compile
        from .docker_cache import pruned_on_demand

        self.ping()
        yield pruned_on_demand(self)
        if line := docker_compile.pruned(self.client):
            yield line

    # -- preparing ------------------------------------------------------------------------------

    @property
    def client(self) -> Any:
        if self._client is None:
            import docker

            try:
                self._client = docker.from_env(timeout=120)
            except docker.errors.DockerException as exc:
                raise BackendUnavailable(
                    f"cannot reach a Docker engine ({exc}): start dockerd or use --backend venv"
                ) from None
        return self._client

    def _inspect(self, cell: Cell, *, log: Path | None) -> tuple[str, str]:
        """(python, torch fingerprint) of a preinstalled cell's image, once per image."""
        if not cell.base_image:
            raise ConfigError(
                f"cell {cell.id}: on the docker backend a preinstalled cell needs "
                "an image whose python has torch: name one (an NGC image, say) "
                "as `preinstalled: {image: …}` in matrix.yaml"
            )
        wanted = cell.interpreter or ""  # "": the image's python3
        key = (self.images.ensure(cell.base_image, log).id, wanted)
        if key not in self._images:
            workdir = self.cells_dir / cell.id
            workdir.mkdir(parents=True, exist_ok=True)
            done = self.containers.run(
                cell,
                "inspect",
                cell.base_image,
                ["sh", "-c", IMAGE_ANSWER, FINGERPRINT_SNIPPET, wanted],
                workdir=workdir,
                log=log or workdir / "inspect.log",
                timeout=300,
            )
            answer = read_image_answer(done.tail) if done.code == 0 else None
            if answer is None:
                raise InfraError(
                    f"cell {cell.id}: the python of {cell.base_image} has no torch "
                    f"({last_line(done.tail) or 'no output'})"
                )
            self._images[key] = answer
        return self._images[key]

    def _install(
        self, cell: Cell, image: str, wheel: Path, venv: Path, *, overlay: bool, log: Path
    ) -> None:
        target = f"/wheels/{wheel.name}"
        create = ["uv", "venv", "--clear", "--no-project", "--python"]
        if overlay:  # the image's python and packages, torch shadowed by the venv's
            create += ["python3", "--python-preference", "only-system", "--system-site-packages"]
        else:
            create += [cell.python]
        install = [
            "uv",
            "pip",
            "install",
            "--python",
            str(venv / "bin" / "python"),
            "--reinstall-package",
            "torch",
        ]  # a base torch must not count as installed
        index = extra_index(cell)  # nightlies' pytorch-triton; uv ranks extra indexes first
        if overlay:
            install.append("--no-deps")
        elif index:
            install += ["--extra-index-url", index]
        script = shlex.join([*create, str(venv)])
        if overlay:
            script += f" && {_see_base_packages(venv)}"
        script += f" && {shlex.join([*install, target])}"
        # root in the container; the venv must belong to whoever runs torchbisect, or a runner
        # that is not root cannot delete it on its next job
        script += f" && chown -R {os.getuid()}:{os.getgid()} {shlex.quote(str(venv))}"
        done = self.containers.run(
            cell,
            "install",
            image,
            ["sh", "-c", script],
            workdir=venv.parent,
            log=log,
            timeout=self.install_timeout,
            mounts=[bind(wheel, target, read_only=True)],
        )
        if done.code != 0:
            raise InfraError(
                f"installing {cell.id} failed (exit {done.code}): "
                f"{last_line(done.tail) or 'no output'}; see {log}"
            )


# The overlay sees the packages of the image's python3 after its own, also when that python3 is
# itself a venv (`--system-site-packages` would give the venv's *base* interpreter's packages and
# miss the CUDA libraries): a .pth in the overlay lists them, as the venv backend's does.
_BASE_DIRS = (
    "import sys; print(chr(10).join(p for p in sys.path "
    "if p.endswith(('site-packages', 'dist-packages'))))"
)
_PURELIB = "import sysconfig; print(sysconfig.get_paths()['purelib'])"


def _see_base_packages(venv: Path) -> str:
    """Shell: write the .pth listing the site folders of the image's python3 into `venv`."""
    own = shlex.join([str(venv / "bin" / "python"), "-c", _PURELIB])
    return f'{shlex.join(["python3", "-c", _BASE_DIRS])} > "$({own})/_torchbisect_overlay_base.pth"'


def _in_container(path: Path) -> str:
    """Where a probe file is mounted: each of the run's copies on its own, read-only, so the
    container sees those files and nothing else of the folder they were copied into."""
    return f"/probes/{path.name}"


def _stat(cell: Cell) -> list[int] | None:
    """Size and mtime of a local wheel: a rebuilt dev wheel at the same path is reinstalled."""
    path = local_wheel(cell)
    with contextlib.suppress(OSError):
        if path is not None:
            info = path.stat()
            return [info.st_size, info.st_mtime_ns]
    return None


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None
