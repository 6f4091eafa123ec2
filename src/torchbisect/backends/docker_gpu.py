"""Can this Docker engine give a container a GPU?  (The NVIDIA Container Toolkit.)

`docker run --gpus` works only where the engine has a GPU device driver: the NVIDIA Container
Toolkit's hook, or CDI specifications it generated.  The engine's API lists neither, so this asks
by behaviour, once per run and only when a GPU will be requested: a throwaway container asking for
one GPU is started from an image already on the host (nothing is pulled).  An engine without a
driver refuses that start with 'could not select device driver "" with capabilities: [[gpu]]';
that becomes one sentence and exit 5 before any cell runs, instead of an engine error per cell.

`gpus_in_a_container` is the preflight of a runner (`torchbisect preflight`): it goes one step
further and runs `nvidia-smi -L` in a container given every GPU, as `docker run --gpus all`
would, and returns the GPUs that container saw.  The image is a small glibc one: the toolkit
mounts the driver's nvidia-smi into whatever image asks for a GPU.
"""

from __future__ import annotations

import contextlib
import uuid
from typing import Any

from ..errors import BackendUnavailable, InfraError
from ..model import Cell, Channel
from ..utils.words import last_line
from .container import ALL_GPUS

NO_DRIVER = "could not select device driver"
NO_TOOLKIT = (
    "this Docker engine cannot give a container a GPU (the NVIDIA Container Toolkit is "
    "not set up for it): install the toolkit, run `nvidia-ctk runtime configure "
    "--runtime=docker` and restart dockerd, or use --backend venv"
)
PREFLIGHT_IMAGE = "ubuntu:24.04"


def refuses_gpus(exc: Exception) -> bool:
    """Is this engine error the one an engine without a GPU device driver gives?"""
    return NO_DRIVER in str(getattr(exc, "explanation", None) or exc)


def require_gpu_support(client: Any, image: str | None = None) -> None:
    """Raise BackendUnavailable (one sentence) when the engine cannot attach a GPU.

    `image` defaults to any image on the host; with none there is nothing to try without
    pulling, and the first probe container will meet the same error.
    """
    import docker
    from docker.types import DeviceRequest

    image = image or _local_image(client)
    if image is None:
        return
    box = None
    try:
        box = client.containers.create(
            image,
            ["true"],
            name=f"torchbisect-gpu-check-{uuid.uuid4().hex[:8]}",
            labels={"torchbisect.step": "gpu-check"},
            device_requests=[DeviceRequest(count=1, capabilities=[["gpu"]])],
        )
        box.start()
    except docker.errors.APIError as exc:
        if refuses_gpus(exc):
            raise BackendUnavailable(NO_TOOLKIT) from None
        # any other refusal (no `true` in that image, say) tells nothing about GPUs
    finally:
        if box is not None:
            with contextlib.suppress(Exception):
                box.remove(force=True)


def gpus_in_a_container(backend: Any, image: str = PREFLIGHT_IMAGE) -> list[str]:
    """The `nvidia-smi -L` lines of a container of `image` given every GPU (pulled if missing),
    run by `backend` (a DockerBackend, which imports this module).

    BackendUnavailable (exit 5) when the engine cannot attach a GPU; InfraError (exit 3) when the
    container starts but lists none (a broken driver or toolkit).
    """
    folder = backend.cells_dir / "_preflight"
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / "preflight.log"
    backend.images.ensure(image, log)
    require_gpu_support(backend.client, image)
    job = Cell(id="gpu-preflight", channel=Channel.PREINSTALLED, version="", cuda="", python="")
    done = backend.containers.run(
        job,
        "preflight",
        image,
        ["nvidia-smi", "-L"],
        workdir=folder,
        log=log,
        timeout=120,
        gpu=ALL_GPUS,
    )
    gpus = [line for line in done.tail.splitlines() if line.startswith("GPU ")]
    if done.code != 0 or not gpus:
        raise InfraError(
            f"a container of {image} given every GPU lists none (`nvidia-smi -L` "
            f"exit {done.code}: {last_line(done.tail) or 'no output'}): check the "
            f"driver (`nvidia-smi` on the host) and the NVIDIA Container Toolkit "
            f"(`nvidia-ctk --version`); see {log}"
        )
    return gpus


def _local_image(client: Any) -> str | None:
    for image in client.images.list():
        if image.tags:
            return str(image.tags[0])
    return None
