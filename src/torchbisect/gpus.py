"""What GPUs this host has, read from `nvidia-smi` (no torch import: the host may have none)."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class Gpu:
    index: int
    name: str
    driver: str
    uuid: str = ""


def list_gpus() -> tuple[Gpu, ...]:
    """The GPUs `nvidia-smi` reports, restricted by CUDA_VISIBLE_DEVICES when it names indexes."""
    if not shutil.which("nvidia-smi"):
        return ()
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=index,name,driver_version,uuid",
             "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=30, check=True,
        ).stdout
    except (subprocess.SubprocessError, OSError):
        return ()
    gpus = []
    for line in out.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 3 and parts[0].isdigit():
            gpus.append(Gpu(index=int(parts[0]), name=parts[1], driver=parts[2],
                            uuid=parts[3] if len(parts) > 3 else ""))
    return _visible(tuple(gpus))


def _visible(gpus: tuple[Gpu, ...]) -> tuple[Gpu, ...]:
    wanted = os.environ.get("CUDA_VISIBLE_DEVICES")
    if wanted is None or not wanted.strip():
        return gpus if wanted is None else ()
    keys = [w.strip() for w in wanted.split(",")]
    return tuple(g for g in gpus if str(g.index) in keys or g.uuid in keys)


def driver_version() -> str | None:
    """The NVIDIA driver version ("580.159.04"), or None without a GPU."""
    gpus = list_gpus()
    return gpus[0].driver if gpus else None
