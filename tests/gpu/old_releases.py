"""The PyPI releases measured on the lent H200 by h200_releases.sh, and what each one needs there.

Harness, not product (README.md here). One table for both sides: `h200_releases_pack.py` (the
development machine: what to download and carry, in which order) and `h200_releases_daemon.py`
(the H200: what to rebuild, install and probe). What each release pins comes from its wheel's
METADATA (Requires-Dist), read on PyPI's cp312 wheels on 2026-12-02.

Three runs use it, chosen by `GPU_RELEASES_RUN` (or its older name `H200_RELEASES_RUN`) on both
sides (`RUNS` below): `lazy_clone` (issue 31, H200: 2.2.2 - 2.10.0, 2.12.1 and 2.14.0 with the
default probe, each with the Triton it pins), `cumsum` (issue 47, H200: every release 2.3.0 -
2.15.0 with probes/cumsum_64bit.py, which needs no Triton, so none travels) and `h100` (issue 54:
every release 2.3.0 - 2.15.0 with both probes, each with the Triton it pins, run as the service
runs a kind: `matrix --runners runners.yaml --kind H100` into a store of its own).
"""

import os
from dataclasses import dataclass

# The CUDA 12 user space a cu12x wheel needs at run time and the machine lacks: PyPI's packages of
# that CUDA minor, carried as they are (the other CUDA libraries get stand-ins: standins.py).
RUNTIMES = {
    "12.1": (
        "nvidia-cuda-runtime-cu12==12.1.105",
        "nvidia-cuda-nvrtc-cu12==12.1.105",
        "nvidia-cuda-cupti-cu12==12.1.105",
    ),
    "12.4": (
        "nvidia-cuda-runtime-cu12==12.4.127",
        "nvidia-cuda-nvrtc-cu12==12.4.127",
        "nvidia-cuda-cupti-cu12==12.4.127",
    ),
    "12.6": (
        "nvidia-cuda-runtime-cu12==12.6.77",
        "nvidia-cuda-nvrtc-cu12==12.6.77",
        "nvidia-cuda-cupti-cu12==12.6.80",
    ),
    "12.8": (
        "nvidia-cuda-runtime-cu12==12.8.90",
        "nvidia-cuda-nvrtc-cu12==12.8.93",
        "nvidia-cuda-cupti-cu12==12.8.90",
    ),
}
MACHINE = "machine"  # the H200's own (CUDA 13 libraries, Triton 3.6.0)
NO_TRITON = "none"  # the wheel pins no Triton for Python 3.12 (2.2, 2.3: python_version < "3.12")


@dataclass(frozen=True)
class Release:
    version: str
    cuda: str  # the wheel's CUDA tag, as the matrix cell names it
    runtime: str  # a RUNTIMES key, or MACHINE
    triton: str  # the Triton version it pins (carried), MACHINE, or NO_TRITON
    cudnn: str | None  # the cuDNN it pins: its stand-in answers this version

    @property
    def cell(self) -> str:
        return f"stable-{self.version}-{self.cuda}-cp312"


# Carry order: oldest first (each wheel travels as a zstd patch on the one before it).
RELEASES = (
    Release("2.2.2", "cu121", "12.1", NO_TRITON, "8.9.2.26"),
    Release("2.3.0", "cu121", "12.1", NO_TRITON, "8.9.2.26"),
    Release("2.3.1", "cu121", "12.1", NO_TRITON, "8.9.2.26"),
    Release("2.4.0", "cu121", "12.1", "3.0.0", "9.1.0.70"),
    Release("2.4.1", "cu121", "12.1", "3.0.0", "9.1.0.70"),
    Release("2.5.0", "cu124", "12.4", "3.1.0", "9.1.0.70"),
    Release("2.5.1", "cu124", "12.4", "3.1.0", "9.1.0.70"),
    Release("2.6.0", "cu124", "12.4", "3.2.0", "9.1.0.70"),
    Release("2.7.0", "cu126", "12.6", "3.3.0", "9.5.1.17"),
    Release("2.7.1", "cu126", "12.6", "3.3.1", "9.5.1.17"),
    Release("2.8.0", "cu128", "12.8", "3.4.0", "9.10.2.21"),
    Release("2.9.0", "cu128", "12.8", "3.5.0", "9.10.2.21"),
    Release("2.9.1", "cu128", "12.8", "3.5.1", "9.10.2.21"),
    Release("2.10.0", "cu128", "12.8", MACHINE, "9.10.2.21"),  # pins 3.6.0, the machine's
    # CUDA 13 builds run on the machine's own libraries, as 2.12.0 - 2.15.0 did (h200.matrix.yaml);
    # they pin Triton 3.7.1 / 3.8.0, which were not carried: the machine's 3.6.0 is used.
    Release("2.11.0", "cu130", MACHINE, MACHINE, None),
    Release("2.12.0", "cu130", MACHINE, MACHINE, None),
    Release("2.12.1", "cu130", MACHINE, MACHINE, None),
    Release("2.13.0", "cu130", MACHINE, MACHINE, None),
    Release("2.14.0", "cu130", MACHINE, MACHINE, None),
    Release("2.14.1", "cu130", MACHINE, MACHINE, None),
    # 2.15.0 also links NVSHMEM 3 (libnvshmem_host.so.3, carried in the setup bundle)
    Release("2.15.0", "cu132", MACHINE, MACHINE, None),
)


@dataclass(frozen=True)
class Run:
    matrix: str  # the matrix file in tests/gpu/, entries for the releases of this run
    versions: tuple[str, ...]
    tritons: bool  # whether each release's pinned Triton travels
    kind: str | None = None  # a runners.yaml kind: `matrix --runners --kind` into a fresh store


RUNS = {
    "lazy_clone": Run(
        "h200.releases.matrix.yaml",
        (
            "2.2.2",
            "2.3.0",
            "2.3.1",
            "2.4.0",
            "2.4.1",
            "2.5.0",
            "2.5.1",
            "2.6.0",
            "2.7.0",
            "2.7.1",
            "2.8.0",
            "2.9.0",
            "2.9.1",
            "2.10.0",
            "2.12.1",
            "2.14.0",
        ),
        tritons=True,
    ),
    "cumsum": Run(
        "h200.cumsum.matrix.yaml",
        tuple(r.version for r in RELEASES if r.version != "2.2.2"),
        tritons=False,
    ),
    "h100": Run(
        "h100.releases.matrix.yaml",
        tuple(r.version for r in RELEASES if r.version != "2.2.2"),
        tritons=True,
        kind="H100",
    ),
}
RUN_NAME = os.environ.get("GPU_RELEASES_RUN") or os.environ.get("H200_RELEASES_RUN", "lazy_clone")
RUN = RUNS[RUN_NAME]

TRITONS = ("3.0.0", "3.1.0", "3.2.0", "3.3.0", "3.3.1", "3.4.0", "3.5.0", "3.5.1")


def stream():
    """The bundles in the order they travel: what a release needs comes before it."""
    sent = set()
    for release in RELEASES:
        if release.version not in RUN.versions:
            continue
        for kind, name in (("runtime", release.runtime), ("triton", release.triton)):
            if kind == "triton" and not RUN.tritons:
                continue
            if name not in (MACHINE, NO_TRITON) and (kind, name) not in sent:
                sent.add((kind, name))
                yield kind, name
        yield "torch", release.version
