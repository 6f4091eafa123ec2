"""48.1: only what is torchbisect's is removed or replaced.  `cache --prune` and `report --out`
pointed at a folder that is not the tool's deleted the user's own venvs, downloads and pages
(and, through a `venvs` link, the folder it points to); now the folders torchbisect makes carry a
mark (utils/owned.py), and anything else is one sentence, exit 2, with nothing touched."""

from __future__ import annotations

import datetime as dt
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers.cli import torchbisect

from torchbisect.bench.synthetic import synthetic_run
from torchbisect.exits import Exit
from torchbisect.report import render_runs
from torchbisect.utils import owned

NOW = dt.datetime(2026, 3, 20, 12, 0, tzinfo=dt.timezone.utc)
BAD = {"capture_data_ptr": (5, 5)}
PRECIOUS = "precious, not torchbisect's\n"


def refused(done: subprocess.CompletedProcess, *words: str) -> None:
    lines = done.stderr.strip().splitlines()
    assert done.returncode == Exit.MISTAKE and len(lines) == 1, done.stdout + done.stderr
    assert all(word in lines[0] for word in words), lines[0]


def snapshot(folder: Path) -> dict[str, str]:
    return {
        p.relative_to(folder).as_posix(): p.read_text() if p.is_file() else "<dir>"
        for p in sorted(folder.rglob("*"))
    }


def _users_folder(root: Path) -> Path:
    """A folder of the user's, with a `venvs/` and a `downloads/` that are not torchbisect's."""
    work = root / "mine"
    (work / "venvs" / "myproject" / "bin").mkdir(parents=True)
    (work / "venvs" / "myproject" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (work / "downloads").mkdir()
    (work / "downloads" / "thesis.pdf").write_text(PRECIOUS)
    return work


def test_cache_prune_in_a_folder_that_is_not_torchbisects_removes_nothing(tmp_path):
    work = _users_folder(tmp_path)
    before = snapshot(work)
    done = torchbisect("cache", "--backend", "venv", "--prune", "--workdir", work, cwd=tmp_path)
    refused(done, str(work / "venvs"), "was not made by torchbisect", "'myproject'")
    assert snapshot(work) == before
    shutil.rmtree(work / "venvs")  # the downloads folder alone is refused as well
    refused(
        torchbisect("cache", "--backend", "venv", "--prune", "--workdir", work, cwd=tmp_path),
        str(work / "downloads"),
        "'thesis.pdf'",
    )
    assert (work / "downloads" / "thesis.pdf").read_text() == PRECIOUS


def test_cache_prune_never_follows_a_venvs_link_out(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "notes.txt").write_text(PRECIOUS)
    (elsewhere / "env").mkdir()
    work = tmp_path / "work"
    work.mkdir()
    (work / "venvs").symlink_to(elsewhere)
    done = torchbisect("cache", "--backend", "venv", "--prune", "--workdir", work, cwd=tmp_path)
    refused(done, "venvs is a symbolic link", "removes nothing through a link")
    assert (elsewhere / "notes.txt").read_text() == PRECIOUS and (elsewhere / "env").is_dir()


@pytest.mark.skipif(shutil.which("uv") is None, reason="uv is not installed")
def test_cache_prune_removes_what_torchbisect_made_and_no_link_target(tmp_path):
    """A marked venvs/ (as a run makes it) and an older torchbisect's unmarked downloads/: both
    pruned; a link inside venvs/ is not followed."""
    work = tmp_path / "work"
    owned.claim(work / "venvs", "venvs", cache=True)
    (work / "venvs" / "dev-a" / "bin").mkdir(parents=True)
    (work / "venvs" / "dev-a.lock").write_text("")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text(PRECIOUS)
    (work / "venvs" / "dev-link").symlink_to(outside)
    old = work / "downloads" / ("ab" * 16)
    old.mkdir(parents=True)
    (old / "torch-2.99.0-cp311-none-any.whl.part").write_text("half a wheel")
    tag = (work / "venvs" / "CACHEDIR.TAG").read_text()
    assert tag.startswith("Signature: 8a477f597d28d172789f06886806bc55")
    done = torchbisect(
        "cache",
        "--backend",
        "venv",
        "--prune",
        "--workdir",
        work,
        cwd=tmp_path,
        env_extra={"UV_CACHE_DIR": str(tmp_path / "uv-cache")},
    )
    assert done.returncode == Exit.OK, done.stderr
    assert f"removed 1 venv(s) under {work / 'venvs'}" in done.stdout
    assert not (work / "venvs" / "dev-a").exists() and not (work / "downloads").exists()
    assert (outside / "keep.txt").read_text() == PRECIOUS


def test_report_out_at_a_folder_of_the_users_replaces_and_removes_nothing(tmp_path, data_dir):
    out = tmp_path / "site"
    (out / "nightlies").mkdir(parents=True)
    (out / "nightlies" / "2026-01.html").write_text(PRECIOUS)
    (out / "index.html").write_text(PRECIOUS)
    before = snapshot(out)
    docs = sorted((data_dir / "report").glob("synthetic-h200-*.json"))
    done = torchbisect("report", "--probe-json", *docs, "--out", out, cwd=tmp_path)
    refused(done, str(out / "index.html"), "was not written by torchbisect", "choose a new")
    assert snapshot(out) == before


def test_report_out_removes_only_the_pages_it_drew(tmp_path):
    """A folder holding the user's own fold-named pages: the render adds its own, and removing
    its old folds later never takes the user's."""
    out = tmp_path / "site"
    (out / "nightlies").mkdir(parents=True)
    (out / "nightlies" / "mine.html").write_text(PRECIOUS)
    render_runs(_nightlies(12), [], out, generated=NOW)
    assert len(list((out / "nightlies").glob("*.html"))) == 2
    render_runs([synthetic_run("2.15.0+cu132", BAD)], [], out, generated=NOW)
    assert [p.name for p in (out / "nightlies").iterdir()] == ["mine.html"]
    assert (out / "nightlies" / "mine.html").read_text() == PRECIOUS


def test_a_page_an_older_torchbisect_drew_is_recognised_and_its_old_folds_go(tmp_path):
    out = tmp_path / "site"
    render_runs(_nightlies(12), [], out, generated=NOW)
    (out / owned.MARK).unlink()  # as an older torchbisect left it
    (out / "nightlies" / "mine.html").write_text(PRECIOUS)
    render_runs([synthetic_run("2.15.0+cu132", BAD)], [], out, generated=NOW)
    assert [p.name for p in (out / "nightlies").iterdir()] == ["mine.html"]
    assert owned.marked(out)


def test_report_out_never_writes_through_a_link(tmp_path, data_dir):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "site").symlink_to(elsewhere)
    docs = sorted((data_dir / "report").glob("synthetic-h200-*.json"))
    refused(
        torchbisect("report", "--probe-json", *docs, "--out", tmp_path / "site", cwd=tmp_path),
        "site is a symbolic link",
    )
    assert list(elsewhere.iterdir()) == []


def _nightlies(days: int):
    return [
        synthetic_run(f"2.16.0.dev{dt.date(2026, 1, 1) + dt.timedelta(days=d):%Y%m%d}+cu132", BAD)
        for d in range(days)
    ]
