"""Probes are found where users put them, in one order: `probes/` beside the matrix.yaml in use,
the folders TORCHBISECT_PROBES names, then the shipped ones (issue 52.1); a name is looked up,
never joined into a path (issue 53.2).  Real files in real folders; the CLI as a user runs it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers import REPO
from helpers.cli import invoke, one_sentence

from torchbisect.errors import ConfigError
from torchbisect.exits import Exit
from torchbisect.probe.scripts import available, default_probe, probe_path, project_probes

SHIPPED = REPO / "probes"
MINE = 'import sys\nprint("affected: mine says so")\nsys.exit(1)\n'


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    """A user's project: matrix.yaml with its own probes/ beside it, no TORCHBISECT_PROBES."""
    monkeypatch.delenv("TORCHBISECT_PROBES", raising=False)
    (tmp_path / "matrix.yaml").write_text("preinstalled: true\n")
    (tmp_path / "probes").mkdir()
    (tmp_path / "probes" / "mine.py").write_text(MINE)
    return tmp_path


def test_the_users_scripts_and_the_shipped_ones_stand_side_by_side(project):
    with project_probes(project / "matrix.yaml"):
        assert probe_path("mine") == project / "probes" / "mine.py"
        assert probe_path("stale_replay") == SHIPPED / "stale_replay.py"
        assert probe_path("cumsum_64bit") == SHIPPED / "cumsum_64bit.py"
        assert {"mine", "stale_replay", "cumsum_64bit"} <= set(available())
        assert default_probe() == "stale_replay"  # none named: the shipped default
    with pytest.raises(ConfigError, match="not found"):  # another project's folder is not seen
        probe_path("mine")


def test_the_order_is_project_then_the_variable_then_shipped(project, tmp_path, monkeypatch):
    first, second = tmp_path / "first", tmp_path / "second"
    for folder in (first, second):
        folder.mkdir()
    (first / "only_first.py").write_text(MINE)
    (second / "only_second.py").write_text(MINE)
    (second / "stale_replay.py").write_text('"""a stand-in of my own"""\n')
    monkeypatch.setenv("TORCHBISECT_PROBES", os.pathsep.join([str(first), "", str(second)]))
    with project_probes(project / "matrix.yaml"):
        assert probe_path("only_first") == first / "only_first.py"
        assert probe_path("only_second") == second / "only_second.py"
        assert probe_path("mine") == project / "probes" / "mine.py"
        # the user's own file of a shipped probe's name stands in for it
        assert probe_path("stale_replay") == second / "stale_replay.py"


def test_a_name_found_twice_is_one_sentence_naming_both_files(project, tmp_path, monkeypatch):
    other = tmp_path / "other"
    other.mkdir()
    (other / "mine.py").write_text(MINE + "# another version\n")
    monkeypatch.setenv("TORCHBISECT_PROBES", str(other))
    with project_probes(project / "matrix.yaml"), pytest.raises(ConfigError) as err:
        probe_path("mine")
    said = str(err.value)
    assert "found twice" in said and str(project / "probes" / "mine.py") in said
    assert str(other / "mine.py") in said
    # the same bytes twice are one probe, not a clash
    (other / "mine.py").write_text(MINE)
    with project_probes(project / "matrix.yaml"):
        assert probe_path("mine") == project / "probes" / "mine.py"


@pytest.mark.parametrize("what", ["missing", "file"])
def test_a_missing_folder_or_a_file_as_the_folder_is_said_so(tmp_path, monkeypatch, what):
    named = tmp_path / "nothere"
    if what == "file":
        named = tmp_path / "ones_sum.py"
        named.write_text(MINE)
    monkeypatch.setenv("TORCHBISECT_PROBES", str(named))
    with pytest.raises(ConfigError) as err:
        probe_path("stale_replay")
    said = str(err.value)
    assert f"TORCHBISECT_PROBES names {named}, which " in said
    assert ("is a file, not a folder" if what == "file" else "does not exist") in said
    assert "holds no .py file" not in said and "ones_sum.py/stale_replay.py" not in said


def test_not_found_names_every_folder_searched_and_how_to_add_one(project, tmp_path, monkeypatch):
    extra = tmp_path / "extra"
    extra.mkdir()
    monkeypatch.setenv("TORCHBISECT_PROBES", str(extra))
    with project_probes(project / "matrix.yaml"), pytest.raises(ConfigError) as err:
        probe_path("nothere")
    said = str(err.value)
    for folder in (project / "probes", extra, SHIPPED):
        assert str(folder) in said
    assert "`probes/` folder beside matrix.yaml" in said and "TORCHBISECT_PROBES" in said
    assert "mine" in said and "stale_replay" in said  # the probes that are there


@pytest.mark.parametrize(
    "name", ["../home/app/settings", "/etc/passwd", "a.", "..", "a/b", "x" * 65, ".hidden"]
)
def test_a_name_that_is_not_plain_is_never_joined_into_a_path(project, name):
    (project / "home" / "app").mkdir(parents=True)
    (project / "home" / "app" / "settings.py").write_text("SECRET = 1\n")
    with (
        project_probes(project / "matrix.yaml"),
        pytest.raises(ConfigError, match="not a probe's name"),
    ):
        probe_path(name)


@pytest.mark.slow
def test_probe_runs_cell_dot_probe_and_the_named_probe_among_several(project):
    (project / "probes" / "other.py").write_text("import sys\nprint('fine')\n")
    env = {k: v for k, v in os.environ.items() if k != "TORCHBISECT_PROBES"}
    done = invoke("probe", "preinstalled.mine", cwd=project, env=env)
    assert done.returncode == Exit.AFFECTED, done.stderr
    assert "affected: mine says so" in done.stdout
    done = invoke("probe", "--probe", "other", cwd=project, env=env)
    assert done.returncode == Exit.OK, done.stderr
    done = invoke("probe", "preinstalled.mine", "--probe", "other", cwd=project, env=env)
    said = one_sentence(done.stderr, done.returncode, Exit.MISTAKE, command="probe")
    assert "names the probe mine and --probe names other" in said


def test_the_cli_says_a_missing_probes_folder_in_one_sentence(project, tmp_path):
    done = invoke(
        "probe",
        "--probe",
        "mine",
        cwd=project,
        env_extra={"TORCHBISECT_PROBES": str(tmp_path / "gone")},
    )
    said = one_sentence(done.stderr, done.returncode, Exit.MISTAKE, command="probe")
    assert f"TORCHBISECT_PROBES names {tmp_path / 'gone'}, which does not exist" in said


def test_plan_says_when_the_users_probes_are_not_named_and_how_to_run_them(
    project, capsys, monkeypatch
):
    from helpers.cli import call

    monkeypatch.chdir(project)
    assert call("plan", "--offline") == Exit.OK
    said = capsys.readouterr()
    assert (
        "matrix.yaml names no probe, so stale_replay probes every build; your probes "
        "folders hold mine: to run yours, add `probe: mine`" in said.out + said.err
    )
    (project / "matrix.yaml").write_text("preinstalled: {probe: mine}\n")
    assert call("plan", "--offline") == Exit.OK
    said = capsys.readouterr()
    assert "names no probe" not in said.out + said.err and "preinstalled.mine" in said.out


def test_a_users_file_of_a_shipped_probes_name_is_said_with_both_files(
    project, capsys, monkeypatch
):
    """The user's stale_replay.py runs in place of the shipped one (a stand-in is how a probe is
    tried), but the name is found twice, so plan says which file runs and which it hides."""
    from helpers.cli import call

    (project / "probes" / "stale_replay.py").write_text('"""a stand-in of my own"""\n')
    monkeypatch.chdir(project)
    assert call("plan", "--offline") == Exit.OK
    said = capsys.readouterr()
    text = said.out + said.err
    assert (
        "probe 'stale_replay' is found twice: your "
        f"{project / 'probes' / 'stale_replay.py'} runs in place of the shipped "
        f"{SHIPPED / 'stale_replay.py'}" in text
    )
    # a byte-identical copy hides nothing: no word of it
    (project / "probes" / "stale_replay.py").write_bytes((SHIPPED / "stale_replay.py").read_bytes())
    assert call("plan", "--offline") == Exit.OK
    said = capsys.readouterr()
    assert "found twice" not in said.out + said.err
