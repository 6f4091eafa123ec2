"""probes/script.py learns the build's torch version from its torch/version.py, without importing
torch (issue 54.2: that import cost every build of a `bisect --script` 1.5-2.4 s on the H100, on
top of the script's own), and asks a child interpreter only when the file does not spell it out."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO

ADAPTER = REPO / "probes" / "script.py"
COMMAND = 'echo "saw $TORCHBISECT_TORCH_VERSION"'


def _fake_torch(root: Path, version_py: str) -> Path:
    """A torch whose import leaves a mark: the adapter must not import it when version.py says."""
    package = root / "torch"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(
        "import os\n"
        "open(os.environ['IMPORT_MARK'], 'a').write('imported\\n')\n"
        "from . import version\n"
        "__version__ = version.__version__\n"
    )
    (package / "version.py").write_text(version_py)
    return root


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory) -> str:
    """An interpreter with no torch of its own (a venv without packages), as a build's is before
    its torch is installed: only the fake torch on PYTHONPATH is there to be found."""
    venv = tmp_path_factory.mktemp("bare") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    return str(venv / "bin" / "python")


def _adapt(python: str, tmp_path: Path, site: Path | None) -> tuple[dict, str, Path]:
    mark = tmp_path / "imported"
    env = dict(os.environ, TORCHBISECT_SCRIPT=COMMAND, IMPORT_MARK=str(mark))
    env.pop("PYTHONPATH", None)
    if site is not None:
        env["PYTHONPATH"] = str(site)
    out = tmp_path / "doc.json"
    done = subprocess.run(
        [python, str(ADAPTER), "--json", str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(out.read_text()), done.stdout, mark


def test_a_release_version_file_is_read_and_torch_is_never_imported(bare_python, tmp_path):
    site = _fake_torch(
        tmp_path / "site",
        "from typing import Optional\n"
        "__all__ = ['__version__', 'debug', 'cuda', 'git_version', 'hip']\n"
        "__version__ = '2.15.0+cu132'\n"
        "debug = False\n"
        "cuda: Optional[str] = '13.2'\n"
        "git_version = 'd0f2af8b66b20da4baa50644c0cd3f887a2eae2e'\n"
        "hip: Optional[str] = None\n",
    )
    doc, said, mark = _adapt(bare_python, tmp_path, site)
    assert doc["env"] == {
        "torch_version": "2.15.0+cu132",
        "git_version": "d0f2af8b66b20da4baa50644c0cd3f887a2eae2e",
    }
    assert "saw 2.15.0+cu132" in said  # the command is told it too
    assert not mark.exists()  # nothing imported torch: neither the adapter nor the command


def test_a_version_file_that_computes_its_values_is_asked_of_torch_itself(bare_python, tmp_path):
    site = _fake_torch(
        tmp_path / "site",
        "__version__ = '.'.join(['2', '16', '0'])\ngit_version = 'abc' + 'def'\n",
    )
    doc, said, mark = _adapt(bare_python, tmp_path, site)
    assert doc["env"] == {"torch_version": "2.16.0", "git_version": "abcdef"}
    assert "saw 2.16.0" in said and mark.read_text() == "imported\n"


def test_without_a_torch_the_command_still_decides(bare_python, tmp_path):
    doc, said, mark = _adapt(bare_python, tmp_path, None)
    assert doc["env"] == {"torch_version": "", "git_version": ""}
    assert doc["verdict"] == "not_affected" and "saw " in said and not mark.exists()


@pytest.mark.parametrize(
    ("timeout", "margin"), [(900.0, 10.0), (20.0, 2.0), (5.0, 1.0), (1.0, 0.5), (0.5, 0.25)]
)
def test_the_adapter_stops_a_script_a_tenth_of_its_timeout_early_and_never_at_once(timeout, margin):
    """1 to 10 s before torchbisect's own stop, and never more than half the timeout: a 1 s
    timeout left the script no time at all."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("script_adapter", REPO / "probes" / "script.py")
    adapter = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(adapter)
    assert adapter.deadline_of(timeout, 100.0) == pytest.approx(100.0 + timeout - margin)
    assert adapter.deadline_of(None, 100.0) is None
