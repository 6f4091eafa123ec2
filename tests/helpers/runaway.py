"""A project folder whose one cell installs a stand-in torch (venv backend, overlay) and runs a
probe that leaves a daemon behind: `TB_MODE=daemon` answers at once, `hang` never answers.

Every process the run starts inherits `TB_MARK`, so a test can list what is still running with
`proc.holders("TB_MARK", mark)` — even a daemon in a session of its own.
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

from helpers import fake_torch_wheel
from helpers.cli import local_matrix
from torchbisect.utils import proc

PROBE = """
PROBE_OUTPUT = "document"
import argparse, json, os, subprocess, sys, time
parser = argparse.ArgumentParser()
parser.add_argument("--cases", default="capture_data_ptr")
parser.add_argument("--trials")
parser.add_argument("--json")
args = parser.parse_args()
# a daemon in a session of its own that keeps our stdout open for five minutes
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True)
if os.environ.get("TB_STARTED"):  # not passed into containers
    open(os.environ["TB_STARTED"], "a").close()
import signal
if os.environ.get("TB_MODE") == "stubborn":  # deaf to Ctrl-C and SIGTERM
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
else:  # hears Ctrl-C even when the suite was started with SIGINT ignored, which we inherit
    signal.signal(signal.SIGINT, signal.default_int_handler)
if os.environ.get("TB_MODE") in ("hang", "stubborn"):
    time.sleep(300)
doc = {"schema": 1, "probe": "stale_replay", "probe_version": "1", "verdict": "skipped",
       "cases": {"capture_data_ptr": {"verdict": "skipped", "detail": "no CUDA device"}},
       "env": {"torch_version": "2.99.0+cpu"}}
kind = os.environ.get("TB_DOC", "ok")
if kind == "badtypes":
    doc["cases"]["capture_data_ptr"]["stale_trials"] = "x"
if kind == "longdetail":
    doc["cases"]["capture_data_ptr"]["detail"] = "y" * 100000
if kind == "liar":  # says not affected while its only case saw stale data
    doc["verdict"] = "not_affected"
    doc["cases"]["capture_data_ptr"] = {"verdict": "affected", "detail": "stale on 5/5",
                                        "stale_trials": 5, "trials": 5}
with open(args.json, "w") as fh:
    if kind == "nested":  # 400 KB of brackets
        fh.write("[" * 200000 + "]" * 200000)
    elif kind == "huge":  # bigger than any document may be
        fh.write('{"schema": 1, "pad": "' + "z" * 5000000 + '"}')
    else:
        json.dump(doc, fh)
sys.exit(0 if kind == "liar" else 125)  # the liar's exit status agrees with its claim
"""


def project(root: Path, *, timeout: float = 120, cells: int = 1, docs=()) -> list[str]:
    """Write matrix.yaml, the probe and the wheels under `root`; the arguments of `matrix` there
    (for helpers.cli.torchbisect, or helpers.cli.command to start the process).

    `docs[i]` (TB_DOC) picks what cell i's probe writes: ok, badtypes, longdetail, nested, huge,
    liar (a not_affected verdict over an affected case).
    """
    (root / "probes").mkdir(parents=True, exist_ok=True)
    (root / "probes" / "stale_replay.py").write_text(PROBE)
    docs = list(docs) + ["ok"] * (cells - len(docs))
    entries = "".join(
        f"  - wheel: {fake_torch_wheel(root / 'wheels', f'2.99.{i}+cpu')}\n    name: k{i}\n"
        f"    overlay: true\n    env: {{TB_DOC: {docs[i]}}}\n"
        for i in range(cells)
    )
    (root / "matrix.yaml").write_text(f"defaults:\n  timeout: {timeout}\ndev:\n{entries}")
    return [
        *local_matrix(),
        "--no-report",
    ]


def environment(root: Path, mode: str) -> tuple[dict[str, str], str]:
    mark = uuid.uuid4().hex
    env = {
        **os.environ,
        "TORCHBISECT_PROBES": str(root / "probes"),
        "TB_MODE": mode,
        "TB_MARK": mark,
        "TB_STARTED": str(root / "probe-started"),
    }
    return env, mark


def left(mark: str) -> list[int]:
    return proc.holders("TB_MARK", mark)


def wait_until(predicate, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()
