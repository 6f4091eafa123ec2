"""`torchbisect cache`: what a backend keeps between runs, its size, and `--prune`.

The docker backend keeps a uv cache volume; `matrix` and `bisect` prune it when they end
(backends/docker_cache.py says how, and why `uv cache prune --ci`), and this command is the same
prune on demand.  It also keeps a compile cache volume per build probed (docker_compile.py), which
runs keep and `--prune` removes.  The venv backend keeps one venv per cell under the work
folder (reused while its wheel is the same) and fills the host's uv cache; `--prune` removes
the venvs and prunes that cache the same way (the next run installs again).  Each backend
measures and prunes what it keeps (`measure_kept`, `prune_kept`); this command asks the one
meant.  The backend is the one the
newest run in the store used (`--store`), else the one `matrix` would choose; the first line names
it, and why.
Exit 0; 3 when the docker volume could not be measured or pruned (another run holding uv's lock
past UV_LOCK_TIMEOUT, no runner image on the engine) or another run holds the work folder; 5 when
the backend cannot run here (no Docker engine, no uv).
"""

from __future__ import annotations

import argparse
import sys

from .. import defaults
from ..cli import options as flags
from ..errors import ConfigError


def configure(parser: argparse.ArgumentParser) -> None:
    flags.add_backend_option(
        parser,
        "whose cache (default: the backend of the newest run in "
        "--store; without one, docker when an engine answers, else "
        "venv)",
    )
    flags.add_store_option(parser, "the store whose newest run names the backend")
    parser.add_argument(
        "--prune",
        action="store_true",
        help="docker: remove the builds' compile cache volumes and `uv cache "
        "prune --ci` in uv's volume; venv: remove the "
        "cells' venvs and `uv cache prune --ci` on this host (uv's cache is "
        "shared with other uv users); every downloaded wheel goes, the next "
        "run downloads what it installs",
    )
    flags.add_workdir_option(
        parser,
        "venv: the work folder whose venvs are measured or pruned; "
        "docker: where the log of the container that measures or "
        "prunes goes (under docker/_uv-cache/)",
    )


def run(args: argparse.Namespace) -> int:
    from ..backends import BACKENDS, BackendOptions, backend_class, capabilities, label

    workdir = args.workdir or defaults.WORKDIR
    name, why = _chosen(args)
    can = capabilities(name)
    if not can.keeps:
        keepers = [other for other in BACKENDS if capabilities(other).keeps]
        raise ConfigError(
            f"{label(name)} ({why}) keeps nothing between runs: choose "
            f"{' or '.join(f'--backend {other}' for other in keepers)}"
        )
    print(f"backend: {name} ({why}), which keeps {can.keeps}", flush=True)
    backend = backend_class(name)(BackendOptions(workdir=workdir))
    if not args.prune:
        for line in backend.measure_kept():
            print(line)
        return 0
    from ..utils import runlock
    from ..utils.words import visible

    # not while a matrix, probe or bisect builds in the same work folder
    with runlock.hold(
        [workdir] if can.keeps_in_workdir else [],
        command="torchbisect cache --prune",
        say=lambda text: print(f"torchbisect cache: {visible(text)}", file=sys.stderr),
    ):
        for line in backend.prune_kept():
            print(line)
    return 0


def _chosen(args: argparse.Namespace) -> tuple[str, str]:
    """The backend whose keep is meant, and why: the flag; else the one the newest run stored
    used, of those that keep something (an engine answering says nothing of where the runs
    were installed); else the one `matrix` would choose."""
    from ..backends import BACKENDS, Purpose, capabilities, default_backend

    if args.backend:
        return args.backend, "--backend"
    if flags.store_to_read(args.store):  # a folder is said, not taken for "no run is stored"
        from ..store.db import Store

        with Store(args.store, read_only=True) as store:
            used = [
                r for r in store.latest() if r.backend in BACKENDS and capabilities(r.backend).keeps
            ]
        if used:
            newest = max(used, key=lambda r: r.started).backend
            return newest, f"the newest run in {args.store} used it; choose with --backend"
    chosen = default_backend(Purpose.BUILDS)
    return chosen.name, f"no run is stored and {chosen.why}; choose with --backend"
