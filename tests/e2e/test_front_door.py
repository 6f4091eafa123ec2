"""What a new user meets first, as issue 49 found it: each friction, as the user runs into it."""

from __future__ import annotations

import re

from helpers.cli import torchbisect

from torchbisect.cli import COMMANDS


def test_the_matrix_that_init_writes_names_only_commands_an_installed_user_has(tmp_path):
    """It told a pip-installed user to run `nox -s plan`, `nox -s matrix` and `nox -s schema`,
    which exist only in a clone (friction 5)."""
    done = torchbisect("init", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    comments = "\n".join(line for line in (tmp_path / "matrix.yaml").read_text().splitlines()
                         if line.lstrip().startswith("#"))
    assert "nox" not in comments
    named = re.findall(r"`torchbisect (\w+)", comments)
    assert named and set(named) <= set(COMMANDS), named
    assert (tmp_path / "matrix.schema.json").is_file()  # what the comment says is beside it
