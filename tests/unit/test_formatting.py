"""The formatter a contributor runs is the one the lint session checks with.

pre-commit's ruff (`.pre-commit-config.yaml`) and the lint session's (`noxfile.py`) are one
version: two would format the same file two ways, and a commit that pre-commit accepted would
fail `nox -s lint`.  `.git-blame-ignore-revs` names whole commits, as git reads them.
"""

from __future__ import annotations

import re
import subprocess

import pytest
import yaml
from helpers import REPO


def _lint_ruff() -> str:
    pins = re.findall(r'"ruff==([0-9][0-9.]*)"', (REPO / "noxfile.py").read_text())
    assert len(pins) == 1, f"noxfile.py pins ruff {len(pins)} times: {pins}"
    return pins[0]


def test_pre_commit_runs_the_ruff_the_lint_session_pins():
    config = yaml.safe_load((REPO / ".pre-commit-config.yaml").read_text())
    (ruff,) = [r for r in config["repos"] if r["repo"].endswith("/ruff-pre-commit")]
    assert ruff["rev"] == f"v{_lint_ruff()}"
    hooks = {hook["id"]: hook for hook in ruff["hooks"]}
    assert set(hooks) == {"ruff-check", "ruff-format"}
    for hook in hooks.values():  # what the lint session formats, and not the 3.8 probes
        files = re.compile(hook["files"])
        assert files.search("src/torchbisect/cli/__init__.py")
        assert files.search("tests/unit/test_formatting.py")
        assert files.search("noxfile.py")
        assert not files.search("probes/stale_replay.py")


def test_the_lint_session_checks_the_format_of_what_it_lints():
    text = (REPO / "noxfile.py").read_text()
    assert '"ruff", "format", "--check", "src", "tests", "noxfile.py"' in text


def test_blame_ignores_only_whole_commits_of_this_history():
    lines = (REPO / ".git-blame-ignore-revs").read_text().splitlines()
    revs = [line for line in lines if line and not line.startswith("#")]
    assert revs and all(re.fullmatch(r"[0-9a-f]{40}", rev) for rev in revs), revs
    known = subprocess.run(
        ["git", "-C", str(REPO), "cat-file", "--batch-check"],
        input="".join(f"{rev}\n" for rev in revs),
        capture_output=True,
        text=True,
        check=False,
    )
    if known.returncode != 0:
        pytest.skip(f"no git history here: {known.stderr.strip()}")
    for line in known.stdout.splitlines():  # a shallow clone lacks old ones: "missing" then
        assert line.endswith(" missing") or line.split()[1] == "commit", line
