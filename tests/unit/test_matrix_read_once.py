"""Each input is read once: `matrix`, `report` and `plan` open matrix.yaml one time each (the
command loads it into its options, and nothing below the command reads the file again; `plan`
with runner kinds plans every kind from that one reading), and one builder
makes the page's inputs for both, so the page `matrix` draws is the page `report` draws from the
same store."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from helpers.cli import call

from torchbisect.exits import Exit

_WATCHED: list[tuple[str, list[str]]] = []  # (the path watched, its opens) while a test watches


def _audit(event: str, args: tuple[object, ...]) -> None:
    if event == "open" and _WATCHED and isinstance(args[0], (str, bytes, os.PathLike)):
        path, opens = _WATCHED[-1]
        if os.path.realpath(os.fsdecode(args[0])) == path:
            opens.append(event)


sys.addaudithook(_audit)  # a hook cannot be removed: it counts only while a test watches


@contextmanager
def opens_of(path: Path) -> Iterator[list[str]]:
    """Every time a file is opened at `path` in this process (Python's `open` audit event, which
    every read of a file in Python raises)."""
    opens: list[str] = []
    _WATCHED.append((os.path.realpath(path), opens))
    try:
        yield opens
    finally:
        _WATCHED.pop()


@pytest.fixture
def project(tmp_path: Path, monkeypatch) -> Path:
    """A small project: a matrix.yaml that names two probes and the upstream report, and one
    release, on a machine without a GPU (so the run plans without an index and probes nothing)."""
    (tmp_path / "matrix.yaml").write_text(
        "probes: {stale_replay: {}, cumsum_64bit: {}}\n"
        "references:\n  upstream: https://github.com/pytorch/pytorch/issues/424242\n"
        "stable:\n  versions: [2.5.0]\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("torchbisect.utils.gpus.list_gpus", lambda: [])
    return tmp_path


def _written(out: str) -> list[str]:
    """The files a command said it wrote, as paths under the page's folder."""
    return sorted(
        Path(line.removeprefix("wrote ")).absolute().relative_to(Path.cwd() / "reports").as_posix()
        for line in out.splitlines()
        if line.startswith("wrote ")
    )


def test_matrix_and_report_read_matrix_yaml_once_and_draw_the_same_page(project, capsys):
    with opens_of(project / "matrix.yaml") as opens:
        assert call("matrix", "--matrix", "matrix.yaml") == Exit.OK
    assert len(opens) == 1, f"`matrix` opened matrix.yaml {len(opens)} times"
    drawn_by_matrix = _written(capsys.readouterr().out)
    page = (project / "reports" / "stale_replay" / "index.html").read_text()
    assert 'href="https://github.com/pytorch/pytorch/issues/424242"' in page

    with opens_of(project / "matrix.yaml") as opens:
        assert call("report", "--matrix", "matrix.yaml") == Exit.OK
    assert len(opens) == 1, f"`report` opened matrix.yaml {len(opens)} times"
    drawn_by_report = _written(capsys.readouterr().out)
    # both probes the matrix names, each its own page, whichever command drew them
    assert drawn_by_matrix == drawn_by_report
    assert {"stale_replay/index.html", "cumsum_64bit/index.html", "index.html"} <= set(
        drawn_by_report
    )


def test_plan_reads_matrix_yaml_once_for_every_kind_it_plans(tmp_path, monkeypatch, capsys):
    """`plan --runners` plans each declared kind (three here) from the one reading of the file."""
    from helpers.runner_kinds import make_world

    monkeypatch.chdir(make_world(tmp_path))
    with opens_of(tmp_path / "matrix.yaml") as opens:
        status = call(
            "plan", "--store", "none.sqlite", "--runners", "runners.yaml", "--lock-dir", "locks"
        )
    assert status == Exit.OK, capsys.readouterr()
    assert len(opens) == 1, f"`plan` opened matrix.yaml {len(opens)} times"
    assert len(list((tmp_path / "locks").glob("*.lock.json"))) >= 2  # each kind planned
