"""What a new user meets first, as issue 49 found it: each friction, as the user runs into it."""

from __future__ import annotations

import re

from helpers.cli import torchbisect

from torchbisect.cli import COMMANDS
from torchbisect.exits import Exit


def test_the_matrix_that_init_writes_names_only_commands_an_installed_user_has(tmp_path):
    """It told a pip-installed user to run `nox -s plan`, `nox -s matrix` and `nox -s schema`,
    which exist only in a clone (friction 5)."""
    done = torchbisect("init", cwd=tmp_path)
    assert done.returncode == Exit.OK, done.stderr
    comments = "\n".join(
        line
        for line in (tmp_path / "matrix.yaml").read_text().splitlines()
        if line.lstrip().startswith("#")
    )
    assert "nox" not in comments
    named = re.findall(r"`torchbisect (\w+)", comments)
    assert named and set(named) <= set(COMMANDS), named
    assert (tmp_path / "matrix.schema.json").is_file()  # what the comment says is beside it


def test_ctrl_c_while_the_command_loads_is_an_interruption_not_a_traceback(monkeypatch, capsys):
    """Ctrl-C in the first ~0.6 s printed a KeyboardInterrupt traceback (friction 7): the
    command's own modules are imported then, outside the catcher's try."""
    from helpers.cli import call

    from torchbisect.exits import Exit

    def interrupted(name, *args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("importlib.import_module", interrupted)
    assert call("plan") == Exit.INTERRUPTED
    assert capsys.readouterr().err == "torchbisect plan: interrupted\n"


def test_ctrl_c_while_the_catcher_itself_is_imported_is_an_interruption_too(tmp_path):
    """The `torchbisect` script imports the CLI before any of its code runs: a Ctrl-C there is
    caught by the script's own entry (torchbisect.__main__:main)."""
    import sys

    from helpers.cli import env

    hook = (
        "import sys\n"
        "class Interrupt:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'torchbisect.cli':\n"
        "            raise KeyboardInterrupt\n"
        "sys.meta_path.insert(0, Interrupt())\n"
        "from torchbisect.__main__ import main\n"
        "raise SystemExit(main())\n"
    )
    import subprocess

    done = subprocess.run(
        [sys.executable, "-c", hook, "plan"],
        env=env(),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode, done.stderr) == (Exit.INTERRUPTED, "torchbisect: interrupted\n")


def test_outside_a_project_a_matrix_files_folder_is_the_project(tmp_path):
    """With `--matrix local.yaml` outside a project the lock went beside the file but the store,
    page and venvs into the per-user folder (friction 8).  A flag given still wins."""
    project, elsewhere, data = tmp_path / "proj", tmp_path / "cwd", tmp_path / "data"
    project.mkdir()
    elsewhere.mkdir()
    (project / "local.yaml").write_text("preinstalled: true\n")
    run = ("matrix", "--matrix", "../proj/local.yaml", "--fail-on", "none")
    done = torchbisect(*run, cwd=elsewhere, env_extra={"XDG_DATA_HOME": str(data)})
    assert done.returncode == Exit.OK, done.stderr
    assert (project / "reports" / "results.sqlite").is_file()
    assert (project / "reports" / "index.html").is_file()
    assert not (data / "torchbisect").exists() and not list(elsewhere.iterdir())
    done = torchbisect(
        *run, "--store", "mine.sqlite", cwd=elsewhere, env_extra={"XDG_DATA_HOME": str(data)}
    )
    assert done.returncode == Exit.OK, done.stderr
    assert (elsewhere / "mine.sqlite").is_file()


def test_report_says_what_it_wrote_as_matrix_does(tmp_path):
    """`report` printed bare paths where `matrix` says "wrote …" (friction 10)."""
    from helpers import REPO

    document = sorted((REPO / "reports" / "evidence" / "hand").glob("*.json"))[0]
    done = torchbisect("report", "--probe-json", document, "--out", tmp_path / "site", cwd=tmp_path)
    assert done.returncode == Exit.OK, done.stderr
    lines = done.stdout.splitlines()
    assert f"wrote {tmp_path / 'site' / 'index.html'}" in lines
    assert all(line.startswith("wrote ") for line in lines), lines


def test_the_readme_keeps_no_timing_records_of_the_suite():
    """They belong in docs/development.md, which the README links (friction 10)."""
    import re

    from helpers import REPO

    tests = (REPO / "README.md").read_text().split("\n## Tests\n", 1)[1].split("\n## ", 1)[0]
    assert not re.findall(r"\b\d+(?:-\d+)? s\b", tests), tests
    assert "docs/development.md#the-tests" in tests
    assert "1,606 passed" in (REPO / "docs" / "development.md").read_text()
