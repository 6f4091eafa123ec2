"""The command line as a user types it: flags are never abbreviated, a mistyped one is answered
by the command's own usage and the nearest real flag, and the checks that need no index come
before any index is asked (`--json -` into a real pipe and the shell's completion need the
command as a process: tests/e2e/test_cli_process.py)."""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path

import pytest
from helpers.cli import call

from torchbisect import cli
from torchbisect.exits import Exit

# an index on a loopback port nobody listens on: a check that came after the network would
# show as exit 4, not 2
UNREACHABLE = "http://127.0.0.1:9/whl/{cuda}/"


def _matrix(tmp_path: Path, body: str = "") -> Path:
    path = tmp_path / "matrix.yaml"
    path.write_text(
        f"indexes:\n  stable: {UNREACHABLE}\n  nightly: {UNREACHABLE}\n"
        f"stable:\n  versions: all from 2.3\nnightly:\n  last: 3\n{body}"
    )
    return path


def test_a_prefix_of_a_flag_is_not_taken_for_it_and_the_real_one_is_named(capsys):
    assert call("plan", "--shard", "1/2") == Exit.MISTAKE
    err = capsys.readouterr().err
    assert err.startswith("usage: torchbisect plan ")
    assert "--shard: did you mean --shards?" in err
    assert call("matrix", "--cell", "stable-*") == Exit.MISTAKE
    assert "did you mean --cells?" in capsys.readouterr().err


def test_a_mistyped_command_is_answered_with_the_nearest_one(capsys):
    assert call("plna") == Exit.MISTAKE
    assert "no command 'plna'; did you mean plan?" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["matrix", "--shard", "3/2"], "argument --shard: expected I/N with 1 <= I <= N"),
        (["matrix", "--shard", "two"], "argument --shard: expected I/N"),
        (
            ["matrix", "--jobs", "0"],
            "argument --jobs: expected a whole number of at least 1, got 0",
        ),
        (["matrix", "--jobs", "-3"], "argument --jobs: expected a whole number of at least 1"),
        (["plan", "--shards", "0"], "argument --shards: expected a whole number of at least 1"),
    ],
)
def test_counts_and_shards_are_refused_before_anything_is_planned(
    argv, said, tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    _matrix(tmp_path)
    assert call(*argv) == Exit.MISTAKE
    assert said in capsys.readouterr().err


def test_a_bad_end_in_the_future_is_refused_without_asking_the_index(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    later = (date.today() + timedelta(days=40)).isoformat()
    assert (
        call(
            "bisect",
            "--bad",
            later,
            "--index-url",
            UNREACHABLE.format(cuda="cu130"),
            "--store",
            str(tmp_path / "s.sqlite"),
            "--workdir",
            str(tmp_path / "w"),
        )
        == Exit.MISTAKE
    )
    assert f"--bad '{later}' is {later}, after today" in capsys.readouterr().err


def test_a_cells_pattern_no_entry_can_match_is_refused_before_the_index(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    matrix = _matrix(tmp_path)
    for pattern in ("stabel-*", f"nightly-{date.today().year + 5}*"):
        assert (
            call(
                "matrix",
                "--matrix",
                str(matrix),
                "--cells",
                pattern,
                "--allow-no-gpu",
                "--store",
                str(tmp_path / "s.sqlite"),
                "--out",
                str(tmp_path / "r"),
            )
            == Exit.MISTAKE
        )
        assert f"--cells: no cell of {matrix} can match {pattern}" in capsys.readouterr().err
    # a CUDA tag or Python no entry builds for too (issue 49, friction 10: `cu999` reached the
    # index and exited 4)
    (tmp_path / "py.yaml").write_text(
        _matrix(tmp_path).read_text().replace("stable:\n", "defaults:\n  python: '3.12'\nstable:\n")
    )
    for pattern, said in (
        ("stable-2.15.0-cu999-*", "the CUDA tag cu999"),
        ("*-cu999-*", "the CUDA tag cu999"),
        ("nightly-*-cp27", "the Python cp27"),
    ):
        assert (
            call(
                "matrix",
                "--matrix",
                str(tmp_path / "py.yaml"),
                "--cells",
                pattern,
                "--allow-no-gpu",
                "--store",
                str(tmp_path / "s.sqlite"),
                "--out",
                str(tmp_path / "r"),
            )
            == Exit.MISTAKE
        )
        assert f"--cells: {pattern} names {said}, which no entry of" in capsys.readouterr().err
    # a pattern an entry can match goes on to the index, which does not answer here
    assert (
        call(
            "matrix",
            "--matrix",
            str(matrix),
            "--cells",
            "stable-2.1*",
            "--allow-no-gpu",
            "--store",
            str(tmp_path / "s.sqlite"),
            "--out",
            str(tmp_path / "r"),
        )
        == Exit.INDEX_UNREACHABLE
    )


@pytest.mark.parametrize("command", ["plan", "matrix", "probe", "bisect", "report", "cache"])
def test_help_shows_examples_and_the_exit_statuses(command, capsys):
    assert call(command, "--help") == Exit.OK
    out = capsys.readouterr().out
    assert f"examples:\n  torchbisect {command}" in out
    assert "exit statuses:" in out and "250  torchbisect itself failed" in out
    assert ("125  probe: cannot tell" in out) == (command in ("probe", "matrix"))
    # the commands that take a probe say where it is found and show one of the user's own
    assert ("probes: NAME.py in probes/ beside matrix.yaml" in out) == (
        command in ("plan", "matrix", "probe", "bisect")
    )
    if command in ("matrix", "probe", "bisect"):
        assert "check" in out.split("examples:", 1)[1]


def test_bisect_help_says_the_ends_may_be_releases(capsys):
    assert call("bisect", "--help") == Exit.OK
    assert "a release such as 2.9.0" in " ".join(capsys.readouterr().out.split())


def _shown_commands() -> list[str]:
    """Every `torchbisect …` line in the code blocks of the README and the manual."""
    from helpers import REPO

    lines = []
    for page in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        text = page.read_text(encoding="utf-8").replace("\\\n", " ")  # continued lines
        for line in text.splitlines():
            if line.startswith("    torchbisect "):
                lines.append(line.strip().split("  #", 1)[0].strip())
    return lines


def test_every_command_the_readme_and_the_manual_show_is_one_torchbisect_accepts():
    import shlex

    shown = _shown_commands()
    assert len(shown) >= 8
    for line in shown:
        argv = shlex.split(line.replace("…", ""))[1:]
        chosen = next(a for a in argv if a in cli.COMMANDS)
        parser, own = cli._parser(chosen)
        args, extras = parser.parse_known_args(argv)
        assert not extras, f"{line}: torchbisect does not know {extras}"
