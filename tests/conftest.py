"""Markers: Docker and Chromium tests run wherever those exist and are REQUIRED under CI=true.

A developer without Docker sees them skipped with a reason; CI, which installs both in .ci/run,
fails instead of silently skipping.  Fixtures every test file may use: `fake_probes` (the one way a
test chooses its probe scripts), `store` (a real, empty SQLite store), `repo`, `data_dir`.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import DATA, IN_CI, REPO, TESTS
from helpers.nightly_world import nightly_world

# tests/<folder>/ marks its tests with the folder's name
FOLDER_MARKERS = ("unit", "e2e", "faults")


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
        # the kind of a test is its folder (as pip's tests do): -m unit, -m e2e
        kind = item.path.relative_to(TESTS).parts[0]
        if kind in FOLDER_MARKERS:
            item.add_marker(kind)
        for name, (probe, why) in checks.items():
            if item.get_closest_marker(name) is None:
                continue
            if name not in cache:
                cache[name] = probe()
            if cache[name]:
                continue
            if not IN_CI:  # under CI the test runs and fails loudly instead
                item.add_marker(pytest.mark.skip(reason=why))
        if item.get_closest_marker("gpu") is not None and not _has_gpu():
            item.add_marker(pytest.mark.skip(reason="no CUDA GPU on this machine"))


@pytest.fixture(autouse=True)
def _not_a_gpu_job(monkeypatch):
    """The suite runs the tool as a developer would, GPU or not: GITHUB_ACTIONS=true (the tests
    workflow) would make every GPU command require a GPU.  Tests of that rule set it again."""
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)


@pytest.fixture
def fake_probes(monkeypatch):
    """The probes of this test come from a folder of the test's choosing: by default the
    stand-in in tests/helpers/probes (TB_FAKE_MODE picks its behaviour).  The fixture's value
    switches to another folder: `fake_probes(folder)`.  The probe fingerprint is cached per
    process, so the cache is cleared on each switch and after the test."""
    from helpers import FAKE_PROBES

    from torchbisect.probe.scripts import probe_version

    def use(folder: Path = FAKE_PROBES) -> Path:
        monkeypatch.setenv("TORCHBISECT_PROBES", str(folder))
        probe_version.cache_clear()
        return folder

    use()
    yield use
    probe_version.cache_clear()


@pytest.fixture(autouse=True)
def probes_see_test_knobs(monkeypatch):
    """The stand-in probes are steered by TB_* variables (TB_FAKE_MODE, TB_MARK, …); a probe
    sees only allow-listed variables (backends/probe_env.py), so the tests pass these through
    the documented way, TORCHBISECT_PASS_ENV."""
    monkeypatch.setenv("TORCHBISECT_PASS_ENV", "TB_*")


@pytest.fixture
def store(tmp_path):
    """A real SQLite result store, empty, at `results.sqlite` in the test's folder."""
    from torchbisect.store.db import Store

    with Store(tmp_path / "results.sqlite") as opened:
        yield opened


@pytest.fixture
def repo() -> Path:
    return REPO


@pytest.fixture
def data_dir() -> Path:
    return DATA


@pytest.fixture(autouse=True)
def _own_data_folder(monkeypatch, tmp_path_factory):
    """Outside a project torchbisect keeps its results in the per-user data folder
    (defaults.py): every test gets its own, so none reads or writes the user's."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path_factory.mktemp("xdg-data")))


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """The bisection tests' stand-in nightlies on HTTP and a stand-in pytorch clone, made once per
    test module: (base folder, {date: (nightly sha, main sha)}, index URL)."""
    with nightly_world(tmp_path_factory) as made:
        yield made
