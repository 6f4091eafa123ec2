"""Backends: where a cell's torch gets installed and its probe runs.

`BACKENDS` maps each `--backend` name to its class, imported on first use so that the venv backend
never pays for the Docker SDK; each class says what it can do (`Capabilities`, asked through
`capabilities(name)`), what it keeps and how that is measured and pruned (`measure_kept`,
`prune_kept`), and what a page calls it (`label(name)`), so callers ask instead of comparing
names.  `default_backend(purpose)` is the one place that chooses a backend when no `--backend`
names one: for a `Purpose` (the builds of a matrix or a bisection, a `bisect --script`, a torch
already installed, the benchmarks).  `choose_backend` is what commands call: with no name it
takes the default for its purpose, and when the host decided (docker when an engine answers,
venv otherwise) says which in one line.  Every backend is built from one `BackendOptions`; an
option it does not have is a TypeError, never dropped.

Inside: `base` (the interface, the options, the `Watcher` that hears phases and downloads),
`wheels` (a cell's wheel: local path, download, sha256), `preinstalled` (a torch already in an
interpreter or an image, and its fingerprint), `container` (one container run), `docker_image`,
`docker_gpu` and `docker_cache` (the images, the GPU check and preflight, and the uv cache volume
of the docker backend).
"""

from __future__ import annotations

import enum
import importlib
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import BackendUnavailable, ConfigError
from .base import Backend, BackendOptions, Capabilities, Prepared, ProbeOutput, Watcher

# name -> (module under torchbisect.backends, class name)
BACKENDS: dict[str, tuple[str, str]] = {
    "docker": ("docker", "DockerBackend"),
    "venv": ("venv", "VenvBackend"),
    "current": ("current", "CurrentBackend"),
}

__all__ = [
    "BACKENDS",
    "Backend",
    "BackendOptions",
    "Capabilities",
    "Choice",
    "Prepared",
    "ProbeOutput",
    "Purpose",
    "Watcher",
    "backend_class",
    "capabilities",
    "choose_backend",
    "default_backend",
    "docker_answers",
    "label",
]


class Purpose(enum.Enum):
    """What a backend is chosen for when no `--backend` names one (`default_backend`)."""

    # The builds of a matrix or a bisection (and what `cache` and `preflight` speak of, as
    # those runs would choose): docker when an engine answers, else venv.
    BUILDS = "builds"
    # `bisect --script`: the user's command usually reads files of this host, so it runs in a
    # venv here (with --backend docker, inside the build's container, as the probe does).
    SCRIPT = "script"
    # A torch already installed in an interpreter (`probe`'s preinstalled cell, a matrix on a
    # machine without a GPU): that interpreter's own, nothing installed.
    OWN_TORCH = "own torch"
    # `bench`: the same backend on every host, so that its figures compare.
    BENCH = "bench"


# The purposes whose backend does not depend on the host.
_FIXED: dict[Purpose, str] = {
    Purpose.SCRIPT: "venv",
    Purpose.OWN_TORCH: "current",
    Purpose.BENCH: "venv",
}


@dataclass(frozen=True, kw_only=True)
class Choice:
    """The backend `default_backend` chose, and why when the host decided ("" when the purpose
    alone did: nothing to say beyond the command's own --help)."""

    name: str
    why: str = ""


def backend_class(name: str) -> type[Backend]:
    if name not in BACKENDS:
        raise ConfigError(f"unknown backend {name!r}: choose one of {', '.join(BACKENDS)}")
    module, cls = BACKENDS[name]
    try:
        found: type[Backend] = getattr(importlib.import_module(f"{__name__}.{module}"), cls)
        return found
    except ImportError as err:
        raise BackendUnavailable(
            f"the {name} backend cannot be loaded ({err}); choose another --backend"
        ) from None


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


def default_backend(purpose: Purpose) -> Choice:
    """The backend for `purpose` when no `--backend` names one; for the builds, docker when an
    engine answers (a ping of at most 5 seconds), else venv."""
    if purpose in _FIXED:
        return Choice(name=_FIXED[purpose])
    if docker_answers():
        return Choice(name="docker", why="a Docker engine answers")
    return Choice(name="venv", why="no Docker engine answers")


def choose_backend(
    name: str | None,
    options: BackendOptions | None = None,
    *,
    purpose: Purpose = Purpose.BUILDS,
    say: Callable[[str], None] = print,
) -> Backend:
    """The backend called `name` (None: `purpose`'s default, said in one line when the host
    decided), built with `options` and checked.  Raises BackendUnavailable when the backend
    cannot run here.
    """
    built = options or BackendOptions()
    if name is None:
        chosen = default_backend(purpose)
        name = chosen.name
        if chosen.why:
            say(f"backend: {name} ({chosen.why}; choose with --backend)")
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
