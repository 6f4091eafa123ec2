"""E13: four writers pinning one lock at once (as four `plan --hash` runs, or shards pinning what
their installers hashed) lose no pin: each write is a read-modify-write under an fcntl lock, and a
writer that resolved without a pin keeps the pin another wrote meanwhile.  Real processes."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from torchbisect.plan.lock import Lock, LockedBuild

WRITERS, CELLS = 4, 32
WRITER = r"""
import os, sys, time
from torchbisect.plan.lock import Lock, pin_sha256
path, go, me, writers = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
unpinned = Lock.load(path)  # what a plan resolved: every wheel, no sha256 yet
mine = sorted(unpinned.builds)[me::writers]
while not os.path.exists(go):
    time.sleep(0.001)
for cell_id in mine:
    unpinned.save(path)  # a plan saving its own view, which knows none of the pins
    pin_sha256(path, cell_id, "%064x" % int(cell_id.split("-")[-1]))
"""


def _unpinned() -> Lock:
    return Lock(
        builds={
            f"nightly-2026110{i % 10}-cu130-cp312-{i}": LockedBuild(
                channel="nightly",
                version=f"2.16.0.dev2026110{i % 10}+cu130",
                cuda="cu130",
                python="3.12",
                url=f"https://download.example/whl/torch-2.16.0.dev{i}-cp312-cp312-"
                "manylinux_2_28_x86_64.whl",
            )
            for i in range(CELLS)
        }
    )


@pytest.mark.slow
@pytest.mark.parametrize("round_", range(3))
def test_four_writers_pinning_one_lock_at_once_lose_no_pin(tmp_path, round_):
    path, go = tmp_path / "matrix.lock.json", tmp_path / "go"
    _unpinned().save(path)
    writers = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(go), str(i), str(WRITERS)])
        for i in range(WRITERS)
    ]
    time.sleep(1.0)  # every writer has imported and loaded; then all start at once
    go.touch()
    assert [w.wait(timeout=120) for w in writers] == [0] * WRITERS
    pins = {k: v["sha256"] for k, v in json.loads(path.read_text())["builds"].items()}
    lost = sorted(k for k, v in pins.items() if v is None)
    assert not lost, f"{len(lost)} of {CELLS} pins lost"
    assert all(v == f"{int(k.split('-')[-1]):064x}" for k, v in pins.items())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["go", path.name]  # no temporary left
