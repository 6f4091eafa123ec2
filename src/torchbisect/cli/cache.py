"""`torchbisect cache`: the docker backend's uv cache volume, its size, and `--prune`.

`matrix` and `bisect` prune the volume when they end (backends/docker_cache.py says how, and why
`uv cache prune --ci`); this command is the same prune on demand, and tells how big the volume is.
Exit 0; 3 when the volume could not be measured or pruned (another run holding uv's lock past
UV_LOCK_TIMEOUT, no runner image on the engine); 5 when no Docker engine answers.
"""

from __future__ import annotations

import argparse

from .. import defaults
from . import options as flags


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--prune", action="store_true",
                        help="prune it: `uv cache prune --ci`, every downloaded wheel goes (the "
                             "next run downloads what it installs)")
    flags.add_workdir_option(parser, "where the log of the container that measures or prunes "
                                     "goes (under docker/_uv-cache/)")


def run(args: argparse.Namespace) -> int:
    from ..backends.base import BackendOptions
    from ..backends.container import uv_cache_volume
    from ..backends.docker import DockerBackend
    from ..backends.docker_cache import prune, size
    from ..words import megabytes

    backend = DockerBackend(BackendOptions(workdir=args.workdir or defaults.WORKDIR))
    backend.ping()
    volume = uv_cache_volume()
    if args.prune:
        pruned = prune(backend)
        print(pruned or f"uv cache volume {volume} does not exist: nothing to prune")
        return 0
    measured = size(backend)
    print(f"uv cache volume {volume}: does not exist" if measured is None else
          f"uv cache volume {volume}: {megabytes(measured)} (`torchbisect cache --prune` "
          "prunes it; docker runs of matrix and bisect do when they end)")
    return 0
