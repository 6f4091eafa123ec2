"""runners.yaml's three kinds (two platforms, an old driver) over three stand-in nightlies:
the world of the `plan --runners` and `matrix --kind` tests (`make_world`; as a fixture of the
unit tests, `kinds_world`)."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest
from act.wheels import nightly_index

DAYS = [date(2026, 10, 1), date(2026, 10, 4), date(2026, 10, 7)]
RUNNERS = """\
kinds:
  - name: H200
    gpu: NVIDIA H200
    labels: [self-hosted, linux, x64, h200]
    platform: linux_x86_64
    driver: "580.95.05"
    shards: 2
  - name: GB300
    gpu: NVIDIA GB300
    labels: [self-hosted, linux, ARM64, gb300]
    platform: linux_aarch64
    driver: "580.95.05"
    shards: 5
  - name: A100
    gpu: NVIDIA A100
    labels: [self-hosted, linux, x64, a100]
    platform: linux_x86_64
    driver: "470.57.02"
"""


def make_world(tmp_path: Path) -> Path:
    """matrix.yaml over three stand-in nightlies (both platforms) and runners.yaml's kinds."""
    nightly_index(
        tmp_path / "index", DAYS, first_stale=DAYS[1], git_versions={d: "a" * 40 for d in DAYS}
    )
    (tmp_path / "matrix.yaml").write_text(
        'defaults:\n  cuda: auto\n  python: "3.11"\ncuda_tags: [cu126, cu130]\n'
        f'indexes:\n  nightly: "{tmp_path}/index/{{cuda}}/"\n'
        f"nightly:\n  dates: [{', '.join(f'{d:%Y-%m-%d}' for d in DAYS)}]\n"
    )
    (tmp_path / "runners.yaml").write_text(RUNNERS)
    return tmp_path


@pytest.fixture
def kinds_world(tmp_path: Path) -> Path:
    """`make_world` in the test's folder."""
    return make_world(tmp_path)
