"""Which compile cache volume a docker probe gets: one per build of a cell, per deployment; the
engine is not needed to name it (tests/e2e/test_docker_compile_caches.py uses the real one)."""

from __future__ import annotations

from torchbisect.backends.docker_compile import VOLUME_PREFIX, volume_name


def test_a_build_keeps_its_volume_and_no_two_builds_cells_or_deployments_share_one(monkeypatch):
    monkeypatch.delenv("TORCHBISECT_UV_CACHE_VOLUME", raising=False)
    name = volume_name("nightly-20261201-cu130-cp312", "a" * 64)
    assert name.startswith(VOLUME_PREFIX) and name == volume_name(
        "nightly-20261201-cu130-cp312", "a" * 64
    )
    others = {
        volume_name("nightly-20261201-cu130-cp312", "b" * 64),  # the same cell, a rebuilt wheel
        volume_name("nightly-20261202-cu130-cp312", "a" * 64),  # another cell
    }
    monkeypatch.setenv("TORCHBISECT_UV_CACHE_VOLUME", "second-deployment")
    others.add(volume_name("nightly-20261201-cu130-cp312", "a" * 64))
    assert len(others) == 3 and name not in others
