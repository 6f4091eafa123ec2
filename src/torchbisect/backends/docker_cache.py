"""uv's cache volume of the docker backend: how big it is, and pruning it.

Every container of the backend uses one named volume as uv's cache (container.py), so within a run
each wheel and dependency is downloaded once.  Nightlies never come back, though: left alone the
volume grows by a torch wheel (1-3 GB) and its new dependencies with every nightly, for ever.  So
`matrix` and `bisect` prune it when they end (`DockerBackend.finish`), and `torchbisect cache
--prune` does on demand.

A prune is `uv cache prune --ci` in a container of a runner image (the image has uv; the volume's
files are root's).  `--ci` because a plain prune removes only entries nothing refers to any more,
and every cached wheel is still referred to: it would leave every torch nightly in place.  `--ci`
drops every pre-built wheel and keeps what uv built from source (nothing, for torch's wheels), so
the volume falls back to almost nothing, as the workflows' own uv cache does after each job.  The
price is that the next run downloads again what it installs; a run reinstalls little (stored
verdicts are not probed again, and a new nightly is new anyway).

uv's lock keeps a prune from removing a wheel under another run's install: the prune waits for
it, at most `UV_LOCK_TIMEOUT` seconds (uv's own variable: the host's value, else 60), then fails.
A prune that fails at the end of a run is one line, never the run's failure: its results are
stored by then, and the next run prunes.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import InfraError
from ..model import Cell, Channel
from ..utils.words import last_line, megabytes
from .container import UV_CACHE, uv_cache_volume

_MARK = "torchbisect-cache-kib"  # the line carrying the sizes, among uv's output
PRUNE_COMMAND = "uv cache prune --ci"
_DU = f"du -sk {UV_CACHE} | cut -f1"
_SIZE = f'echo "{_MARK} $({_DU})"'
_PRUNE = f'before=$({_DU}) && {PRUNE_COMMAND} && echo "{_MARK} $before $({_DU})"'
_LOCK_SECONDS = "60"
_TIMEOUT = 900.0  # seconds; removing tens of GB of small files takes a while


@dataclass(frozen=True, kw_only=True)
class Pruned:
    volume: str
    before: int  # bytes
    after: int

    def __str__(self) -> str:
        return (
            f"uv cache volume {self.volume} pruned ({PRUNE_COMMAND}): "
            f"{megabytes(self.before)} before, {megabytes(self.after)} after"
        )


def volume_exists(client: Any) -> bool:
    import docker

    try:
        client.volumes.get(uv_cache_volume())
    except docker.errors.NotFound:
        return False
    return True


def size(backend: Any) -> int | None:
    """The volume's size in bytes (`du` in a runner container); None when there is no volume."""
    if not volume_exists(backend.client):
        return None
    return _run(backend, "size", _SIZE)[0]


def prune(backend: Any) -> Pruned | None:
    """Prune the volume of `backend` (a DockerBackend); None when there is no volume (nothing
    ever used it); InfraError when it could not be pruned."""
    if not volume_exists(backend.client):
        return None
    before, after = _run(backend, "prune", _PRUNE)
    return Pruned(volume=uv_cache_volume(), before=before, after=after)


def measured(backend: Any) -> str:
    """The volume's size in one line, as `torchbisect cache` prints it."""
    volume, found = uv_cache_volume(), size(backend)
    return (
        f"uv cache volume {volume}: does not exist"
        if found is None
        else f"uv cache volume {volume}: {megabytes(found)} (`torchbisect cache --prune` "
        "prunes it; docker runs of matrix and bisect do when they end)"
    )


def pruned_on_demand(backend: Any) -> str:
    """`torchbisect cache --prune`: prune the volume, and what became of it in one line."""
    done = prune(backend)
    return (
        str(done)
        if done
        else f"uv cache volume {uv_cache_volume()} does not exist: nothing to prune"
    )


def prune_at_end(backend: Any, say: Callable[[str], None]) -> None:
    """The prune a run ends with: one line whatever happens, never an exception (but Ctrl-C)."""
    try:
        pruned = prune(backend)
    except Exception as err:  # noqa: BLE001 - a failed prune must not fail a run that measured
        text = str(err) if isinstance(err, InfraError) else f"{type(err).__name__}: {err}"
        say(
            f"uv cache volume {uv_cache_volume()} not pruned ({text}); the results are stored; "
            "`torchbisect cache --prune` prunes it later"
        )
        return
    if pruned is not None:
        say(str(pruned))


def _run(backend: Any, step: str, script: str) -> tuple[int, int]:
    """Run `script` in a runner container on the volume; the sizes it printed, in bytes."""
    image = backend.images.newest_runner()
    if image is None:
        raise InfraError(
            f"no {step} of the uv cache volume {uv_cache_volume()}: this engine has "
            "no torchbisect/runner image to run uv in (a docker matrix run builds "
            "one); `docker volume rm` removes the volume whole"
        )
    folder = backend.cells_dir / "_uv-cache"
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / f"{step}.log"
    job = Cell(id="uv-cache", channel=Channel.PREINSTALLED, version="", cuda="", python="")
    env = {"UV_LOCK_TIMEOUT": os.environ.get("UV_LOCK_TIMEOUT") or _LOCK_SECONDS}
    done = backend.containers.run(
        job, step, image, ["sh", "-c", script], workdir=folder, log=log, timeout=_TIMEOUT, env=env
    )
    sizes = _sizes(done.tail)
    if done.code != 0 or sizes is None:
        raise InfraError(
            f"`{PRUNE_COMMAND if step == 'prune' else 'du'}` in {image} exited "
            f"{done.code}: {last_line(done.tail) or 'no output'}; see {log}"
        )
    return sizes


def _sizes(text: str) -> tuple[int, int] | None:
    for line in reversed(text.splitlines()):
        if line.startswith(_MARK):
            with contextlib.suppress(ValueError):
                kib = [int(word) * 1024 for word in line.split()[1:]]
                return (kib[0], kib[-1]) if kib else None
    return None
