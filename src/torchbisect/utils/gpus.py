"""What GPUs this host has and which of them CUDA_VISIBLE_DEVICES selects, read from `nvidia-smi`
(no torch import: the host may have none).

CUDA reads CUDA_VISIBLE_DEVICES as a comma list of indexes, GPU UUIDs (`GPU-3f2a…`, any prefix
that names one GPU) or MIG UUIDs (`MIG-…`, or `MIG-GPU-<uuid>/<gi>/<ci>` on old drivers), in the
order given, and stops at the first entry it cannot use (unknown, ambiguous or repeated): `0,7`
on a one-GPU host is GPU 0 alone, and an empty value hides every GPU. `visible` does the same.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..errors import CommandFailed
from . import proc

_MIG_LINE = re.compile(r"^\s+MIG\s+(?P<profile>\S+)\s+Device\s+\d+:\s+\(UUID:\s*(?P<uuid>[^)]+)\)")
_GPU_LINE = re.compile(r"^GPU\s+(?P<index>\d+):.*\(UUID:\s*(?P<uuid>[^)]+)\)")


@dataclass(frozen=True, kw_only=True)
class Gpu:
    index: int
    name: str
    driver: str
    uuid: str = ""
    mig: bool = False  # a MIG slice of GPU `index`; `uuid` is the slice's own


def device_of(gpu: Gpu) -> int | str:
    """What a backend pins a probe to (CUDA_VISIBLE_DEVICES, docker's device_ids): a MIG slice
    only by its UUID, since its parent's index would hand the probe the whole GPU's slices; a
    whole GPU by nvidia-smi's index, which CUDA_DEVICE_ORDER=PCI_BUS_ID makes CUDA's too."""
    return gpu.uuid if gpu.mig and gpu.uuid else gpu.index


def list_gpus() -> tuple[Gpu, ...]:
    """The GPUs CUDA would use here: `nvidia-smi`'s, selected as CUDA_VISIBLE_DEVICES says."""
    query = _smi("--query-gpu=index,name,driver_version,uuid", "--format=csv,noheader,nounits")
    if query is None:
        return ()
    gpus = parse_query(query)
    if any(g.uuid for g in gpus):
        gpus = with_mig(gpus, _smi("-L") or "")
    return visible(gpus, os.environ.get("CUDA_VISIBLE_DEVICES"))


def parse_query(text: str) -> tuple[Gpu, ...]:
    """Rows of `nvidia-smi --query-gpu=index,name,driver_version,uuid --format=csv,noheader`."""
    gpus = []
    for line in text.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 3 and parts[0].isdigit():
            gpus.append(
                Gpu(
                    index=int(parts[0]),
                    name=parts[1],
                    driver=parts[2],
                    uuid=parts[3] if len(parts) > 3 else "",
                )
            )
    return tuple(gpus)


def with_mig(gpus: tuple[Gpu, ...], listing: str) -> tuple[Gpu, ...]:
    """Each GPU in MIG mode replaced by its slices, read from `nvidia-smi -L`.

    CUDA cannot run on a GPU in MIG mode itself, only on its slices.
    """
    slices: dict[int, list[Gpu]] = {}
    parent: Gpu | None = None
    by_index = {g.index: g for g in gpus}
    for line in listing.splitlines():
        if match := _GPU_LINE.match(line):
            parent = by_index.get(int(match["index"]))
        elif (match := _MIG_LINE.match(line)) and parent is not None:
            slices.setdefault(parent.index, []).append(
                Gpu(
                    index=parent.index,
                    name=f"{parent.name} MIG {match['profile']}",
                    driver=parent.driver,
                    uuid=match["uuid"].strip(),
                    mig=True,
                )
            )
    return tuple(s for g in gpus for s in slices.get(g.index, [g]))


def visible(gpus: tuple[Gpu, ...], value: str | None) -> tuple[Gpu, ...]:
    """The GPUs CUDA shows for CUDA_VISIBLE_DEVICES=`value` (None: unset), in its order."""
    if value is None:
        return gpus
    picked: list[Gpu] = []
    for entry in value.split(","):
        gpu = _named(gpus, entry.strip())
        if gpu is None or gpu in picked:  # CUDA stops at the first entry it cannot use
            break
        picked.append(gpu)
    return tuple(picked)


def _named(gpus: tuple[Gpu, ...], entry: str) -> Gpu | None:
    if entry.startswith(("GPU-", "MIG-")):  # a GPU in MIG mode is listed as its MIG- slices only
        found = [g for g in gpus if g.uuid.startswith(entry)]
        return found[0] if len(found) == 1 else None  # ambiguous prefixes name nothing
    digits = re.match(r"\d+", entry)  # CUDA reads an index as strtoul does: "1x" is 1
    if not digits:
        return None
    whole = [g for g in gpus if g.index == int(digits.group()) and not g.mig]
    return whole[0] if whole else None


def _smi(*args: str) -> str | None:
    if not shutil.which("nvidia-smi"):
        return None
    # Its stdout is data (the CSV parsed above), so it goes whole into a file, as proc keeps a
    # command's data: apart from its stderr, neither cut nor masked.
    with tempfile.TemporaryDirectory(prefix="torchbisect-smi-") as tmp:
        out = Path(tmp) / "stdout"
        try:
            proc.run(["nvidia-smi", *args], timeout=30, stdout=out)
            return out.read_text()
        except (CommandFailed, OSError):
            return None


def driver_version() -> str | None:
    """The NVIDIA driver version ("580.159.04"), or None without a GPU."""
    gpus = list_gpus()
    return gpus[0].driver if gpus else None
