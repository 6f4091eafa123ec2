"""A command's needs (a GPU, the paths it locks, a plan) are declared by its own module as
`NEEDS`, and main's gates follow that declaration: no list of other commands' needs is kept
beside the command line's machinery."""

from __future__ import annotations

import importlib

import pytest
from helpers.cli import call, one_sentence

from torchbisect.cli import COMMANDS, _parser
from torchbisect.cli.options import ALWAYS, Needs
from torchbisect.exits import Exit


def _flags(command: str) -> set[str]:
    own = _parser(command)[1]
    assert own is not None
    return {o for action in own._actions for o in action.option_strings}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_each_commands_gate_flags_are_those_its_module_declares(command):
    needs = getattr(importlib.import_module(f"torchbisect.commands.{command}"), "NEEDS", Needs())
    flags = _flags(command)
    assert ("--require-gpu" in flags) == (needs.gpu is not None)
    assert ("--wait" in flags) == bool(needs.holds)
    assert set(needs.holds) <= {"store", "workdir", "out"}


def test_the_gpu_runs_and_the_locks_are_where_the_issue_says():
    """matrix, probe and bisect probe on a GPU and lock their store and work folder; merge locks
    the store it writes; plan, matrix and probe plan from --matrix."""
    needs = {
        c: getattr(importlib.import_module(f"torchbisect.commands.{c}"), "NEEDS", Needs())
        for c in COMMANDS
    }
    assert {c for c, n in needs.items() if n.gpu is not None} == {"matrix", "probe", "bisect"}
    assert {c: n.holds for c, n in needs.items() if n.holds} == {
        "matrix": ("store", "workdir"),
        "probe": ("store", "workdir"),
        "bisect": ("store", "workdir"),
        "merge": ("out",),
    }
    assert {c for c, n in needs.items() if n.plans is not None} == {"plan", "matrix", "probe"}


def test_a_need_declared_in_a_module_is_what_main_applies(monkeypatch, tmp_path, capsys):
    """Declare a GPU need on `report` and main requires a GPU of it (exit 3 without one)."""
    monkeypatch.setattr("torchbisect.commands.report.NEEDS", Needs(gpu=ALWAYS), raising=False)
    monkeypatch.setattr("torchbisect.utils.gpus.list_gpus", lambda: [])
    monkeypatch.chdir(tmp_path)
    status = call("report", "--require-gpu")
    said = one_sentence(capsys.readouterr().err, status, Exit.NO_VERDICT, command="report")
    assert "no GPU is visible" in said
