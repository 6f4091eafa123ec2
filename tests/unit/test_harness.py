"""The tests' own harness (issue 55.4): a test starts torchbisect through tests/helpers/cli.py only,
never by an argv of its own; it asserts torchbisect's exit statuses by their names in
torchbisect/exits.py, never by number; tests/unit/ refuses the CLI as a child process; no test
file imports another (what two files share lives in tests/helpers/)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import TESTS
from helpers.cli import invoke, starts_the_cli, torchbisect
from helpers.statuses import numbered_statuses

from torchbisect.exits import Exit

# Test files (and conftest.py) of every folder but the harness's own (helpers/), the act
# rehearsal's stand-ins (act/) and the scripts the GPU machine runs (gpu/, no test of this suite);
# this file's samples are the checks' own.
TEST_FILES = sorted(
    p
    for p in TESTS.rglob("*.py")
    if p.relative_to(TESTS).parts[0] not in ("helpers", "act", "gpu")
    and p.resolve() != Path(__file__).resolve()
)


# The numbers beside a status the check reads as torchbisect's that are another program's:
# (file, its line as written): why.
NOT_TORCHBISECTS = {
    (
        "e2e/test_install.py",
        "assert run(check[0], cwd=REPO).returncode in (0, 1, 125)  "
        "# the probe script's own statuses",
    ): "the README's first line runs probes/stale_replay.py itself, whose 0, 1 and 125 are "
    "`git bisect run`'s (probes/README.md); the check takes `run` for the runner of the "
    "installed torchbisect that the file's other test names alike",
    (
        "e2e/test_cli_process.py",
        'assert registered.returncode == 0 and "torchbisect" in '
        "registered.stdout, registered.stderr",
    ): "bash's status: `complete -p` after it evaluated the completion script torchbisect "
    "printed, the script's text being all of the CLI in it",
}


def _hand_built(path) -> list[int]:
    """The lines where a list or tuple of `path` holds "-m", "torchbisect" side by side."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, (ast.List, ast.Tuple)):
            words = [e.value if isinstance(e, ast.Constant) else None for e in node.elts]
            if any(
                a == "-m" and b == "torchbisect" for a, b in zip(words, words[1:], strict=False)
            ):
                found.append(node.lineno)
    return found


def _imported_tests(path) -> list[str]:
    """The test modules (`test_*`, `conftest`) that `path` imports."""
    names = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return [
        n
        for n in names
        if any(part.startswith("test_") or part == "conftest" for part in n.split("."))
    ]


def test_no_test_builds_the_command_line_of_torchbisect_by_hand():
    built = {str(p.relative_to(TESTS)): lines for p in TEST_FILES if (lines := _hand_built(p))}
    assert not built, (
        "run torchbisect through tests/helpers/cli.py (torchbisect(), invoke(), "
        f"call(), command()), not an argv of the test's own: {built}"
    )


def test_no_test_file_imports_another():
    imports = {
        str(p.relative_to(TESTS)): names for p in TEST_FILES if (names := _imported_tests(p))
    }
    assert not imports, f"move what two test files share into tests/helpers/: {imports}"


def _numbered() -> dict[tuple[str, str], int]:
    """(file, line as written): line number, of each status a test file asserts by number."""
    found = {}
    for path in TEST_FILES:
        text = path.read_text()
        lines = text.splitlines()
        for n in numbered_statuses(text):
            found[(str(path.relative_to(TESTS)), lines[n - 1].strip())] = n
    return found


def test_no_test_asserts_an_exit_status_of_torchbisect_by_its_number():
    found = _numbered()
    numbered = {
        f"{name}:{n}": line
        for (name, line), n in found.items()
        if (name, line) not in NOT_TORCHBISECTS
    }
    assert not numbered, (
        "assert torchbisect's exit status by its name in torchbisect/exits.py "
        "(`== Exit.MISTAKE`, not `== 2`); a number that is another program's "
        f"status goes in NOT_TORCHBISECTS, with why: {numbered}"
    )
    gone = NOT_TORCHBISECTS.keys() - found.keys()
    assert not gone, f"NOT_TORCHBISECTS names lines no test file has now: {sorted(gone)}"


STATUSES = """\
import subprocess, sys
import pytest
from helpers.cli import call, command, invoke, one_sentence, torchbisect
from helpers.nightly_world import cli_args
from torchbisect.errors import ConfigError
from torchbisect.exits import Exit

def _run(folder, *argv):
    done = torchbisect(*argv, cwd=folder)
    return done.returncode, done.stderr

def _refused(done):
    assert done.returncode == 2

def test_sample(tmp_path):
    assert call("plan") == 2
    done = invoke("plan", cwd=tmp_path)
    assert done.returncode in (0, 1)
    code, said = _run(tmp_path, "plan")
    assert (code, said) == (3, "")
    one_sentence(said, code, 2)
    _refused(torchbisect("probe"))
    child = subprocess.Popen(command("plan"))
    assert child.wait() != 0
    ran = subprocess.run([*cli_args(tmp_path, "", tmp_path), "--force"])
    assert ran.returncode == 130
    shell = subprocess.run(["bash", "-c", f"{sys.executable} -m torchbisect plan"])
    assert shell.returncode == 0
    with pytest.raises(ConfigError) as caught:
        raise ConfigError("no")
    assert caught.value.exit_code == 2
    for each in [invoke("report"), invoke("merge")]:
        assert each.returncode == 0
    assert done.returncode == Exit.MISTAKE and len(said) == 1 and code != Exit.OK
    git = subprocess.run(["git", "status"])
    assert git.returncode == 0 and len(git.stdout) == 0
    fed = subprocess.run(["wc", "-l"], input=done.stdout)
    assert fed.returncode == 0
    probe = subprocess.run([sys.executable, "probes/stale_replay.py"])
    assert probe.returncode in (0, 1, 125)
    runs = [subprocess.Popen(command("matrix")) for _ in range(2)]
    assert [r.wait() for r in runs] == [0, 0]
    jobs = [subprocess.Popen(["nox"]) for _ in range(2)]
    assert [j.wait() for j in jobs] == [0, 0]
"""


def test_the_status_check_sees_what_it_is_for():
    lines = STATUSES.splitlines()
    found = [lines[n - 1].strip() for n in numbered_statuses(STATUSES)]
    assert found == [
        "assert done.returncode == 2",  # a checker given the CLI's result
        'assert call("plan") == 2',
        "assert done.returncode in (0, 1)",
        'assert (code, said) == (3, "")',  # a runner of the file's own
        "one_sentence(said, code, 2)",
        "assert child.wait() != 0",
        "assert ran.returncode == 130",  # a helper's command line (nightly_world)
        "assert shell.returncode == 0",  # a shell line
        "assert caught.value.exit_code == 2",  # torchbisect's error
        "assert each.returncode == 0",
        "assert [r.wait() for r in runs] == [0, 0]",
    ]


def test_the_checks_see_what_they_are_for(tmp_path):
    sample = tmp_path / "test_sample.py"
    sample.write_text(
        "import sys\nfrom test_other import fixture\nimport conftest\n"
        "ARGV = [sys.executable,\n        '-m', 'torchbisect', 'plan']\n"
        "SAID = 'run python -m torchbisect plan'  # a sentence, no argv\n"
    )
    assert _hand_built(sample) == [4]
    assert _imported_tests(sample) == ["test_other", "conftest"]


@pytest.mark.parametrize(
    ("argv", "cli"),
    [
        ([sys.executable, "-m", "torchbisect", "plan"], True),
        (["bash", "-c", 'exec "$@"', "_", sys.executable, "-m", "torchbisect.__main__"], True),
        (["/venv/bin/torchbisect", "--version"], True),
        ([sys.executable, "-m", "pytest", "--collect-only"], False),
        (["git", "-C", "/tmp/torchbisect", "log"], False),
        ("torchbisect plan", False),  # a shell line: no argv to read
    ],
)
def test_the_guard_knows_the_cli_from_other_programs(argv, cli):
    assert starts_the_cli(argv) is cli


def test_a_unit_test_that_starts_the_cli_as_a_process_fails_and_says_where_it_belongs(tmp_path):
    with pytest.raises(pytest.fail.Exception, match="tests/unit/ runs the CLI in this process"):
        torchbisect("--version", cwd=tmp_path)
    with pytest.raises(pytest.fail.Exception, match="belongs in tests/e2e/ or tests/faults/"):
        subprocess.run([sys.executable, "-m", "torchbisect", "--version"], check=False)
    assert subprocess.run([sys.executable, "-c", "pass"]).returncode == 0  # others still run


def test_invoke_runs_the_cli_here_in_its_folder_and_environment_and_restores_them(tmp_path):
    import os

    here, before = os.getcwd(), dict(os.environ)
    (tmp_path / "m.yaml").write_text("preinstalled: true\n")
    done = invoke(
        "plan",
        "--matrix",
        "m.yaml",
        "--store",
        "none.sqlite",
        "--json",
        "-",
        cwd=tmp_path,
        env_extra={"COLUMNS": "61"},
    )
    assert done.returncode == Exit.OK, done.stderr
    assert '"cells"' in done.stdout and "1 cell" in done.stderr
    assert os.getcwd() == here and dict(os.environ) == before
    done = invoke("plan", "--matrix", "gone.yaml", cwd=tmp_path)
    assert done.returncode == Exit.MISTAKE and "--matrix" in done.stderr
