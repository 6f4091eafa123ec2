"""The page says where the tool lives: its "Check your own torch" links the repository the page
was built from (in a workflow, from GitHub's Actions context; locally, from the git checkout the
matrix lies in), and nothing when that is not known."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from helpers import REPO
from helpers.cli import call

from torchbisect.exits import Exit

DOC = sorted((REPO / "reports" / "evidence" / "hand").glob("*.json"))[0]


def _page(tmp_path: Path) -> str:
    assert (
        call(
            "report",
            "--probe-json",
            str(DOC),
            "--out",
            str(tmp_path / "site"),
            "--matrix",
            str(tmp_path / "matrix.yaml"),
        )
        == Exit.OK
    )
    return (tmp_path / "site" / "index.html").read_text(encoding="utf-8")


def test_in_a_workflow_the_page_links_the_repository_it_runs_in(tmp_path, monkeypatch):
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_SERVER_URL", "https://github.com")
    monkeypatch.setenv("GITHUB_REPOSITORY", "someone/torchbisect")
    page = _page(tmp_path)
    assert (
        'Its repository: <a href="https://github.com/someone/torchbisect" '
        'rel="noopener noreferrer">https://github.com/someone/torchbisect</a>'
    ) in page


@pytest.mark.parametrize(
    "remote",
    ["git@github.com:someone/torchbisect.git", "https://github.com/someone/torchbisect.git"],
)
def test_locally_the_page_links_the_checkouts_origin(tmp_path, monkeypatch, remote):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "remote", "add", "origin", remote], check=True)
    (tmp_path / "matrix.yaml").write_text("preinstalled: true\n")
    assert 'href="https://github.com/someone/torchbisect"' in _page(tmp_path)


def test_without_a_known_repository_the_projects_home_is_linked_and_nothing_made_up(tmp_path):
    """No checkout, no `references:`: the page links the project's home as pyproject.toml names
    it (issue 49: it said "in a clone of torchbisect's repository" and linked none)."""
    from torchbisect import home

    (tmp_path / "matrix.yaml").write_text("preinstalled: true\n")
    page = _page(tmp_path)
    assert f'Its repository: <a href="{home()}"' in page
    assert page.count("Its repository") == 1


def test_references_repository_names_it_where_no_checkout_says(tmp_path, monkeypatch):
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    (tmp_path / "matrix.yaml").write_text(
        "preinstalled: true\nreferences:\n  repository: https://example.org/team/torchbisect\n"
    )
    assert 'href="https://example.org/team/torchbisect"' in _page(tmp_path)


def test_a_references_repository_that_is_not_https_is_one_sentence(tmp_path, capsys):
    (tmp_path / "matrix.yaml").write_text(
        "preinstalled: true\nreferences:\n  repository: javascript:alert(1)\n"
    )
    assert (
        call(
            "report",
            "--probe-json",
            str(DOC),
            "--out",
            str(tmp_path / "site"),
            "--matrix",
            str(tmp_path / "matrix.yaml"),
        )
        == Exit.MISTAKE
    )
    err = capsys.readouterr().err
    assert "line 3" in err and "references.repository" in err and err.count("\n") == 1
