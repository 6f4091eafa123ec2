"""A repeated `nox -s <session>` reuses its venv and installs the package again only when the
package's files changed (pyproject.toml, a file added or removed): uv rebuilt it on every call."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import IN_CI, REPO

pytestmark = pytest.mark.slow  # real nox sessions with real installs

INSTALLS = "pip install -e ."


def test_a_session_reinstalls_only_when_the_package_changed(tmp_path):
    nox = shutil.which("nox")
    if nox is None:
        (pytest.fail if IN_CI else pytest.skip)("nox is not installed")
    for name in ("noxfile.py", "pyproject.toml", "setup.py", "README.md", "LICENSE"):
        shutil.copy(REPO / name, tmp_path / name)
    for folder in ("src", "probes"):
        shutil.copytree(
            REPO / folder,
            tmp_path / folder,
            ignore=shutil.ignore_patterns("*.egg-info", "__pycache__"),
        )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}

    def schema_session(*flags: str) -> str:
        done = subprocess.run(
            [nox, *flags, "-s", "schema", "--", "--out", "out/matrix.schema.json"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout + done.stderr

    (tmp_path / "out").mkdir()
    assert INSTALLS in schema_session()  # a new venv
    again = schema_session()
    assert INSTALLS not in again and "installed from unchanged sources" in again
    Path(tmp_path / "src" / "torchbisect" / "added.py").write_text('"""A new module."""\n')
    assert INSTALLS in schema_session()
    assert INSTALLS not in schema_session()
    edited = (tmp_path / "pyproject.toml").read_text().replace('version = "', 'version = "1')
    (tmp_path / "pyproject.toml").write_text(edited)
    assert INSTALLS in schema_session()
    # -R installs nothing, so it marks nothing installed: the next plain run installs the change
    (tmp_path / "pyproject.toml").write_text(edited.replace('version = "1', 'version = "2'))
    assert INSTALLS not in schema_session("-R")
    assert INSTALLS in schema_session()


def test_a_local_report_session_leaves_the_services_runner_kinds_out(tmp_path):
    """`nox -s report` in a clone draws the user's page, not the maintainers' fleet of
    runners.yaml; `-- --runners runners.yaml` (as the workflows pass it) says the kinds, and
    `nox -s notify` reads the file it is given."""
    nox = shutil.which("nox")
    if nox is None:
        (pytest.fail if IN_CI else pytest.skip)("nox is not installed")
    for name in (
        "noxfile.py",
        "pyproject.toml",
        "setup.py",
        "README.md",
        "LICENSE",
        "runners.yaml",
    ):
        shutil.copy(REPO / name, tmp_path / name)
    for folder in ("src", "probes"):
        shutil.copytree(
            REPO / folder,
            tmp_path / folder,
            ignore=shutil.ignore_patterns("*.egg-info", "__pycache__"),
        )
    shutil.copy(REPO / "reports" / "evidence" / "results.sqlite", tmp_path / "s.sqlite")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("GITHUB_")}

    def session(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [nox, "-s", *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
        )

    done = session("report", "--", "--store", "s.sqlite", "--out", "site")
    assert done.returncode == 0, done.stdout + done.stderr
    lazy = tmp_path / "site" / "stale_replay"  # the evidence holds two regressions (issue 47)
    assert "Runner kinds" not in (lazy / "index.html").read_text()
    done = session(
        "report", "--", "--store", "s.sqlite", "--out", "site", "--runners", "runners.yaml"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    page = (lazy / "index.html").read_text()
    # the H200's runs kept no attendance, the H100's shard did (issue 54): not "never reported"
    assert "Runner kinds" in page and "come from runs that kept no attendance" in page
    assert "never reported" not in page
    (tmp_path / "runners.yaml").write_text("kinds: []\n")  # a mistake: notify loads the file
    told = session(
        "notify",
        "--",
        "--store",
        "s.sqlite",
        "--summary",
        "site/stale_replay/summary.md",
        "--runners",
        "runners.yaml",
    )
    assert told.returncode != 0 and "runners.yaml" in told.stdout + told.stderr


def test_the_test_sessions_load_no_pytest_plugin_of_the_base_interpreter(tmp_path):
    """The sessions see the base's site-packages (for its torch), and pytest loaded every plugin
    installed there (issue 49, friction 10): they load only the test extras' plugins.  Here a
    plugin the base holds refuses to load, as a broken or unwanted one would."""
    import importlib.util
    import sys

    pytest.importorskip("nox")
    spec = importlib.util.spec_from_file_location("noxfile_under_test", REPO / "noxfile.py")
    noxfile = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(noxfile)
    base = tmp_path / "base-site"
    info = base / "intruder-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: intruder\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[pytest11]\nintruder = intruder_plugin\n")
    (base / "intruder_plugin.py").write_text("raise SystemExit('the base interpreter plugin')\n")
    (tmp_path / "test_one.py").write_text("def test_one():\n    pass\n")
    env = {**os.environ, "PYTHONPATH": str(base)}

    def pytest_run(*args: str, **extra: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args, "test_one.py"],
            cwd=tmp_path,
            env={**env, **extra},
            capture_output=True,
            text=True,
            timeout=300,
        )

    assert "the base interpreter plugin" in pytest_run().stderr  # what a session met before
    done = pytest_run(*noxfile._PLUGINS, "-n", "1", **noxfile._PYTEST_ENV)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout
