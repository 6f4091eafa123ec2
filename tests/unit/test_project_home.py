"""The project's home is named once, in pyproject.toml's `[project.urls]`, and whatever links to it
reads it from there (issue 49, friction 2: the README said `github.com/OWNER/torchbisect`)."""

from __future__ import annotations

import re
import sys

import pytest
from helpers import REPO
from helpers.cli import call

import torchbisect
from torchbisect.config.matrix import References
from torchbisect.page.advice import build_advice
from torchbisect.page.regression import regression_for

tomllib = pytest.importorskip("tomllib")  # Python 3.11+
HOME = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["urls"]["Homepage"]


def test_the_home_is_pyprojects_and_the_readme_installs_from_it():
    assert torchbisect.home() == HOME and HOME.startswith("https://")
    readme = (REPO / "README.md").read_text()
    assert f'pip install "git+{HOME}"' in readme
    for doc in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        assert not re.search(r"github\.com/OWNER\b", doc.read_text()), doc


def test_an_installed_torchbisect_reads_its_home_from_its_metadata(tmp_path, monkeypatch):
    """What a pip-installed user has: the package's metadata, no pyproject.toml."""
    info = tmp_path / "torchbisect-9.9.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.4\nName: torchbisect\nVersion: 9.9\n"
        "Project-URL: Homepage, https://example.org/fork\n"
    )
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    monkeypatch.setattr(torchbisect, "_home", [])
    assert torchbisect.home() == "https://example.org/fork"


def test_a_page_that_knows_no_repository_of_its_own_links_the_projects_home():
    """The page said "in a clone of torchbisect's repository" and linked none."""
    regression = regression_for()
    assert build_advice((), References(), None, regression).repository == HOME
    named = References(repository="https://github.com/someone/fork")
    assert build_advice((), named, None, regression).repository == "https://github.com/someone/fork"


@pytest.mark.parametrize("command", ["report"])
def test_torchbisect_failing_says_where_to_report_it(command, monkeypatch, capsys):
    from pathlib import Path

    from torchbisect.exits import Exit

    def broken(name, *args, **kwargs):
        raise ImportError(f"No module named {name!r} (a broken install)")

    monkeypatch.setattr("importlib.import_module", broken)
    assert call(command) == Exit.FAILED
    [line] = capsys.readouterr().err.strip().splitlines()
    assert f"; report it at {HOME}/issues with the full traceback, which is in /" in line
    Path(line.rsplit(" ", 1)[1]).unlink()
