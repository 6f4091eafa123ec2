"""GPU selection as CUDA reads CUDA_VISIBLE_DEVICES: indexes, UUID prefixes, MIG UUIDs, order,
and the first unusable entry ending the list (as seen on the lent H200: `GPU-457b5a25` selects
it, `457b5a25` and `1` select nothing, `0,GPU-<its uuid>` selects it once)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from torchbisect.utils.gpus import Gpu, list_gpus, parse_query, visible, with_mig

QUERY = """\
0, NVIDIA H200, 580.159.04, GPU-3f2a9c10-1111-2222-3333-444455556666
1, NVIDIA H200, 580.159.04, GPU-3f2b0000-aaaa-bbbb-cccc-ddddeeeeffff
2, NVIDIA A100-SXM4-40GB, 580.159.04, GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77
"""
LISTING = """\
GPU 0: NVIDIA H200 (UUID: GPU-3f2a9c10-1111-2222-3333-444455556666)
GPU 1: NVIDIA H200 (UUID: GPU-3f2b0000-aaaa-bbbb-cccc-ddddeeeeffff)
GPU 2: NVIDIA A100-SXM4-40GB (UUID: GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77)
  MIG 3g.20gb     Device  0: (UUID: MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f)
  MIG 2g.10gb     Device  1: (UUID: MIG-7e1a44b2-9d0e-5c55-8f3e-0b1c2d3e4f50)
"""
LEGACY_LISTING = """\
GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77)
  MIG 1g.5gb Device 0: (UUID: MIG-GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77/7/0)
"""
HOST = with_mig(parse_query(QUERY), LISTING)


def _ids(gpus: tuple[Gpu, ...]) -> list[str]:
    return [g.uuid[:12] for g in gpus]


def test_a_gpu_in_mig_mode_is_listed_as_its_slices():
    assert [(g.index, g.name, g.mig) for g in HOST] == [
        (0, "NVIDIA H200", False),
        (1, "NVIDIA H200", False),
        (2, "NVIDIA A100-SXM4-40GB MIG 3g.20gb", True),
        (2, "NVIDIA A100-SXM4-40GB MIG 2g.10gb", True),
    ]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, ["GPU-3f2a9c10", "GPU-3f2b0000", "MIG-c6d4f1ef", "MIG-7e1a44b2"]),
        ("1,0", ["GPU-3f2b0000", "GPU-3f2a9c10"]),  # CUDA's order is the list's
        ("GPU-3f2b", ["GPU-3f2b0000"]),  # a unique prefix names one GPU
        ("GPU-3f2b0000-aaaa-bbbb-cccc-ddddeeeeffff", ["GPU-3f2b0000"]),
        ("GPU-3f2,0", []),  # ambiguous prefix: nothing, and nothing after it
        ("0,GPU-3f2", ["GPU-3f2a9c10"]),
        ("3f2b0000", []),  # a UUID without GPU- is no identifier
        ("MIG-7e1a", ["MIG-7e1a44b2"]),
        ("GPU-5d5ba0d6", []),  # a GPU in MIG mode: CUDA runs on its slices only
        ("2", []),
        ("0,7,1", ["GPU-3f2a9c10"]),  # stops at the first entry it cannot use
        ("0,GPU-3f2a9c10", ["GPU-3f2a9c10"]),  # the same GPU twice: once
        ("1x", ["GPU-3f2b0000"]),  # indexes read as strtoul reads them
        (" 1 , 0", ["GPU-3f2b0000", "GPU-3f2a9c10"]),
        ("", []),
        ("-1", []),
    ],
)
def test_cuda_visible_devices_selects_what_cuda_selects(value, expected):
    assert _ids(visible(HOST, value)) == expected


def test_old_drivers_mig_names_select_their_slice():
    host = with_mig(
        parse_query(
            "0, NVIDIA A100-SXM4-40GB, 470.57.02, GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77\n"
        ),
        LEGACY_LISTING,
    )
    (gpu,) = visible(host, "MIG-GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77/7/0")
    assert gpu.name == "NVIDIA A100-SXM4-40GB MIG 1g.5gb" and gpu.mig


@pytest.fixture
def fake_smi(tmp_path: Path, monkeypatch) -> None:
    """An `nvidia-smi` on PATH that answers as a host with the GPUs above would."""
    (tmp_path / "query.txt").write_text(QUERY)
    (tmp_path / "listing.txt").write_text(LISTING)
    script = tmp_path / "nvidia-smi"
    script.write_text(
        f'#!/bin/sh\nif [ "$1" = -L ]; then cat {tmp_path}/listing.txt; '
        f"else cat {tmp_path}/query.txt; fi\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")


def test_list_gpus_follows_cuda_visible_devices_with_uuid_prefixes(fake_smi, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "MIG-c6d4,GPU-3f2b")
    names = [(g.index, g.name) for g in list_gpus()]
    assert names == [(2, "NVIDIA A100-SXM4-40GB MIG 3g.20gb"), (1, "NVIDIA H200")]
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert len(list_gpus()) == 4


def test_a_mig_slice_is_pinned_by_its_uuid_and_a_whole_gpu_by_its_index(tmp_path):
    """Pinning a slice by its parent's index would give the probe every slice of that GPU (or,
    under CUDA's rules, none): the backend must get what CUDA_VISIBLE_DEVICES can name."""
    from helpers import ScriptedBackend, make_cell

    from torchbisect.backends.venv import gpu_env
    from torchbisect.run import execute

    backend = ScriptedBackend()
    whole, _, slice_, _ = HOST
    for gpu in (whole, slice_):
        execute.run_cell(
            backend, make_cell(f"dev-{gpu.index}-{gpu.mig}"), gpu=gpu, logs_dir=tmp_path
        )
    assert backend.gpus_used == [0, "MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f"]
    assert gpu_env(backend.gpus_used[1])["CUDA_VISIBLE_DEVICES"] == slice_.uuid
