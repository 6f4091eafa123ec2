"""Issue 53.5 and 53.7: what a gate reads when the job is cancelled or nobody reads the output.

A SIGTERM (a cancelled CI job) is status 130 for every command, as its --help promises — `bisect`
died of the signal (-15).  A closed stdout or a pipe whose reader went away is no verdict and no
failure of torchbisect's: the command ends quietly with the status its work gave (`plan` with
stdout closed said 250).  `pages --check` in a clone without the evidence store is one sentence
naming the file (it said 250).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from helpers import fake_torch_wheel, make_cell, make_run
from helpers.cli import command, env, local_matrix, one_sentence, torchbisect

from torchbisect.exits import Exit
from torchbisect.store.db import Store
from torchbisect.utils import runlock


def _until(stream, text: str, seconds: float = 60) -> str:
    seen, deadline = "", time.monotonic() + seconds
    while time.monotonic() < deadline:
        line = stream.readline()
        seen += line
        if text in line or not line:
            return seen
    return seen


def test_bisect_says_130_on_sigterm_as_its_help_promises(tmp_path):
    store = tmp_path / "results.sqlite"
    with runlock.hold([store], command="another bisection"):
        bisect = subprocess.Popen(
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
                store,
                "--workdir",
                tmp_path / "work",
                "--index-url",
                "http://127.0.0.1:9/",
                "--no-github",
                "--wait",
            ),
            cwd=tmp_path,
            env=env(),
            stderr=subprocess.PIPE,
            text=True,
        )
        assert bisect.stderr is not None
        said = _until(bisect.stderr, "waiting for")  # queued behind the held store
        assert "waiting for" in said, said
        bisect.send_signal(signal.SIGTERM)
        rest = bisect.stderr.read()
        status = bisect.wait(60)
    assert status == Exit.INTERRUPTED, f"exit {status}: {said}{rest}"
    assert rest.strip() == "torchbisect bisect: interrupted"
    help_text = torchbisect("bisect", "--help").stdout
    assert "130  interrupted (Ctrl-C, or SIGTERM from a cancelled job)" in help_text


def test_pages_check_without_the_evidence_store_is_one_sentence(tmp_path):
    clone = tmp_path / "clone"
    (clone / "reports" / "evidence").mkdir(parents=True)
    done = torchbisect("pages", "--check", "--repo", clone)
    line = one_sentence(done.stderr, done.returncode, Exit.MISTAKE)
    assert "reports/evidence/results.sqlite" in line and "git checkout" in line, line
    assert not os.listdir(clone / "reports" / "evidence")


# -- output nobody reads ------------------------------------------------------------------------


def _unread(*argv: str | Path, cwd: Path, closed: bool = False) -> subprocess.CompletedProcess:
    """`torchbisect ARGV` writing into a pipe whose reader has gone (`| true` that won the race
    every time), or with stdout closed (`>&-`)."""
    if closed:
        return subprocess.run(
            ["bash", "-c", 'exec "$@" >&-', "_", *command(*argv)],
            cwd=cwd,
            env=env(),
            stderr=subprocess.PIPE,
            text=True,
            timeout=600,
        )
    read, write = os.pipe()
    os.close(read)
    try:
        return torchbisect(*argv, cwd=cwd, stdout=write, stderr=subprocess.PIPE, timeout=600)
    finally:
        os.close(write)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    entries = "".join(
        f"  - wheel: {fake_torch_wheel(tmp_path / 'wheels', f'2.99.{i}+cpu')}\n    name: k{i}\n"
        "    overlay: true\n"
        for i in range(2)
    )
    (tmp_path / "matrix.yaml").write_text(f"defaults:\n  timeout: 120\ndev:\n{entries}")
    with Store(tmp_path / "results.sqlite") as store:
        store.add(make_run(make_cell("dev-a")))
    return tmp_path


@pytest.mark.parametrize("closed", [False, True], ids=["pipe without reader", "stdout closed"])
@pytest.mark.parametrize(
    "argv",
    [
        ("plan", "--matrix", "matrix.yaml"),
        ("report", "--store", "results.sqlite", "--out", "site"),
        ("bisect", "--help"),
    ],
    ids=lambda argv: argv[0],
)
def test_output_nobody_reads_ends_quietly_with_the_status_of_the_work(project, argv, closed):
    done = _unread(*argv, cwd=project, closed=closed)
    assert (done.returncode, done.stderr) == (Exit.OK, ""), done.stderr
    if argv[0] == "report":
        assert (project / "site" / "index.html").is_file()  # the work was done


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full here")
@pytest.mark.parametrize(
    "argv",
    [
        ("report", "--store", "results.sqlite", "--out", "site"),
        ("plan", "--help"),
        ("--version",),
    ],
    ids=lambda argv: argv[0],
)
def test_a_standard_output_that_cannot_be_written_is_named_not_a_folder(project, argv):
    """Into /dev/full (a redirect to a full disk): "a folder torchbisect writes to (its report,
    logs, store …) is full" blamed the folders, which were fine; --help gave 250."""
    with open("/dev/full", "w") as full:
        done = torchbisect(*argv, cwd=project, stdout=full, stderr=subprocess.PIPE, timeout=600)
    line = one_sentence(done.stderr, done.returncode, Exit.NO_VERDICT)
    assert "writing to standard output failed (no space left on device)" in line, line
    if argv[0] == "report":
        assert (project / "site" / "index.html").is_file()  # the page was written first


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("uv") is None, reason="uv is not installed")
def test_matrix_into_a_pipe_without_reader_is_not_affected(project):
    """`torchbisect matrix | true` exited 1, "affected" to a gate, though no cell was."""
    done = _unread(
        *local_matrix(store="shard.sqlite"),
        cwd=project,
    )
    assert done.returncode == Exit.OK, done.stderr
    assert "itself failed" not in done.stderr and "Traceback" not in done.stderr
    with Store(project / "shard.sqlite") as store:
        assert store.count() == 2  # every cell was probed and stored


# -- round 4's leftovers --------------------------------------------------------------------------

ODD = "odd\x1b[31mred\x07.sqlite"


def test_an_odd_store_path_reaches_the_terminal_as_pictures(project):
    """Round 4: a store path holding ESC and BEL still reached the terminal raw from `merge`,
    `report` and `cache`, where any other sentence shows them as ␛ and ␇."""
    shutil.copyfile(project / "results.sqlite", project / ODD)
    said = [
        torchbisect("merge", "merged.sqlite", ODD, cwd=project),
        torchbisect("merge", ODD, "results.sqlite", cwd=project),
        torchbisect("report", "--store", ODD, "--out", f"site-{ODD}", cwd=project),
        torchbisect("cache", "--backend", "venv", "--workdir", f"work-{ODD}", cwd=project),
    ]
    for done in said:
        assert done.returncode == Exit.OK, done.stderr
        text = done.stdout + done.stderr
        assert "\x1b" not in text and "\x07" not in text, text
    assert "odd␛[31mred␇.sqlite: 1 runs added" in said[0].stdout
    assert f"wrote site-odd␛[31mred␇.sqlite{os.sep}index.html" in said[2].stdout


@pytest.mark.parametrize(
    ("escape", "code"), [("\\u200b", "U+200B"), ("\\x07", "U+0007"), ("\\u202e", "U+202E")]
)
@pytest.mark.parametrize("key", ["labels", "gpu"])
def test_an_invisible_character_written_as_a_yaml_escape_is_refused_by_line(
    tmp_path, escape, code, key
):
    """Round 4: the file's text was checked for invisible characters, but `"h200\\u200b"` (an
    escape YAML turns into a zero-width space) became a runner label no one could see."""
    label, gpu = (
        (f'"h200{escape}"', "NVIDIA H200")
        if key == "labels"
        else ("h200", f'"NVIDIA{escape} H200"')
    )
    (tmp_path / "matrix.yaml").write_text("preinstalled: true\n", encoding="utf-8")
    (tmp_path / "runners.yaml").write_text(
        f"kinds:\n  - name: h200\n    gpu: {gpu}\n    platform: linux_x86_64\n"
        f"    labels: [self-hosted, {label}]\n",
        encoding="utf-8",
    )
    done = torchbisect(
        "plan", "--matrix", "matrix.yaml", "--runners", "runners.yaml", "--offline", cwd=tmp_path
    )
    line = one_sentence(done.stderr, done.returncode, Exit.MISTAKE)
    where = 5 if key == "labels" else 3
    assert (
        f"runners.yaml, line {where}: a value holds the invisible or control character "
        f"{code}" in line
    ), line
