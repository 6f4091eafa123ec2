"""`torchbisect preflight`: can the backend a GPU run will use give its probes the GPUs?

A workflow runs it before probing, after `nvidia-smi -L` (which checks the host's driver), and a
user runs it by hand on a new runner.  For the docker backend it asks the engine for every GPU
(`docker run --gpus all`) and prints the GPUs that container saw: an engine without the NVIDIA
Container Toolkit is one sentence and exit 5, a container that sees no GPU exit 3.  The venv and
current backends probe on the host itself, where `nvidia-smi -L` has already said it all: it says
so and exits 0.

The backend checked is the one the run will choose: `--backend`, else the `--backend` among
`--flags` (the run's extra flags, a workflow's MATRIX_EXTRA_FLAGS; bisect's `--script` means
venv), else docker when an engine answers and venv otherwise, as `matrix` and `bisect` choose.
"""

from __future__ import annotations

import argparse
import shlex

from .. import defaults
from ..backends import Purpose
from ..backends.docker_gpu import PREFLIGHT_IMAGE
from ..cli import options as flags


def configure(parser: argparse.ArgumentParser) -> None:
    flags.add_backend_option(
        parser,
        "the backend to check (default: the one --flags names, "
        "else docker when an engine answers, else venv)",
    )
    parser.add_argument(
        "--flags",
        default="",
        metavar="TEXT",
        help='the extra flags of the run this prepares (e.g. "$EXTRA_FLAGS"): '
        "the backend they name is the one checked; the rest is not read",
    )
    parser.add_argument(
        "--image",
        default=PREFLIGHT_IMAGE,
        help="image of the GPU container, pulled when missing (default: "
        "%(default)s; any glibc image: the toolkit brings nvidia-smi)",
    )
    flags.add_workdir_option(parser, "where the preflight container's log goes")


def run(args: argparse.Namespace) -> int:
    from ..backends import BackendOptions, choose_backend

    named, purpose = _named_in(args.flags)
    backend = choose_backend(
        args.backend or named,
        BackendOptions(workdir=args.workdir or defaults.WORKDIR),
        purpose=purpose,
        say=lambda text: print(f"preflight: {text}", flush=True),
    )
    if not backend.can.containers:
        print(
            f"preflight: {backend.label} probes on this host, not in a container: "
            "nothing to check beyond `nvidia-smi -L`"
        )
        return 0
    from ..backends.docker_gpu import gpus_in_a_container

    gpus = gpus_in_a_container(backend, args.image)
    print(
        f"preflight: a container of the docker backend ({args.image}, --gpus all) sees "
        f"{len(gpus)} GPU{'s' if len(gpus) != 1 else ''}:"
    )
    for line in gpus:
        print(f"  {line}")
    return 0


def _named_in(text: str) -> tuple[str | None, Purpose]:
    """The `--backend` among a run's flags, as that run's own parser reads it (`--backend=X` and
    abbreviations too), and what that run chooses a backend for when they name none; a name that
    is no backend is refused when the backend is built."""
    parser = argparse.ArgumentParser(add_help=False, exit_on_error=False, allow_abbrev=False)
    parser.add_argument("--backend")
    parser.add_argument("--script")  # bisect decides with a script on the host (bisect/run.py)
    try:
        known, _ = parser.parse_known_args(shlex.split(text))
    except (ValueError, argparse.ArgumentError) as err:  # an unclosed quote, a missing name
        from ..errors import ConfigError

        raise ConfigError(
            f"--flags {text!r}: {err}: the run would refuse these flags too; correct them"
        ) from None
    return known.backend, Purpose.SCRIPT if known.script is not None else Purpose.BUILDS
