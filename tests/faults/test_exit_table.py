"""Issue 53.7: every row of exits.py's table is given by a real command, for the reason it says.

The table is walked: each status has a trigger here — the command line a user (or a gate) runs,
in a folder of stand-in wheels, a local index and the stand-in probe — and the test asserts that
command gives that status and says why in the words its row uses.  A status added to the table
without a trigger fails `test_every_status_of_the_table_has_a_trigger`.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import FAKE_PROBES, fake_torch_wheel, make_cell, make_run, write_wheel
from helpers.cli import call, command, env, one_sentence, torchbisect
from helpers.nightly_world import FIRST_BAD, SCRIPT, bisect_args

from torchbisect.exits import MEANINGS, Exit
from torchbisect.store.db import Store
from torchbisect.utils import runlock

_UV = shutil.which("uv") or shutil.which("uv", path=os.path.dirname(sys.executable))
needs_uv = pytest.mark.skipif(_UV is None, reason="uv is not installed")


def _tb(folder: Path, *argv: str | Path, **extra: str) -> subprocess.CompletedProcess:
    path = os.pathsep.join(p for p in (os.path.dirname(_UV or ""), os.environ["PATH"]) if p)
    return torchbisect(
        *argv,
        cwd=folder,
        timeout=600,
        env_extra={"TORCHBISECT_PROBES": str(FAKE_PROBES), "PATH": path, **extra},
    )


def _matrix(folder: Path, *, stale: bool | None) -> None:
    """matrix.yaml of one dev build: a stand-in torch that says it is affected (`stale`), not
    affected, or that says nothing (None: the probe cannot tell, as without a GPU)."""
    if stale is None:
        wheel = fake_torch_wheel(folder / "wheels", "2.99.0+cpu")
    else:
        wheel = write_wheel(
            folder / "wheels",
            "2.99.0+cpu",
            {
                "torch/__init__.py": (
                    "from . import version\n__version__ = '2.99.0+cpu'\n"
                    f"STALE_LAZY_CLONE = {stale}\n"
                ),
                "torch/version.py": "__version__ = '2.99.0+cpu'\ngit_version = ''\n",
            },
        )
    (folder / "matrix.yaml").write_text(
        f"defaults:\n  timeout: 120\ndev:\n  - wheel: {wheel}\n    name: k0\n    overlay: true\n"
    )


def _probe(folder: Path, stale: bool | None) -> subprocess.CompletedProcess:
    _matrix(folder, stale=stale)
    return _tb(folder, "probe", "dev-k0", "--backend", "venv", "--allow-no-gpu")


def ok(folder: Path) -> str:
    done = _probe(folder, stale=False)
    assert done.returncode == Exit.OK, done.stderr
    return done.stdout


def affected(folder: Path) -> str:
    done = _probe(folder, stale=True)
    assert done.returncode == Exit.AFFECTED, done.stderr
    return done.stdout


def cannot_tell(folder: Path) -> str:
    done = _probe(folder, stale=None)
    assert done.returncode == Exit.CANNOT_TELL, done.stderr
    return done.stdout


def mistake(folder: Path) -> str:
    done = _tb(folder, "plan", "--matrix", "missing.yaml")
    return one_sentence(done.stderr, done.returncode, Exit.MISTAKE)


def no_verdict(folder: Path) -> str:
    with Store(folder / "shard.sqlite") as store:
        store.add(make_run(make_cell("dev-a")))
    with runlock.hold([folder / "site.sqlite"], command="another merge"):
        done = _tb(folder, "merge", "site.sqlite", "shard.sqlite")
    return one_sentence(done.stderr, done.returncode, Exit.NO_VERDICT)


def index_unreachable(folder: Path) -> str:
    done = _tb(
        folder,
        "bisect",
        "--good",
        "2.9.0",
        "--bad",
        "2.11.0",
        "--cuda",
        "cu130",
        "--script",
        "true",
        "--index-url",
        "http://127.0.0.1:9/",
        "--store",
        "r.sqlite",
        "--workdir",
        "work",
        "--no-github",
    )
    return one_sentence(done.stderr, done.returncode, Exit.INDEX_UNREACHABLE)


def backend_unavailable(folder: Path) -> str:
    _matrix(folder, stale=False)
    done = _tb(
        folder,
        "probe",
        "dev-k0",
        "--backend",
        "docker",
        "--allow-no-gpu",
        DOCKER_HOST=f"unix://{folder}/no-engine.sock",
    )
    return one_sentence(done.stderr, done.returncode, Exit.BACKEND_UNAVAILABLE)


def out_of_date(folder: Path) -> str:
    assert _tb(folder, "schema", "--out", "matrix.schema.json").returncode == Exit.OK
    (folder / "results.schema.json").write_text("{}\n")
    done = _tb(folder, "schema", "--out", "matrix.schema.json", "--check")
    assert done.returncode == Exit.OUT_OF_DATE, done.stdout + done.stderr
    return done.stdout


def interrupted(folder: Path) -> str:
    with runlock.hold([folder / "r.sqlite"], command="another bisection"):
        waiting = subprocess.Popen(
            command(
                "bisect",
                "--good",
                "2.9.0",
                "--bad",
                "2.11.0",
                "--cuda",
                "cu130",
                "--script",
                "true",
                "--store",
                "r.sqlite",
                "--workdir",
                "work",
                "--no-github",
                "--wait",
            ),
            cwd=folder,
            env=env(),
            stderr=subprocess.PIPE,
            text=True,
        )
        assert waiting.stderr is not None
        assert "waiting for" in waiting.stderr.readline()
        waiting.send_signal(signal.SIGTERM)
        said = waiting.stderr.read()
        assert waiting.wait(60) == Exit.INTERRUPTED, said
    return said


def failed(folder: Path) -> str:
    """A bug anywhere (here: the command's own code raising) is torchbisect's failure."""
    import torchbisect.commands.init as command

    def broken(args: object) -> int:
        raise RuntimeError("a bug")

    real, command.run = command.run, broken
    try:  # in `folder`: the test changed into it
        status = call("init")
    finally:
        command.run = real
    assert status == Exit.FAILED
    return "torchbisect itself failed"


# -- the four statuses only a bisection gives: the stand-in nightlies of nightly_world ---------


def _bisect(world, folder: Path, script: str, *extra: str) -> subprocess.CompletedProcess:
    base, _, url = world
    return torchbisect(
        *bisect_args(base, url, folder, "--script", script), *extra, cwd=folder, timeout=600
    )


def flaky(world, folder: Path) -> str:
    # good, then bad, for the same build: the second asking of every verdict disagrees
    flip = folder / "asked"
    script = f"if [ -e {flip}-$TORCHBISECT_DATE ]; then exit 1; fi; touch {flip}-$TORCHBISECT_DATE"
    done = _bisect(world, folder, script)
    assert done.returncode == Exit.FLAKY, done.stderr
    return done.stderr


def not_exact(world, folder: Path) -> str:
    skip = f'[ "$TORCHBISECT_DATE" = 2025-08-13 ] && exit 125; {SCRIPT}'
    done = _bisect(world, folder, skip, "--repeat", "1")
    assert done.returncode == Exit.NOT_EXACT, done.stderr
    assert FIRST_BAD in done.stdout
    return done.stdout


def aborted(world, folder: Path) -> str:
    done = _bisect(world, folder, "exit 200", "--repeat", "1")
    assert done.returncode == Exit.ABORTED, done.stderr
    return done.stdout + done.stderr


def end_unjudged(world, folder: Path) -> str:
    skip = f'[ "$TORCHBISECT_DATE" = 2025-08-01 ] && exit 125; {SCRIPT}'
    done = _bisect(world, folder, skip, "--repeat", "1")
    assert done.returncode == Exit.END_UNJUDGED, done.stderr
    return done.stdout + done.stderr


PLAIN: dict[Exit, Callable[[Path], str]] = {
    Exit.OK: ok,
    Exit.AFFECTED: affected,
    Exit.MISTAKE: mistake,
    Exit.NO_VERDICT: no_verdict,
    Exit.INDEX_UNREACHABLE: index_unreachable,
    Exit.BACKEND_UNAVAILABLE: backend_unavailable,
    Exit.OUT_OF_DATE: out_of_date,
    Exit.CANNOT_TELL: cannot_tell,
    Exit.INTERRUPTED: interrupted,
    Exit.FAILED: failed,
}
BISECTING: dict[Exit, Callable[..., str]] = {
    Exit.FLAKY: flaky,
    Exit.NOT_EXACT: not_exact,
    Exit.ABORTED: aborted,
    Exit.END_UNJUDGED: end_unjudged,
}
# what each trigger's output says, in the words of its row of the table
SAID = {
    Exit.OK: "dev-k0: not_affected",
    Exit.AFFECTED: "dev-k0: affected",
    Exit.MISTAKE: "missing.yaml",
    Exit.NO_VERDICT: "is in use by",
    Exit.INDEX_UNREACHABLE: "127.0.0.1:9",
    Exit.BACKEND_UNAVAILABLE: "Docker",
    Exit.OUT_OF_DATE: "out of date",
    Exit.CANNOT_TELL: "dev-k0: skipped",
    Exit.INTERRUPTED: "interrupted",
    Exit.FAILED: "itself failed",
    Exit.FLAKY: "--script is flaky",
    Exit.NOT_EXACT: "2025-08-13",
    Exit.ABORTED: "200",
    Exit.END_UNJUDGED: "2025-08-01",
}


def test_every_status_of_the_table_has_a_trigger():
    assert set(PLAIN) | set(BISECTING) == set(Exit) == set(MEANINGS)
    assert not set(PLAIN) & set(BISECTING)
    assert set(SAID) == set(Exit)


@needs_uv
@pytest.mark.slow
@pytest.mark.parametrize("status", list(PLAIN), ids=lambda s: s.name)
def test_each_status_is_given_by_a_real_command(tmp_path, status, monkeypatch):
    monkeypatch.chdir(tmp_path)
    said = PLAIN[status](tmp_path)
    assert SAID[status].lower() in said.lower(), said


@needs_uv
@pytest.mark.slow
@pytest.mark.parametrize("status", list(BISECTING), ids=lambda s: s.name)
def test_each_status_only_a_bisection_gives_is_given_by_one(world, tmp_path, status):
    said = BISECTING[status](world, tmp_path)
    assert SAID[status].lower() in said.lower(), said
