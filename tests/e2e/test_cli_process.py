"""The command as a process of its own, where only a process shows it: a mistake in matrix.yaml is
one line and no traceback from `python -m torchbisect`, `--json -` is a real pipe, and the shell
completes what torchbisect knows (argcomplete answers from a process it then ends).  Moved from
tests/unit/, which runs the CLI in-process only."""

from __future__ import annotations

import subprocess
import sys

from helpers import TESTS
from helpers.bad_matrices import expected_error
from helpers.cli import command, env, torchbisect

from torchbisect.exits import Exit

DATA = TESTS / "data" / "matrix"


def test_the_real_command_prints_one_line_and_no_traceback(repo):
    for path in (DATA / "bad" / "step_not_number.yaml", DATA / "bad" / "yaml_syntax.yaml"):
        proc = torchbisect("plan", "--matrix", path, cwd=repo)
        assert proc.returncode == Exit.MISTAKE and proc.stdout == ""
        assert proc.stderr.splitlines() == [f"torchbisect plan: error: {expected_error(path)}"]


def test_plan_json_dash_is_a_real_pipe_and_writes_no_file(tmp_path):
    (tmp_path / "matrix.yaml").write_text("preinstalled: true\n")
    plan = subprocess.Popen(
        command("plan", "--json", "-"),
        cwd=tmp_path,
        env=env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    reader = subprocess.run(
        [sys.executable, "-c", "import json, sys; print(sorted(json.load(sys.stdin)))"],
        stdin=plan.stdout,
        capture_output=True,
        text=True,
    )
    plan.stdout.close()
    assert plan.wait() == Exit.OK, plan.stderr.read().decode()
    assert reader.returncode == 0, reader.stderr
    assert "cells" in reader.stdout
    assert "1 cell" in plan.stderr.read().decode()  # the plan's own lines went to stderr
    assert not (tmp_path / "-").exists()


def test_completion_prints_shell_code_and_completes_commands_and_flags(tmp_path):
    code = torchbisect("completion", "bash", check=True).stdout
    assert "complete " in code and "torchbisect" in code
    registered = subprocess.run(
        ["bash", "-c", 'eval "$1" && complete -p torchbisect', "-", code],
        capture_output=True,
        text=True,
    )
    assert registered.returncode == 0 and "torchbisect" in registered.stdout, registered.stderr

    def complete(line: str) -> list[str]:
        answer = tmp_path / "completions"
        torchbisect(
            cwd=tmp_path,
            check=True,
            env_extra={
                "_ARGCOMPLETE": "1",
                "_ARGCOMPLETE_IFS": "\n",
                "_ARGCOMPLETE_STDOUT_FILENAME": str(answer),
                "COMP_LINE": line,
                "COMP_POINT": str(len(line)),
            },
        )
        return [word.strip() for word in answer.read_text().split("\n")]

    assert "plan" in complete("torchbisect pl")
    assert "--shards" in complete("torchbisect plan --sha")
    assert "--backend" in complete("torchbisect matrix --back")
