"""One table of exit statuses (torchbisect/exits.py): every status means one thing, and the catcher,
every `--help`, the README and docs/running.md say the same of each."""

from __future__ import annotations

import ast
import re

import pytest
from helpers import REPO
from helpers.cli import call

from torchbisect import cli
from torchbisect.bisect.telling import EndUnjudged
from torchbisect.bisect.verdicts import FlakyScript, ScriptAborted
from torchbisect.exits import MEANINGS, Exit, markdown, statuses

SRC = REPO / "src" / "torchbisect"


def _table(path) -> str:
    found = re.search(r"^\| status \| meaning \|\n(?:\|.*\|\n?)+", path.read_text(), re.MULTILINE)
    assert found, f"{path} has no table of exit statuses"
    return found.group(0).rstrip("\n")


@pytest.mark.parametrize(("doc", "detail"), [("README.md", False), ("docs/running.md", True)])
def test_the_documented_tables_are_the_one_table(doc, detail):
    assert _table(REPO / doc) == markdown(detail=detail), (
        f"{doc}'s table of exit statuses differs from torchbisect/exits.py; paste "
        f"exits.markdown(detail={detail}) over it"
    )


def test_every_status_has_one_meaning_and_one_is_affected_alone():
    assert len({int(s) for s in Exit}) == len(Exit) == len(MEANINGS)
    assert MEANINGS[Exit.AFFECTED].commands == {"probe", "matrix"}
    assert MEANINGS[Exit.AFFECTED].brief.startswith("affected")


def test_a_bisection_that_stops_is_flaky_or_has_an_unjudged_end_is_never_affected():
    """Issue 48 item 7: all three exited 1 (or 2) before; each has its own status now."""
    codes = [ScriptAborted.exit_code, FlakyScript.exit_code, EndUnjudged.exit_code]
    assert codes == [Exit.ABORTED, Exit.FLAKY, Exit.END_UNJUDGED]
    assert len(set(codes)) == 3 and not set(codes) & {Exit.AFFECTED, Exit.MISTAKE, Exit.NO_VERDICT}


def test_the_commands_a_status_names_are_real_ones():
    named = {c for m in MEANINGS.values() if m.commands for c in m.commands}
    assert named <= set(cli.COMMANDS), named - set(cli.COMMANDS)


def _help(command: str, capsys) -> str:
    assert call(command, "--help") == Exit.OK
    return capsys.readouterr().out.split("exit statuses:\n", 1)[1]


@pytest.mark.parametrize("command", sorted(cli.COMMANDS))
def test_a_commands_help_lists_the_statuses_it_can_give_and_no_other(command, capsys):
    listed = [
        int(line.split()[0])
        for line in _help(command, capsys).splitlines()
        if line[:3].strip().isdigit()
    ]
    assert listed == [int(s) for s in statuses(command)]


def test_init_and_cache_do_not_repeat_the_statuses_of_probe_and_bisect(capsys):
    for command in ("init", "cache", "completion"):
        shown = _help(command, capsys)
        assert "125" not in shown and " bisect" not in shown and "affected" not in shown
        assert shown.startswith("  0    done\n")
    assert "125  probe: cannot tell" in _help("probe", capsys)
    assert "10   bisect: an end of the range could not be judged" in _help("bisect", capsys)


def _int_literal(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) is int


def test_no_status_is_a_bare_number_outside_the_table():
    """`exit_code = 1` in an error class, or `return 3` from a command, is a second table."""
    found = []
    for path in sorted(SRC.rglob("*.py")):
        if path.name == "exits.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            assigned = isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "exit_code" for t in node.targets
            )
            if assigned and _int_literal(node.value):
                found.append(f"{path.relative_to(SRC)}:{node.lineno}")
            returned = isinstance(node, ast.Return) and path.parent.name in ("cli", "commands")
            if returned and _int_literal(node.value) and node.value.value != 0:
                found.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert not found, found


def test_there_is_no_entry_point_outside_the_catcher():
    """`python -m torchbisect` and the `torchbisect` script both reach cli.main through
    __main__.main (which says a Ctrl-C during the import as one); no module of the
    package is a program of its own (report/committed.py had a main() of its own).  A standalone
    script run as a child process (bench/workaround.py in another interpreter, stdlib and torch
    only; pages/chromium.py, the standard library only) is no entry point of torchbisect's."""
    mains = [
        str(p.relative_to(SRC))
        for p in SRC.rglob("*.py")
        if p.name != "__main__.py"
        and re.search(r"^if __name__ == .__main__.:", p.read_text(), re.MULTILINE)
    ]
    assert sorted(mains) == ["bench/workaround.py", "pages/chromium.py"]
    for main in mains:
        assert not [
            m
            for m in re.findall(
                r"^\s*(?:from|import) (\S+)", (SRC / main).read_text(), re.MULTILINE
            )
            if m.startswith(("torchbisect", "."))
        ]
    assert re.search(
        r'^torchbisect = "torchbisect\.__main__:main"$',
        (REPO / "pyproject.toml").read_text(),
        re.MULTILINE,
    )
