"""The docker backend's compile caches: one named volume per build, kept between its probe runs.

A probe's `torch.compile` case spends most of its time in Dynamo, Inductor and Triton; a rerun of
a build that has run before (a bisection's re-ask, `--repeat`, `--force`) starts with the
kernels that build compiled when its Inductor and Triton caches survive.  The venv backend keeps
them inside the venv; the docker backend cannot: its probe containers run as root, and nothing
they leave in the host's folders may be root's (the venv is handed back after the install).  So
each build gets a named volume, which the engine owns: `torchbisect-compile-<hash>`, the hash of
the deployment (the uv cache volume's name), the cell id and the build (its wheel's sha256; a
preinstalled cell's image and torch fingerprint).  Only the probe container mounts it, at
`COMPILE_CACHE` (the engine makes it, labelled, when a probe first mounts it);
TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR name folders in it, and a cell's own `env:` wins
over them.

The volumes carry the label `torchbisect.compile-cache=<deployment>` (and the cell's id), so
`torchbisect cache` counts and sizes them (the engine's `df`) and `--prune` removes them; a
volume a running probe uses is kept (the engine refuses) and said so.
"""

from __future__ import annotations

import contextlib
import hashlib
from dataclasses import dataclass
from typing import Any

from ..model import Cell
from ..utils.words import megabytes
from .container import LABEL, uv_cache_volume

COMPILE_LABEL = "torchbisect.compile-cache"  # its value: the deployment (uv_cache_volume())
COMPILE_CACHE = "/var/cache/torchbisect-compile"
VOLUME_PREFIX = "torchbisect-compile-"


def compile_env() -> dict[str, str]:
    """The variables torch.compile and Triton read, each naming a folder in the volume."""
    return {
        "TORCHINDUCTOR_CACHE_DIR": f"{COMPILE_CACHE}/inductor",
        "TRITON_CACHE_DIR": f"{COMPILE_CACHE}/triton",
    }


def volume_name(cell_id: str, build: str) -> str:
    """The volume of one build of one cell in this deployment."""
    key = "\0".join((uv_cache_volume(), cell_id, build))
    return VOLUME_PREFIX + hashlib.sha256(key.encode()).hexdigest()[:16]


def volume_mount(cell: Cell, build: str) -> Any:
    """The mount of the build's volume; the engine makes it, with its labels, on first use."""
    from docker.types import Mount

    return Mount(
        target=COMPILE_CACHE,
        source=volume_name(cell.id, build),
        type="volume",
        labels={COMPILE_LABEL: uv_cache_volume(), LABEL: cell.id},
    )


@dataclass(frozen=True, kw_only=True)
class Volumes:
    names: tuple[str, ...]
    size: int | None  # bytes; None when the engine did not say


def kept(client: Any) -> Volumes:
    """This deployment's compile cache volumes and their size, as the engine's `df` gives it."""
    wanted = {
        v.name
        for v in client.volumes.list(filters={"label": f"{COMPILE_LABEL}={uv_cache_volume()}"})
    }
    sizes: list[int] = []
    if wanted:
        with contextlib.suppress(Exception):  # a size is nice to have, never the command's failure
            for info in client.df().get("Volumes") or []:
                if info.get("Name") in wanted:
                    sizes.append(int((info.get("UsageData") or {}).get("Size", -1)))
    known = len(sizes) == len(wanted) and all(s >= 0 for s in sizes)
    return Volumes(names=tuple(sorted(wanted)), size=sum(sizes) if known else None)


def measured(client: Any) -> str:
    """The volumes in one line, as `torchbisect cache` prints it."""
    found = kept(client)
    if not found.names:
        return "compile cache volumes: none"
    size = "" if found.size is None else f", {megabytes(found.size)}"
    return (
        f"compile cache volumes ({VOLUME_PREFIX}…, one per build probed): "
        f"{len(found.names)}{size} (`torchbisect cache --prune` removes them)"
    )


def pruned(client: Any) -> str | None:
    """Remove this deployment's volumes; what became of them in one line, None when there were
    none.  A volume a running probe uses stays (the engine refuses to remove it)."""
    import docker

    found = kept(client)
    if not found.names:
        return None
    busy = 0
    for name in found.names:
        try:
            client.volumes.get(name).remove()
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError:
            busy += 1
    size = "" if found.size is None else f" ({megabytes(found.size)})"
    line = f"compile cache volumes removed: {len(found.names) - busy} of {len(found.names)}{size}"
    return line + (f"; {busy} in use by a running probe, kept" if busy else "")
