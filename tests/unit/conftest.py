"""What every unit test may use beyond tests/conftest.py (the OSV schema's `validator`, the
runner kinds' `kinds_world`), and the rule of this folder: a unit test runs the CLI in this
process (helpers.cli.call or invoke), never as a child process; a test that needs the process
itself belongs in tests/e2e/ or tests/faults/."""

from __future__ import annotations

import subprocess

import pytest
from helpers.cli import starts_the_cli
from helpers.osv import validator  # noqa: F401  (a fixture: pytest finds it by its name here)
from helpers.runner_kinds import kinds_world  # noqa: F401  (a fixture, as validator is)

REFUSED = (
    "tests/unit/ runs the CLI in this process: use helpers.cli.invoke() (or call()) "
    "instead of starting {argv}; a test that needs torchbisect as a process of its own "
    "belongs in tests/e2e/ or tests/faults/, through helpers.cli.torchbisect()"
)


@pytest.fixture(autouse=True)
def _cli_in_process(monkeypatch):
    started = subprocess.Popen.__init__

    def refuse_the_cli(self, args, *rest, **kw):
        if starts_the_cli(args):
            pytest.fail(REFUSED.format(argv=" ".join(map(str, args))), pytrace=False)
        started(self, args, *rest, **kw)

    monkeypatch.setattr(subprocess.Popen, "__init__", refuse_the_cli)
