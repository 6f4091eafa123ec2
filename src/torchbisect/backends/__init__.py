"""Backends: where a cell's torch gets installed and its probe runs.

`BACKENDS` maps each `--backend` name to its class, imported on first use so that the venv backend
never pays for the Docker SDK; each class says what it can do (`Capabilities`, asked through
`capabilities(name)`), so callers ask instead of comparing names.  `choose_backend` is what
commands call: with no name it takes docker when an engine answers and venv otherwise, and says
which in one line.  Every backend is built from one `BackendOptions`; an option it does not have
is a TypeError, never dropped.

Inside: `base` (the interface, the options, the `Watcher` that hears phases and downloads),
`wheels` (a cell's wheel: local path, download, sha256), `preinstalled` (a torch already in an
interpreter or an image, and its fingerprint), `container` (one container run), `docker_image`,
`docker_gpu` and `docker_cache` (the images, the GPU check and preflight, and the uv cache volume
of the docker backend).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from ..errors import BackendUnavailable, ConfigError
from .base import Backend, BackendOptions, Capabilities, Prepared, ProbeOutput, Watcher

# name -> (module under torchbisect.backends, class name)
BACKENDS: dict[str, tuple[str, str]] = {
    "docker": ("docker", "DockerBackend"),
    "venv": ("venv", "VenvBackend"),
    "current": ("current", "CurrentBackend"),
}

__all__ = ["BACKENDS", "Backend", "BackendOptions", "Capabilities", "Prepared", "ProbeOutput",
           "Watcher", "backend_class", "capabilities", "choose_backend", "docker_answers", "label"]


def backend_class(name: str) -> type[Backend]:
    if name not in BACKENDS:
        raise ConfigError(f"unknown backend {name!r}: choose one of {', '.join(BACKENDS)}")
    module, cls = BACKENDS[name]
    try:
        return getattr(importlib.import_module(f"{__name__}.{module}"), cls)
    except ImportError as err:
        raise BackendUnavailable(f"the {name} backend cannot be loaded ({err}); "
                                 "choose another --backend") from None


def capabilities(name: str) -> Capabilities:
    """What the backend called `name` can do (its module is imported, not the Docker SDK)."""
    return backend_class(name).can


def label(name: str) -> str:
    """What a page calls the runs of the backend `name` ("the venv backend"); a name that no
    backend has (an older store's) is called the same way."""
    return backend_class(name).label if name in BACKENDS else f"the {name} backend"


def overlaying() -> str:
    """The backend(s) that can run `bisect --pytorch-repo`'s commit overlays, for a sentence."""
    return " or ".join(n for n in BACKENDS if capabilities(n).commit_overlays)


def choose_backend(name: str | None, options: BackendOptions | None = None, *,
                   say: Callable[[str], None] = print) -> Backend:
    """The backend called `name` (None: docker when an engine answers, else venv), built with
    `options` and checked.  Raises BackendUnavailable when the backend cannot run here.
    """
    built = options or BackendOptions()
    if name is None:
        name, why = ("docker", "a Docker engine answers") if docker_answers() else (
            "venv", "no Docker engine answers")
        say(f"backend: {name} ({why}; choose with --backend)")
    backend = backend_class(name)(built)
    backend.check()
    return backend


def docker_answers(timeout: float = 5.0) -> bool:
    """True when the docker backend is installed and an engine answers a ping."""
    try:
        backend_class("docker")
        import docker

        docker.from_env(timeout=timeout).ping()
        return True
    except Exception:  # noqa: BLE001 - any failure means "no engine here"
        return False

