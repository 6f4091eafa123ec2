"""Each build keeps its own compile caches beside its venv (issue 54.3): a rerun of a build finds
the kernels it compiled before, and no two builds ever read one folder.  Real uv venvs of stand-in
torch wheels; the stand-in probe records the variables torch.compile and Triton read."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from helpers import fake_torch_wheel, make_cell, sha256_of

from torchbisect.backends import BackendOptions
from torchbisect.backends.venv import COMPILE_CACHE, VenvBackend
from torchbisect.bisect.overlay import link_tree
from torchbisect.model import RunStatus
from torchbisect.run import execute

PY = f"{sys.version_info[0]}.{sys.version_info[1]}"
CACHES = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")

pytestmark = [
    pytest.mark.usefixtures("fake_probes"),
    pytest.mark.skipif(shutil.which("uv") is None, reason="uv is not installed"),
]


def _seen(backend: VenvBackend, cell, tmp_path: Path, name: str) -> dict[str, str]:
    record = tmp_path / f"{name}.json"
    os.environ["TB_FAKE_RECORD"] = str(record)
    try:
        result = execute.run_cell(backend, cell, gpu=None, logs_dir=tmp_path / "logs")
    finally:
        del os.environ["TB_FAKE_RECORD"]
    assert result.status is RunStatus.OK, result.reason
    return json.loads(record.read_text())["caches"]


def test_each_build_compiles_into_its_own_folder_and_a_rerun_finds_it(tmp_path, monkeypatch):
    # a host-wide setting would make every build read one folder: the build's own wins over it
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "shared"))
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "shared"))
    work = tmp_path / "work"
    backend = VenvBackend(BackendOptions(workdir=work, overlay=True))
    cells = [
        make_cell(f"stable-{v}-cpu", url=str(w), sha256=sha256_of(w), python=PY)
        for v, w in (
            ("2.99.0", fake_torch_wheel(tmp_path / "a", "2.99.0+cpu")),
            ("2.99.1", fake_torch_wheel(tmp_path / "b", "2.99.1+cpu")),
        )
    ]
    first, second = (_seen(backend, cell, tmp_path, cell.id) for cell in cells)
    for cell, seen in zip(cells, (first, second), strict=True):
        venv = work / "venvs" / cell.id
        for name in CACHES:
            assert Path(seen[name]).is_relative_to(venv / COMPILE_CACHE), (name, seen[name])
    assert not set(first.values()) & set(second.values())  # no folder read by both builds
    assert len(set(first.values())) == 2  # Inductor's and Triton's are two folders
    assert _seen(backend, cells[0], tmp_path, "again") == first  # the rerun: the same folders


def test_a_cells_own_env_still_chooses_the_cache(tmp_path):
    wheel = fake_torch_wheel(tmp_path / "w", "2.99.0+cpu")
    mine = str(tmp_path / "mine")
    cell = make_cell(
        "stable-2.99.0-cpu",
        url=str(wheel),
        sha256=sha256_of(wheel),
        python=PY,
        env=(("TORCHINDUCTOR_CACHE_DIR", mine),),
    )
    seen = _seen(
        VenvBackend(BackendOptions(workdir=tmp_path / "work", overlay=True)), cell, tmp_path, "own"
    )
    assert seen["TORCHINDUCTOR_CACHE_DIR"] == mine
    assert Path(seen["TRITON_CACHE_DIR"]).is_relative_to(tmp_path / "work" / "venvs")


def test_a_commits_overlay_leaves_its_nightlys_compiled_kernels_behind(tmp_path):
    nightly = tmp_path / "nightly"
    (nightly / COMPILE_CACHE / "triton").mkdir(parents=True)
    (nightly / COMPILE_CACHE / "triton" / "kernel.so").write_bytes(b"\x7fELF compiled")
    (nightly / "lib").mkdir()
    (nightly / "lib" / "torch.py").write_text("x = 1\n")
    link_tree(nightly, tmp_path / "commit")
    assert (tmp_path / "commit" / "lib" / "torch.py").read_text() == "x = 1\n"
    assert not (tmp_path / "commit" / COMPILE_CACHE).exists()
