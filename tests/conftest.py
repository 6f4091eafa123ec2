"""Markers: Docker and Chromium tests run wherever those exist and are REQUIRED under CI=true.

A developer without Docker sees them skipped with a reason; CI, which installs both in .ci/run,
fails instead of silently skipping.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _docker_ok() -> bool:
    try:
        import docker

        docker.from_env(timeout=5).ping()
        return True
    except Exception:
        return False


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _has_gpu() -> bool:
    if not shutil.which("nvidia-smi"):
        return False
    return subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0


def pytest_collection_modifyitems(config, items):
    checks = {
        "docker": (_docker_ok, "no Docker engine answers (start dockerd)"),
        "chromium": (lambda: _chromium() is not None, "Debian's chromium is not installed"),
    }
    cache: dict[str, bool] = {}
    for item in items:
        for name, (probe, why) in checks.items():
            if name not in item.keywords:
                continue
            if name not in cache:
                cache[name] = probe()
            if cache[name]:
                continue
            if not IN_CI:  # under CI the test runs and fails loudly instead
                item.add_marker(pytest.mark.skip(reason=why))
        if "gpu" in item.keywords and not _has_gpu():
            item.add_marker(pytest.mark.skip(reason="no CUDA GPU on this machine"))


@pytest.fixture
def repo() -> Path:
    return REPO


@pytest.fixture
def data_dir() -> Path:
    return DATA
