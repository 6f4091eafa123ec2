"""Harness on the lent H200: what a cell costs in a container beside the venv backend (issue 25).

Reads the two stores that `h200_docker.sh final` just wrote, one run after the other on the same
GPU (`RUNS/venv/results.sqlite`, `RUNS/docker/results.sqlite`, the walls in `RUNS/walls.txt`),
and times bare container starts through the product's own `Containers.run` (with the GPU request
and without).  Per cell: install seconds, probe seconds as the backend measured them (container
start and end included for docker), the probe's own seconds from its document, and the
difference (what the backend adds around the probe).  Writes JSON:

    python3 tests/gpu/docker_bench.py RUNS IMAGE OUT.json
"""

from __future__ import annotations

import json
import platform
import statistics
import sys
import time
from pathlib import Path

import docker

from torchbisect.backends.container import Containers
from torchbisect.model import Cell, Channel
from torchbisect.store.db import Store
from torchbisect.utils.gpus import device_of, list_gpus

REPEATS = 5


def cells(store: Path) -> dict:
    out = {}
    for run in Store(store).latest():
        doc = run.result.raw if run.result else {}
        inside = doc.get("seconds")
        out[run.cell.id] = {
            "status": run.status.value,
            "verdict": run.verdict.value if run.verdict else None,
            "torch": (run.result.env.get("torch") if run.result else None),
            "install_seconds": round(run.seconds_install, 2),
            "probe_seconds": round(run.seconds_probe, 2),
            "probe_inside_seconds": inside,
            "around_probe_seconds": round(run.seconds_probe - inside, 2) if inside else None,
            "reason": run.reason or None,
        }
    return out


def starts(image: str, work: Path) -> dict:
    """Seconds for `true` in a container (create, start, wait, remove), with and without GPU."""
    client = docker.from_env(timeout=120)
    boxes = Containers(lambda: client, ca_bundle=None)
    cell = Cell(id="bench-start", channel=Channel.PREINSTALLED, version="", cuda="", python="")
    gpu = device_of(list_gpus()[0])
    out = {}
    for label, selector in (("with_gpu", gpu), ("without_gpu", None)):
        times = []
        for i in range(REPEATS):
            began = time.monotonic()
            boxes.run(
                cell,
                f"start-{label}-{i}",
                image,
                ["true"],
                workdir=work,
                log=work / "starts.log",
                timeout=120,
                gpu=selector,
            )
            times.append(time.monotonic() - began)
        out[label] = {
            "median_seconds": round(statistics.median(times), 3),
            "seconds": [round(t, 3) for t in times],
        }
    return out


def main() -> None:
    runs, image, dest = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
    walls = dict(line.split() for line in (runs / "walls.txt").read_text().splitlines())
    gpu = list_gpus()[0]
    engine = docker.from_env().version()
    result = {
        "what": "one matrix (tests/gpu/h200.docker.matrix.yaml) with --force, --backend venv "
        "then --backend docker, on the same GPU in one session; docker through the "
        "stand-in for the NVIDIA Container Toolkit (tests/gpu/nvidia_standin.py)",
        "gpu": gpu.name,
        "driver": gpu.driver,
        "host_python": platform.python_version(),
        "docker_engine": engine.get("Version"),
        "image": image,
        "matrix_wall_seconds": {k: round(int(v) / 1000, 1) for k, v in walls.items()},
        "cells": {
            backend: cells(runs / backend / "results.sqlite") for backend in ("venv", "docker")
        },
        "container_start": starts(image, runs / "starts"),
        "repeats": REPEATS,
    }
    dest.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
