"""Can this Docker engine give a container a GPU?  (The NVIDIA Container Toolkit.)

`docker run --gpus` works only where the engine has a GPU device driver: the NVIDIA Container
Toolkit's hook, or CDI specifications it generated.  The engine's API lists neither, so this asks
by behaviour, once per run and only when a GPU will be requested: a throwaway container asking for
one GPU is started from an image already on the host (nothing is pulled).  An engine without a
driver refuses that start with 'could not select device driver "" with capabilities: [[gpu]]';
that becomes one sentence and exit 5 before any cell runs, instead of an engine error per cell.
"""

from __future__ import annotations

import contextlib
import uuid
from typing import Any

from ..errors import BackendUnavailable

NO_DRIVER = "could not select device driver"
NO_TOOLKIT = ("this Docker engine cannot give a container a GPU (the NVIDIA Container Toolkit is "
              "not set up for it): install the toolkit, run `nvidia-ctk runtime configure "
              "--runtime=docker` and restart dockerd, or use --backend venv")


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
            image, ["true"], name=f"torchbisect-gpu-check-{uuid.uuid4().hex[:8]}",
            labels={"torchbisect.step": "gpu-check"},
            device_requests=[DeviceRequest(count=1, capabilities=[["gpu"]])])
        box.start()
    except docker.errors.APIError as exc:
        if refuses_gpus(exc):
            raise BackendUnavailable(NO_TOOLKIT) from None
        # any other refusal (no `true` in that image, say) tells nothing about GPUs
    finally:
        if box is not None:
            with contextlib.suppress(Exception):
                box.remove(force=True)


def _local_image(client: Any) -> str | None:
    for image in client.images.list():
        if image.tags:
            return image.tags[0]
    return None
