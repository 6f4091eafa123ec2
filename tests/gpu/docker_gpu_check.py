"""Harness on the lent H200: does the product's docker path get the GPU through the stand-in?

Runs through torchbisect's own code, unchanged: `docker_gpu.require_gpu_support` (the engine
check that `--backend docker` makes before any cell) and `container.Containers.run` (the
`DeviceRequest(device_ids=[…], capabilities=[["gpu"]])` every probe container carries), selecting
the GPU by nvidia-smi index, by GPU UUID, and not at all; and `docker_gpu.gpus_in_a_container`
(`torchbisect preflight`: every GPU, `--gpus all`).  Prints what each container saw.

    python3 tests/gpu/docker_gpu_check.py IMAGE LOGDIR
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import docker

from torchbisect.backends.base import BackendOptions
from torchbisect.backends.container import Containers
from torchbisect.backends.docker import DockerBackend
from torchbisect.backends.docker_gpu import gpus_in_a_container, require_gpu_support
from torchbisect.model import Cell, Channel
from torchbisect.utils.gpus import device_of, list_gpus

SEE = (
    "ls /dev/nvidia* | tr '\\n' ' '; echo; nvidia-smi -L; "
    "python3 -c 'import torch; print(torch.__version__, torch.cuda.is_available(), "
    "torch.cuda.device_count() and torch.cuda.get_device_name(0))'"
)


def main() -> None:
    image, logs = sys.argv[1], Path(sys.argv[2])
    logs.mkdir(parents=True, exist_ok=True)
    client = docker.from_env(timeout=120)
    require_gpu_support(client, image)
    print("require_gpu_support: the engine gives a container a GPU")
    preflight = DockerBackend(BackendOptions(workdir=logs, client=client, ca_bundle=None))
    print(
        "gpus_in_a_container (torchbisect preflight, --gpus all):",
        *gpus_in_a_container(preflight, image),
        sep="\n  ",
    )
    gpu = list_gpus()[0]
    boxes = Containers(lambda: client, ca_bundle=None)
    cell = Cell(id="gpu-check", channel=Channel.PREINSTALLED, version="", cuda="", python="")
    for label, selector in (("index", device_of(gpu)), ("uuid", gpu.uuid), ("none", None)):
        began = time.monotonic()
        done = boxes.run(
            cell,
            f"see-{label}",
            image,
            ["sh", "-c", SEE],
            workdir=logs,
            log=logs / f"see-{label}.log",
            timeout=300,
            gpu=selector,
        )
        print(
            f"--- gpu={selector!r} ({label}): exit {done.code}, "
            f"{time.monotonic() - began:.1f} s\n{done.tail}"
        )


if __name__ == "__main__":
    main()
