"""Issue 53.5 and 53.7: what a gate reads when the job is cancelled or nobody reads the output.

A SIGTERM (a cancelled CI job) is status 130 for every command, as its --help promises — `bisect`
died of the signal (-15).  A closed stdout or a pipe whose reader went away is no verdict and no
failure of torchbisect's: the command ends quietly with the status its work gave (`plan` with
stdout closed said 250).  `pages --check` in a clone without the evidence store is one sentence
naming the file (it said 250).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from helpers.cli import env, one_sentence, torchbisect

from torchbisect.exits import Exit
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
            [sys.executable, "-m", "torchbisect", "bisect", "--good", "2.9.0", "--bad", "2.11.0",
             "--cuda", "cu130", "--script", "true", "--store", str(store), "--workdir",
             str(tmp_path / "work"), "--index-url", "http://127.0.0.1:9/", "--no-github",
             "--wait"], cwd=tmp_path, env=env(), stderr=subprocess.PIPE, text=True)
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
