"""`torchbisect cache`: what a backend keeps between runs, its size, and `--prune`.

The docker backend keeps a uv cache volume; `matrix` and `bisect` prune it when they end
(backends/docker_cache.py says how, and why `uv cache prune --ci`), and this command is the same
prune on demand.  The venv backend keeps one venv per cell under the work folder (reused while its
wheel is the same) and fills the host's uv cache; `--prune` removes the venvs and prunes that
cache the same way (the next run installs again).  The backend is chosen as `matrix` chooses it.
Exit 0; 3 when the docker volume could not be measured or pruned (another run holding uv's lock
past UV_LOCK_TIMEOUT, no runner image on the engine) or another run holds the work folder; 5 when
the backend cannot run here (no Docker engine, no uv).
"""

from __future__ import annotations

import argparse

from .. import defaults
from ..errors import ConfigError
from . import options as flags


def configure(parser: argparse.ArgumentParser) -> None:
    flags.add_backend_option(parser, "whose cache (default: docker when an engine answers, else "
                                     "venv)")
    parser.add_argument("--prune", action="store_true",
                        help="docker: `uv cache prune --ci` in the volume; venv: remove the "
                             "cells' venvs and `uv cache prune --ci` on this host (uv's cache is "
                             "shared with other uv users); every downloaded wheel goes, the next "
                             "run downloads what it installs")
    flags.add_workdir_option(parser, "venv: the work folder whose venvs are measured or pruned; "
                                     "docker: where the log of the container that measures or "
                                     "prunes goes (under docker/_uv-cache/)")


def run(args: argparse.Namespace) -> int:
    from ..backends import docker_answers

    workdir = args.workdir or defaults.WORKDIR
    backend = args.backend or ("docker" if docker_answers() else "venv")
    if backend == "current":
        raise ConfigError("--backend current keeps nothing between runs: choose docker or venv")
    return (_docker if backend == "docker" else _venv)(workdir, prune=args.prune)


def _docker(workdir, *, prune: bool) -> int:
    from ..backends.base import BackendOptions
    from ..backends.container import uv_cache_volume
    from ..backends.docker import DockerBackend
    from ..backends.docker_cache import prune as prune_volume
    from ..backends.docker_cache import size
    from ..utils.words import megabytes

    backend = DockerBackend(BackendOptions(workdir=workdir))
    backend.ping()
    volume = uv_cache_volume()
    if prune:
        pruned = prune_volume(backend)
        print(pruned or f"uv cache volume {volume} does not exist: nothing to prune")
        return 0
    measured = size(backend)
    print(f"uv cache volume {volume}: does not exist" if measured is None else
          f"uv cache volume {volume}: {megabytes(measured)} (`torchbisect cache --prune` "
          "prunes it; docker runs of matrix and bisect do when they end)")
    return 0


def _venv(workdir, *, prune: bool) -> int:
    import sys

    from ..backends.venv import folder_bytes, kept
    from ..backends.venv import prune as prune_venvs
    from ..utils import runlock
    from ..utils.words import count, megabytes

    if prune:  # not while a matrix, probe or bisect builds venvs in the same folder
        with runlock.hold([workdir], command="torchbisect cache --prune",
                          say=lambda text: print(f"torchbisect cache: {text}", file=sys.stderr)):
            for line in prune_venvs(workdir):
                print(line)
        return 0
    for what, path in kept(workdir).items():
        venvs = f"{count(len(list(path.glob('*/pyvenv.cfg'))), 'venv')}, " \
            if what == "venvs" else ""
        print(f"{what}: {venvs}{megabytes(folder_bytes(path))} in {path}")
    print("`torchbisect cache --backend venv --prune` removes the venvs and prunes uv's cache")
    return 0
