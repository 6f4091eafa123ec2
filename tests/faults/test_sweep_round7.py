"""Round 7's hostile-input sweep: what round 6 listed as left, each now one sentence (exit 2).

- A matrix file that refuses reads (`/proc/self/mem`: an I/O error) crashed `report` (250).
- A store that is an empty file was made a database by `report`, which then drew an empty page;
  `cache --store FOLDER` said "no run is stored" and exited 0; a store whose schema number is
  negative was taken as ours, and the number overwritten.
- A damaged `--store` was said only after the index was asked: with the network down, "index
  unreachable" (exit 4) hid a store no network would have helped.
- `--platform` took any word (a typo matched no wheel: every build "missing"); `--probe ""` was
  taken as no probe; `bisect --case` and matrix.yaml's `cases:` took names the probe does not
  declare (the probe then exits 128 on every cell: "infrastructure failure").
"""

from __future__ import annotations

import os
import sqlite3

import pytest
from helpers.cli import invoke, one_sentence

from torchbisect.exits import Exit

UNREACHABLE = "http://127.0.0.1:9/whl/"  # the discard port: nothing listens, refused at once


@pytest.fixture
def project(tmp_path):
    assert invoke("init", cwd=tmp_path).returncode == Exit.OK
    return tmp_path


@pytest.mark.skipif(not os.path.exists("/proc/self/mem"), reason="no /proc/self/mem here")
@pytest.mark.parametrize("command", ["plan", "report"])
def test_a_matrix_file_that_refuses_reads_is_one_sentence(project, command):
    done = invoke(command, "--matrix", "/proc/self/mem", cwd=project)
    line = one_sentence(done.stderr, done.returncode, Exit.MISTAKE, command=command)
    assert "/proc/self/mem could not be read (Input/output error)" in line, line
    assert "pass --matrix with a matrix file" in line, line


@pytest.mark.parametrize(
    "command",
    [["report"], ["notify", "--fix", "--repo", "a/b"], ["cache", "--backend", "venv"], ["cache"]],
)
def test_an_empty_store_file_is_refused_by_the_commands_that_read_it_and_left_empty(
    tmp_path, command
):
    (tmp_path / "empty.sqlite").touch()
    done = invoke(*command, "--store", "empty.sqlite", cwd=tmp_path)
    if command == ["cache", "--backend", "venv"]:  # --backend given: the store is not read
        assert done.returncode == Exit.OK, done.stderr
    else:
        line = one_sentence(done.stderr, done.returncode, Exit.MISTAKE, command=command[0])
        assert "--store empty.sqlite: is an empty file, not a result store" in line, line
    assert (tmp_path / "empty.sqlite").stat().st_size == 0
    assert not (tmp_path / "reports").exists()


def test_cache_says_a_store_that_is_a_folder_instead_of_no_run_is_stored(tmp_path):
    (tmp_path / "folder").mkdir()
    done = invoke("cache", "--store", "folder", cwd=tmp_path)
    line = one_sentence(done.stderr, done.returncode, Exit.MISTAKE, command="cache")
    assert "--store folder: is a folder, not a result store" in line, line


def _negative_schema(path):
    from torchbisect.store.db import Store

    with Store(path):
        pass
    db = sqlite3.connect(path)
    db.execute("PRAGMA user_version = -1")
    db.commit()
    db.close()


def _schema(path) -> int:
    db = sqlite3.connect(path)
    try:
        return db.execute("PRAGMA user_version").fetchone()[0]
    finally:
        db.close()


@pytest.mark.parametrize("command", [["report"], ["merge", "out.sqlite", "store.sqlite"]])
def test_a_store_with_a_negative_schema_number_is_damage_and_stays_as_it_was(tmp_path, command):
    _negative_schema(tmp_path / "store.sqlite")
    args = [*command, "--store", "store.sqlite"] if command == ["report"] else command
    done = invoke(*args, cwd=tmp_path)
    line = one_sentence(done.stderr, done.returncode, Exit.MISTAKE, command=command[0])
    assert "store.sqlite is damaged or not a torchbisect store" in line, line
    assert "its schema number is -1" in line, line
    assert _schema(tmp_path / "store.sqlite") == -1


@pytest.mark.parametrize(
    "command",
    [
        ["bisect", "--good", "2.5.0", "--bad", "2.6.0", "--index-url", UNREACHABLE],
        ["matrix", "--allow-no-gpu", "--backend", "venv"],
    ],
)
def test_a_damaged_store_is_said_before_the_index_is_asked(project, command):
    """The project's matrix.yaml points at pytorch's index; with --index-url (bisect) or an
    `indexes:` at a closed port (matrix) the index would be unreachable (exit 4)."""
    (project / "matrix.yaml").write_text(
        (project / "matrix.yaml").read_text() + f"indexes:\n  stable: {UNREACHABLE}\n"
    )
    _negative_schema(project / "store.sqlite")
    done = invoke(*command, "--store", "store.sqlite", cwd=project)
    line = one_sentence(done.stderr, done.returncode, Exit.MISTAKE, command=command[0])
    assert "store.sqlite is damaged or not a torchbisect store" in line, line


@pytest.mark.parametrize("command", [["plan"], ["bisect", "--good", "2.5.0", "--bad", "2.6.0"]])
@pytest.mark.parametrize("value", ["bogus", "x86_64", "manylinux_2_28", ""])
def test_a_platform_that_is_no_wheel_tag_is_refused_naming_the_flag(tmp_path, command, value):
    done = invoke(*command, "--platform", value, cwd=tmp_path)
    line = one_sentence(done.stderr, done.returncode, Exit.MISTAKE, command=command[0])
    assert "argument --platform: expected a wheel platform tag" in line, line
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(
    "command",
    [
        ["bisect", "--good", "2.5.0", "--bad", "2.6.0"],
        ["probe"],
        ["notify", "--fix", "--repo", "a/b"],
    ],
)
def test_an_empty_probe_name_is_refused_not_read_as_the_default_probe(tmp_path, command):
    done = invoke(*command, "--probe=", cwd=tmp_path)
    line = one_sentence(done.stderr, done.returncode, Exit.MISTAKE, command=command[0])
    assert "argument --probe: is empty" in line, line


def test_a_bisection_case_the_probe_does_not_declare_is_refused_before_anything_runs(tmp_path):
    done = invoke(
        "bisect", "--good", "2.5.0", "--bad", "2.6.0", "--case", "capture_wrte", cwd=tmp_path
    )
    line = one_sentence(done.stderr, done.returncode, Exit.MISTAKE, command="bisect")
    assert "--case capture_wrte: not a case of the probe stale_replay" in line, line
    assert "choose from capture_data_ptr, capture_write," in line, line
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(
    ("text", "where"),
    [
        (
            "stable:\n  - versions: ['2.5.0']\n    cases:\n      - capture_write\n      - typo\n",
            "line 5, key `stable[0].cases[1]`",
        ),
        (
            "defaults:\n  cases: [capture_write, typo]\nstable:\n  - versions: ['2.5.0']\n",
            "line 2, key `defaults.cases[1]`",
        ),
        (
            "probes:\n  stale_replay:\n    cases: [typo]\nstable:\n  - versions: ['2.5.0']\n",
            "line 3, key `probes.stale_replay.cases[0]`",
        ),
    ],
)
def test_a_matrix_case_the_probe_does_not_declare_is_said_at_its_line(tmp_path, text, where):
    (tmp_path / "matrix.yaml").write_text(text)
    done = invoke("plan", "--offline", cwd=tmp_path)
    line = one_sentence(done.stderr, done.returncode, Exit.MISTAKE, command="plan")
    assert f"matrix.yaml, {where}: 'typo' is not a case of the probe stale_replay" in line, line


def test_cases_a_plain_script_ignores_are_not_checked_against_it(tmp_path):
    """A `git bisect run` script (cumsum_64bit) has one case of its own and runs no `cases:`
    (config/matrix.py `settings`), so `defaults`' cases for another probe are no mistake."""
    (tmp_path / "matrix.yaml").write_text(
        "probes:\n  cumsum_64bit: {}\n"
        "defaults:\n  cases: [capture_write]\nstable:\n  - versions: ['2.5.0']\n"
    )
    done = invoke("plan", "--offline", cwd=tmp_path)
    assert done.returncode == Exit.MISTAKE, done.stderr
    assert "--offline plans from the lock file alone" in done.stderr, done.stderr
