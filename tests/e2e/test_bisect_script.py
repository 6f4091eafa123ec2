"""`bisect --script CMD` is judged as a probe: probes/script.py runs CMD where the build is
installed, `execute` turns what happened into a run (the one place that does), the rule reads it.

Real parts: the venv backend (and, behind the docker marker, the docker backend on the real engine)
installing stand-in torch wheels, probes/script.py, execute, the Bisector and SQLite.
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pytest
from helpers import fake_torch_wheel

from torchbisect.backends import BackendOptions, choose_backend
from torchbisect.bisect.candidates import build_release_candidates
from torchbisect.bisect.driver import Bisector
from torchbisect.bisect.verdicts import Rule, ScriptAborted, check_script_run
from torchbisect.index.choose import Chooser
from torchbisect.index.fetch import fetch_wheels
from torchbisect.model import Cell, Channel, RunStatus, Verdict
from torchbisect.outcome import Direction, Outcome
from torchbisect.run import execute
from torchbisect.store.db import Store

pytestmark = pytest.mark.skipif(shutil.which("uv") is None, reason="uv is not installed")
PY = f"{sys.version_info.major}.{sys.version_info.minor}"
VERSION = "2.10.0.dev20250801+cpu"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    return fake_torch_wheel(tmp_path_factory.mktemp("wheels"), VERSION, git_version="abc123")


def run_script(command: str, wheel: Path, tmp_path: Path, timeout: float = 60):
    rule = Rule(script=command)
    cell = Cell(
        id="nightly-20250801-cpu-test",
        channel=Channel.NIGHTLY,
        version=VERSION,
        cuda="cpu",
        python=PY,
        url=str(wheel),
        date="2025-08-01",
        probe=rule.probe_name,
        env=rule.env,
        timeout=timeout,
    )
    backend = choose_backend("venv", BackendOptions(workdir=tmp_path / "work"), say=lambda _: None)
    run = execute.run_cell(backend, cell, gpu=None, logs_dir=tmp_path / "logs")
    return rule, run


@pytest.mark.parametrize(
    ("command", "outcome"),
    [
        ("exit 0", Outcome.GOOD),
        ("exit 1", Outcome.BAD),
        ("exit 2", Outcome.BAD),
        ("exit 125", Outcome.UNKNOWN),
        ("exit 126", Outcome.BAD),
        ("exit 127", Outcome.BAD),
    ],
)
def test_git_bisect_run_exit_statuses(command, outcome, wheel, tmp_path):
    rule, run = run_script(command, wheel, tmp_path)
    assert run.status is RunStatus.OK, run.reason
    check_script_run(run, rule)  # does not stop the bisection
    judged = rule.judge(run)
    assert judged.verdict is outcome
    assert judged.git_version == "abc123"
    assert run.probe_version.startswith("1+") and run.cell.probe.startswith("script:")


@pytest.mark.parametrize(
    ("command", "message"),
    [
        ("exit 200", r"exited with status 200 \(above 127\)"),
        ("kill -9 $$", r"killed by signal SIGKILL \(9\)"),
    ],
)
def test_statuses_that_stop_the_bisection(command, message, wheel, tmp_path):
    rule, run = run_script(command, wheel, tmp_path)
    with pytest.raises(ScriptAborted, match=message):
        check_script_run(run, rule)


@pytest.mark.slow
def test_a_script_that_hangs_is_stopped_before_the_timeout_with_the_verdict_timeout(
    wheel, tmp_path
):
    """The build was probed and did not answer in time: a verdict (`timeout`, read as unknown),
    not an infrastructure failure that says the build was not probed.  What the script started
    is stopped with it."""
    pids = tmp_path / "pids"
    rule, run = run_script(
        f"echo waiting; sleep 600 & echo $! > {pids}; wait", wheel, tmp_path, timeout=4
    )
    assert run.status is RunStatus.OK, run.reason
    case = run.result.case("script")
    assert case.verdict is Verdict.TIMEOUT
    assert re.fullmatch(
        r"waiting \(still running after [34] s, stopped \(timeout 4 s\)\)", case.detail
    )
    assert rule.judge(run).verdict is Outcome.UNKNOWN
    stat = Path(f"/proc/{pids.read_text().strip()}/stat")  # the sleep it started is gone too
    assert not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] == "Z"


def test_what_a_script_leaves_running_ends_with_it_even_without_torchbisects_mark(wheel, tmp_path):
    """The script runs in a process group of its own: a daemon it left behind, started with an
    empty environment (so torchbisect's mark on its processes is gone), is ended with it."""
    pids = tmp_path / "pids"
    rule, run = run_script(f"env -i /bin/sleep 600 & echo $! > {pids}; exit 0", wheel, tmp_path)
    assert rule.judge(run).verdict is Outcome.GOOD
    stat = Path(f"/proc/{pids.read_text().strip()}/stat")
    assert not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] == "Z"


def test_the_script_runs_with_the_build_first_on_path(wheel, tmp_path):
    seen = tmp_path / "seen.txt"
    rule, run = run_script(
        f'echo "$TORCHBISECT_DATE $TORCHBISECT_TORCH_VERSION '
        f'$TORCHBISECT_PYTHON $(command -v python)" > {seen}',
        wheel,
        tmp_path,
    )
    assert rule.judge(run).verdict is Outcome.GOOD
    day, version, python, first = seen.read_text().split()
    assert (day, version) == ("2025-08-01", VERSION)
    assert python.startswith(str(tmp_path / "work")) and first == python


def release_bisection(tmp_path: Path, backend, *, script: str, image: str | None = None):
    folder = tmp_path / "index"
    for minor in range(9, 15):
        fake_torch_wheel(folder, f"2.{minor}.0+cpu", git_version=f"{minor:040x}")
    rule = Rule(script=script)
    template = Cell(
        id="",
        channel=Channel.STABLE,
        version="",
        cuda="cpu",
        python=PY,
        probe=rule.probe_name,
        timeout=300,
        base_image=image,
    )
    builds = Chooser().builds(fetch_wheels(str(folder)), cuda="cpu", python=PY)
    cands = build_release_candidates(
        builds,
        older="2.9.0",
        newer="2.14.0",
        older_flag="--good",
        newer_flag="--bad",
        cell_template=template,
    )
    with Store(tmp_path / "results.sqlite") as store:
        b = Bisector(
            backend=backend,
            store=store,
            rule=rule,
            direction=Direction.REGRESSION,
            logs=tmp_path / "logs",
        )
        result = b.search(cands)
        stored = store.runs()
    return [c.version for c in cands.candidates], result, stored


DECIDE = (
    "python -c \"import sys, torch; v = tuple(map(int, torch.__version__.split('.')[:2])); "
    'sys.exit(1 if v >= (2, 12) else 0)"'
)


def test_a_script_that_asks_to_stop_leaves_nothing_stored(tmp_path):
    backend = choose_backend("venv", BackendOptions(workdir=tmp_path / "work"), say=lambda _: None)
    with pytest.raises(ScriptAborted):
        release_bisection(tmp_path, backend, script="exit 200")
    with Store(tmp_path / "results.sqlite") as store:
        assert store.runs() == []


@pytest.mark.docker
@pytest.mark.slow
def test_a_script_bisects_with_the_docker_backend(tmp_path):
    """The script runs inside each build's container: the image's python, the build's torch."""
    backend = choose_backend(
        "docker", BackendOptions(workdir=tmp_path / "work"), say=lambda _: None
    )
    image = "torchbisect/base:bookworm"
    (tmp_path / "host-only").touch()  # not mounted: seen from the host, the bisection stops
    in_container = f"test -e {tmp_path / 'host-only'} && exit 200; {DECIDE}"
    versions, result, stored = release_bisection(
        tmp_path, backend, script=in_container, image=image
    )
    assert (versions[result.last_good], versions[result.first_bad]) == ("2.11.0+cpu", "2.12.0+cpu")
    assert stored and all(r.backend == "docker" and r.status is RunStatus.OK for r in stored)
