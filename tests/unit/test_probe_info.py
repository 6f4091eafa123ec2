"""Any reproducer is a probe: what a probe's file says it is (probe/info.py, read without importing
it), how a build runs it (probe/scripts.py's `snapshot`), and the adapter, probes/script.py, that
turns a plain `git bisect run` script's exit status and last line into a document of one case.

The adapter runs here as every backend runs it: the interpreter runs probes/script.py, which runs
the probe with that same interpreter; a stand-in `torch` package on PYTHONPATH plays the build.
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import REPO
from helpers.py38 import runtime_typing_errors

from torchbisect.errors import ConfigError
from torchbisect.model import ProbeResult, Verdict
from torchbisect.probe import document
from torchbisect.probe.info import ProbeOutput, read_info
from torchbisect.probe.scripts import default_probe, probe_path, probe_version, snapshot

ADAPTER = REPO / "probes" / "script.py"
CUMSUM = REPO / "probes" / "cumsum_64bit.py"


# --- info.py: what the file says ------------------------------------------------------------------


def test_the_cumsum_probe_says_what_it_is():
    info = read_info(CUMSUM)
    assert info.name == "cumsum_64bit" and info.output is ProbeOutput.EXIT_STATUS
    assert info.title.startswith("torch.cumsum over the last dimension is silently wrong")
    assert info.description.startswith("A scan over the innermost dimension")
    assert info.upstream_issue == "https://github.com/pytorch/pytorch/issues/143486"
    assert info.fix_pr == "https://github.com/pytorch/pytorch/pull/143696"
    assert info.workaround.startswith("Scan in pieces")
    assert info.label("cumsum_64bit").startswith("cumsum over the last dim")
    assert info.version.startswith("1+") and len(info.version) == len("1+") + 12


def test_the_default_probe_is_a_document_probe():
    info = read_info(REPO / "probes" / "stale_replay.py")
    assert info.output is ProbeOutput.DOCUMENT and info.declared_version != "0"


@pytest.mark.parametrize(
    ("source", "output", "version"),
    [
        ('"""t"""\nPROBE_VERSION = "3"\n', ProbeOutput.DOCUMENT, "3"),
        ('"""t"""\nimport sys\nsys.exit(0)\n', ProbeOutput.EXIT_STATUS, "0"),
        ('PROBE_VERSION = "2"\nPROBE_OUTPUT = "exit_status"\n', ProbeOutput.EXIT_STATUS, "2"),
        ('PROBE_OUTPUT = "document"\n', ProbeOutput.DOCUMENT, "0"),
    ],
)
def test_what_kind_of_probe_a_file_is(tmp_path, source, output, version):
    path = tmp_path / "p.py"
    path.write_text(source)
    info = read_info(path)
    assert (info.output, info.declared_version) == (output, version)


def test_title_and_description_follow_pep_257(tmp_path):
    path = tmp_path / "my_bug.py"
    path.write_text(
        '"""Matmul is wrong on bf16\n\nThe kernel rounds twice.\nOnly on sm90.\n\n'
        'More text."""\nREQUIRES_API = "torch.compile"\n'
        'CASE_LABELS = {"my_bug": "bf16 matmul"}\n'
    )
    info = read_info(path)
    assert (info.title, info.description) == (
        "Matmul is wrong on bf16",
        "The kernel rounds twice. Only on sm90.",
    )
    assert info.requires_api == "torch.compile" and info.label("my_bug") == "bf16 matmul"
    path.write_text("import sys\n")
    assert read_info(path).title == "my bug"  # no docstring: the file's name


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("def broken(:\n", r"p\.py:1: the probe is not a Python file"),
        ('"""t"""\n\nFIX_PR = 143696\n', r"p\.py:3: FIX_PR must be a string literal"),
        ('CASE_LABELS = {"a": 1}\n', r"p\.py:1: CASE_LABELS must be a dict of strings"),
        ('PROBE_OUTPUT = "json"\n', r"PROBE_OUTPUT is 'json'; it must be one of"),
        # what only the probe knows about its cases, type-checked as the rest
        ('"""t"""\nBISECT_CASE = ["a"]\n', r"p\.py:2: BISECT_CASE must be a string literal"),
        ('NEEDS_GPU = "yes"\n', r"p\.py:1: NEEDS_GPU must be True or False literal"),
        (
            'TRIAL_CASES = {"race": 0}\n',
            r"p\.py:1: TRIAL_CASES must be a dict of case names to "
            r"whole numbers of at least 1 literal",
        ),
        ('TRIAL_CASES = {"race": True}\n', r"p\.py:1: TRIAL_CASES must be a dict of case names"),
        ('TRIAL_CASES = ["race"]\n', r"p\.py:1: TRIAL_CASES must be a dict of case names"),
        (
            'WORKAROUND_COST = {"adds_to": "a step"}\n',
            r"p\.py:1: WORKAROUND_COST gives no key; "
            r"it takes 'key', 'adds_to' \(key needed\)",
        ),
        (
            'VARIANTS = {"key": "v", "affected": "bad", "colour": "red"}\n',
            r"p\.py:1: VARIANTS has unknown key\(s\) 'colour'; it takes 'key', 'affected', 'unit'",
        ),
        (
            'VARIANTS = {"key": "v", "affected": 1}\n',
            r"p\.py:1: VARIANTS must be a dict of strings",
        ),
        # a misspelt case would leave every bisection without a verdict: said at once
        (
            'CASE_LABELS = {"grows": "g"}\nBISECT_CASE = "grow"\n',
            r"p\.py:2: BISECT_CASE names "
            r"'grow', which is not among the cases CASE_LABELS and CONTROLS name \(grows\)",
        ),
        (
            'CASE_LABELS = {"grows": "g"}\nCONTROLS = {"ctl": "not_affected"}\n\n'
            'TRIAL_CASES = {"grows": 2, "race": 1}\n',
            r"p\.py:4: TRIAL_CASES names 'race'",
        ),
    ],
)
def test_a_bad_literal_is_one_sentence_naming_file_and_line(tmp_path, source, message):
    path = tmp_path / "p.py"
    path.write_text(source)
    with pytest.raises(ConfigError, match=message):
        read_info(path)


def test_what_only_the_probe_knows_is_read_from_its_file(tmp_path):
    path = tmp_path / "leak.py"
    path.write_text(
        '"""A leak"""\nPROBE_VERSION = "1"\nCASE_LABELS = {"warmup": "w", '
        '"grows": "g"}\nBISECT_CASE = "grows"\nTRIAL_CASES = {"grows": 3}\n'
        'NEEDS_GPU = False\nVARIANTS = {"key": "sizes", "affected": "leaked"}\n'
        'WORKAROUND_COST = {"key": "empty_cache_ms", "adds_to": "each step"}\n'
    )
    info = read_info(path)
    assert (info.deciding_case, info.trial_cases, info.needs_gpu) == ("grows", {"grows": 3}, False)
    assert info.variants == {"key": "sizes", "affected": "leaked"}
    assert info.workaround_cost == {"key": "empty_cache_ms", "adds_to": "each step"}
    path.write_text('"""A leak"""\nPROBE_VERSION = "1"\nCASE_LABELS = {"warmup": "w"}\n')
    assert read_info(path).deciding_case == "warmup"  # undeclared: the first case it labels
    assert read_info(path).needs_gpu is False and read_info(CUMSUM).deciding_case == "cumsum_64bit"
    assert read_info(CUMSUM).needs_gpu is True


# --- scripts.py: one reader, and how a build runs a probe -----------------------------------------


def test_the_fingerprint_is_the_files_own(fake_probes, tmp_path):
    folder = fake_probes(tmp_path / "probes")
    folder.mkdir()
    (folder / "mine.py").write_text('PROBE_VERSION = "7"\nimport sys\nsys.exit(1)\n')
    assert probe_version("mine") == read_info(folder / "mine.py").version
    assert probe_version("mine").startswith("7+")


def test_an_exit_status_probe_runs_through_the_adapter(fake_probes, tmp_path):
    folder = fake_probes(tmp_path / "probes")
    folder.mkdir()
    (folder / "mine.py").write_text('REQUIRES_API = "torch.special.zeta"\n')
    how = snapshot("mine", tmp_path / "run").launch  # copies, in the run's own folder
    run = tmp_path / "run"
    assert how.script == run / "script.py" and how.probe == run / "mine.py"
    assert how.probe.read_bytes() == (folder / "mine.py").read_bytes()
    assert how.argv("py", ["--trials", "3"], "out.json", where=lambda p: f"/probes/{p.name}") == [
        "py",
        "/probes/script.py",
        "--probe",
        "/probes/mine.py",
        "--case",
        "mine",
        "--requires-api",
        "torch.special.zeta",
        "--trials",
        "3",
        "--json",
        "out.json",
    ]


def test_a_probe_gone_or_broken_when_its_cell_runs_fails_that_run_only(fake_probes, tmp_path):
    """The plan read the file before any work; what became of it since is the cell's failure
    (InfraError, stored with its reason), never a mistake that stops the whole run."""
    from torchbisect.errors import InfraError

    folder = fake_probes(tmp_path / "probes")
    folder.mkdir()
    probe = folder / "mine.py"
    probe.write_text("import sys\nsys.exit(1\n")  # no longer parses
    with pytest.raises(InfraError, match=r"the probe 'mine' cannot be run: .*mine.py:2"):
        snapshot("mine", tmp_path / "run1")
    probe.unlink()
    with pytest.raises(InfraError, match=r"the probe 'mine' cannot be run: .*not found"):
        snapshot("mine", tmp_path / "run2")


def test_the_copy_is_hashed_as_read_and_the_original_may_change_after(fake_probes, tmp_path):
    folder = fake_probes(tmp_path / "probes")
    folder.mkdir()
    probe = folder / "mine.py"
    probe.write_text("import sys\nsys.exit(1)\n")
    taken = snapshot("mine", tmp_path / "run")
    probe.write_text("import sys\nsys.exit(0)\n")
    assert taken.version == read_info(taken.launch.probe).version != probe_version("mine")
    assert taken.launch.probe.read_text() == "import sys\nsys.exit(1)\n"


def test_a_document_probe_runs_itself(fake_probes, tmp_path):
    how = snapshot("stale_replay", tmp_path / "run").launch  # the stand-in declares PROBE_VERSION
    assert how.probe is None and how.files == (how.script,)
    assert how.argv("py", [], "d.json") == ["py", str(how.script), "--json", "d.json"]


def test_a_folder_holding_only_the_users_script_keeps_the_shipped_default(fake_probes, tmp_path):
    # none named: the shipped stale_replay, whatever the user's folder holds (matrix.yaml's
    # `probe:` names the user's); the shipped one stays found beside it
    folder = fake_probes(tmp_path / "probes")
    folder.mkdir()
    (folder / "cumsum_64bit.py").write_bytes(CUMSUM.read_bytes())
    (folder / "other.py").write_text("import sys\n")
    assert default_probe() == "stale_replay"
    assert probe_path(default_probe()).parent != folder
    assert probe_path("other") == folder / "other.py"


# --- the adapter: a git bisect run exit status as a document --------------------------------------


@pytest.fixture
def build(tmp_path) -> dict[str, str]:
    """The environment of a stand-in build: `import torch` gives version 2.99.0 with no
    `torch.special`."""
    site = tmp_path / "site"
    (site / "torch").mkdir(parents=True)
    (site / "torch" / "__init__.py").write_text(
        '__version__ = "2.99.0+cpu"\nclass version:\n    git_version = "abc123"\n'
    )
    return {**os.environ, "PYTHONPATH": str(site)}


def adapt(tmp_path: Path, env: dict[str, str], body: str, *extra: str) -> tuple[int, dict, str]:
    probe = tmp_path / "my_bug.py"
    probe.write_text(body)
    out = tmp_path / "doc.json"
    done = subprocess.run(
        [sys.executable, str(ADAPTER), "--probe", str(probe), *extra, "--json", str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.returncode, json.loads(out.read_text()), done.stdout


@pytest.mark.parametrize(
    ("status", "verdict", "exit_code"),
    [
        (0, "not_affected", 0),
        (1, "affected", 1),
        (2, "affected", 1),
        (126, "affected", 1),
        (127, "affected", 1),
        (125, "inconclusive", 125),
        (128, "error", 125),
        (200, "error", 125),
    ],
)
def test_git_bisect_run_statuses(tmp_path, build, status, verdict, exit_code):
    code, doc, _ = adapt(tmp_path, build, f"import sys\nprint('saw it')\nsys.exit({status})\n")
    case = doc["cases"]["my_bug"]
    assert (code, doc["verdict"], case["verdict"], case["exit_status"]) == (
        exit_code,
        verdict,
        verdict,
        status,
    )
    assert case["detail"].startswith("saw it (exit ")
    assert doc["env"] == {"torch_version": "2.99.0+cpu", "git_version": "abc123"}
    result = ProbeResult.from_json(document.check_text(json.dumps(doc)))  # torchbisect's gate
    assert result.verdict is Verdict(verdict) and result.verdict.exit_code == code


def test_a_signal_is_an_error(tmp_path, build):
    code, doc, _ = adapt(tmp_path, build, "import os, signal\nos.kill(os.getpid(), 9)\n")
    assert (code, doc["verdict"]) == (125, "error")
    assert doc["cases"]["my_bug"]["detail"] == "killed by signal 9"


def test_the_detail_is_the_last_non_empty_line_and_the_output_goes_on(tmp_path, build):
    body = "import sys\nprint('first')\nsys.stderr.write('the last words\\n')\nprint('  ')\n"
    code, doc, out = adapt(tmp_path, build, body + "sys.exit(1)\n", "--case", "named")
    assert doc["cases"]["named"]["detail"] == "the last words (exit 1)"
    assert "first" in out and "the last words" in out  # the cell's log gets it all


def test_a_missing_api_is_not_applicable_and_the_script_does_not_run(tmp_path, build):
    ran = tmp_path / "ran"
    body = f"open({str(ran)!r}, 'w').close()\n"
    code, doc, _ = adapt(tmp_path, build, body, "--requires-api", "torch.special.zeta")
    assert (code, doc["verdict"]) == (125, "not_applicable") and not ran.exists()
    assert "torch.special.zeta does not exist in this build" in doc["cases"]["my_bug"]["detail"]
    code, doc, _ = adapt(tmp_path, build, body, "--requires-api", "torch.version.git_version")
    assert (code, doc["verdict"]) == (0, "not_affected") and ran.exists()


def test_the_script_runs_with_the_builds_interpreter(tmp_path, build):
    body = "import sys, torch\nprint(sys.executable, torch.__version__)\n"
    _, doc, _ = adapt(tmp_path, build, body)
    assert doc["cases"]["my_bug"]["detail"] == f"{sys.executable} 2.99.0+cpu (exit 0)"


def refused(tmp_path: Path, env: dict[str, str], probe: Path) -> tuple[int, str]:
    """The adapter's status and last line for `probe`; it must write no document (a document
    would be a verdict)."""
    out = tmp_path / "doc.json"
    done = subprocess.run(
        [sys.executable, str(ADAPTER), "--probe", str(probe), "--json", str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert not out.exists(), out.read_text()
    return done.returncode, (done.stdout + done.stderr).strip().splitlines()[-1]


def test_a_probe_file_that_cannot_be_opened_is_no_verdict(tmp_path, build):
    # Python's own "can't open file" is exit 2, which git bisect run reads as affected
    code, said = refused(tmp_path, build, tmp_path / "gone.py")
    assert code == 128 and said.startswith("script.py: the probe gone.py cannot be opened (")


@pytest.mark.parametrize(
    "body",
    [
        "",
        "#!/usr/bin/env python3\n",
        "# only\n\n# comments\n",
        '#!/bin/python\n"""A docstring alone."""\n',
    ],
)
def test_a_probe_holding_no_statement_is_no_verdict(tmp_path, build, body):
    probe = tmp_path / "my_bug.py"
    probe.write_text(body)  # it would exit 0: not affected
    code, said = refused(tmp_path, build, probe)
    assert code == 128 and "the probe my_bug.py holds no statement" in said


def test_a_probe_that_does_not_compile_with_the_builds_python_is_no_verdict(tmp_path, build):
    probe = tmp_path / "my_bug.py"
    probe.write_text("import sys\nif True\n    sys.exit(0)\n")  # Python says exit 1: affected
    code, said = refused(tmp_path, build, probe)
    assert code == 128 and "the probe my_bug.py does not compile with Python" in said
    assert "(line 2)" in said


def test_pythons_own_cannot_open_is_no_verdict_but_a_scripts_exit_2_is_affected():
    """The file may still go between the adapter's check and the interpreter's open: Python's
    own refusal (exit 2, "can't open file" naming it) is then no verdict either."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("adapter", ADAPTER)
    adapter = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(adapter)
    said = "/venv/bin/python: can't open file '/run/my_bug.py': [Errno 2] No such file or directory"
    assert adapter.not_started("/run/my_bug.py", 2, said).startswith(
        "the probe my_bug.py could not be opened when it was started ("
    )
    assert adapter.not_started("/run/my_bug.py", 2, "wrong answer") == ""  # the script's own 2
    assert adapter.not_started("/run/my_bug.py", 1, said) == ""


def test_the_adapter_returns_when_the_script_exits_though_a_daemon_holds_its_output(
    tmp_path, build
):
    pid = tmp_path / "daemon.pid"
    daemon = (
        "import subprocess, sys\n"
        "d = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(20)'], "
        "start_new_session=True)\n"
        f"open({str(pid)!r}, 'w').write(str(d.pid))\n"
        "print('affected: wrong answer')\nsys.exit(1)\n"
    )
    started = time.monotonic()
    try:
        code, doc, _ = adapt(tmp_path, build, daemon)
        assert time.monotonic() - started < 10  # not the daemon's 20 s
    finally:  # torchbisect ends it with the cell's processes (utils/proc.py); here, the test
        with contextlib.suppress(OSError, ValueError):
            os.kill(int(pid.read_text()), signal.SIGKILL)
    assert (code, doc["cases"]["my_bug"]["detail"]) == (1, "affected: wrong answer (exit 1)")


def test_the_cumsum_probe_is_python_3_8_and_cannot_tell_without_torch(tmp_path):
    source = CUMSUM.read_text()
    ast.parse(source, feature_version=(3, 8))
    assert runtime_typing_errors(source) == []
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, "-S", str(CUMSUM)], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 125 and done.stdout.strip().startswith("cannot tell: torch does")


def test_the_adapter_is_python_3_8():
    source = ADAPTER.read_text()
    ast.parse(source, feature_version=(3, 8))
    assert runtime_typing_errors(source) == []


def test_the_docker_backend_mounts_the_adapter_and_the_users_script(fake_probes, tmp_path):
    """A user's folder and torchbisect's adapter are two folders: each file the launch needs is
    mounted on its own under /probes, read-only (no engine needed to see the container asked)."""
    from torchbisect.backends.base import BackendOptions, Prepared
    from torchbisect.backends.container import Exit
    from torchbisect.backends.docker import DockerBackend, _Handle
    from torchbisect.model import Cell, Channel

    folder = fake_probes(tmp_path / "probes")
    folder.mkdir()
    (folder / "my_bug.py").write_text('REQUIRES_API = "torch.special"\n')
    asked = {}

    class Containers:
        def run(self, cell, step, image, command, **kw):
            asked.update(
                command=command,
                mounts=kw["mounts"],
                bytes={
                    m["Target"]: Path(m["Source"]).read_bytes()
                    for m in kw["mounts"]
                    if m["Type"] == "bind"
                },
            )
            return Exit(code=125, oom_killed=False, seconds=0.1, tail="")

    backend = DockerBackend(BackendOptions(workdir=tmp_path / "work", ca_bundle=None))
    backend.containers = Containers()
    cell = Cell(
        id="stable-2.15.0-cu132-cp312",
        channel=Channel.STABLE,
        version="2.15.0",
        cuda="cu132",
        python="3.12",
        probe="my_bug",
    )
    prepared = Prepared(
        cell=cell,
        python="/venv/bin/python",
        wheel_sha256="0" * 64,
        handle=_Handle(image="img", workdir=tmp_path / "cell"),
    )
    backend.probe(prepared, gpu=0, probe_args=[], log=tmp_path / "log")
    assert asked["command"][:7] == [
        "/venv/bin/python",
        "/probes/script.py",
        "--probe",
        "/probes/my_bug.py",
        "--case",
        "my_bug",
        "--requires-api",
    ]
    # the copies this run made in the cell's folder, each file read once (and gone after)
    files, [caches] = (
        [m for m in asked["mounts"] if m["Type"] == "bind"],
        [m for m in asked["mounts"] if m["Type"] == "volume"],
    )
    assert caches["Target"] == "/var/cache/torchbisect-compile"  # the build's compile caches
    assert {
        (Path(m["Source"]).parent.parent, Path(m["Source"]).name, m["Target"], m["ReadOnly"])
        for m in files
    } == {
        ((tmp_path / "cell").resolve(), "script.py", "/probes/script.py", True),
        ((tmp_path / "cell").resolve(), "my_bug.py", "/probes/my_bug.py", True),
    }
    assert asked["bytes"] == {
        "/probes/script.py": ADAPTER.read_bytes(),
        "/probes/my_bug.py": (folder / "my_bug.py").read_bytes(),
    }
    assert not any(Path(m["Source"]).exists() for m in files)


def test_a_probe_of_the_same_name_in_another_folder_is_read_as_itself(tmp_path, monkeypatch):
    # what a probe's file declares is never remembered by its name alone: a TORCHBISECT_PROBES
    # folder's stale_replay.py (a stand-in without controls) must not stand in for ours later
    from torchbisect.probe.document import controls_of
    from torchbisect.probe.scripts import probe_version

    ours, ours_version = controls_of("stale_replay"), probe_version("stale_replay")
    assert ours  # the shipped probe declares its controls
    folder = tmp_path / "probes"
    folder.mkdir()
    (folder / "stale_replay.py").write_text('"""a stand-in"""\nPROBE_VERSION = "9"\n')
    monkeypatch.setenv("TORCHBISECT_PROBES", str(folder))
    assert controls_of("stale_replay") == {} and probe_version("stale_replay").startswith("9+")
    monkeypatch.delenv("TORCHBISECT_PROBES")
    assert controls_of("stale_replay") == ours and probe_version("stale_replay") == ours_version
