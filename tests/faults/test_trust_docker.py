"""Issue 22 item 8 (trust model) and E2/E4 under the docker backend, on the real engine: a probe in
its container cannot see the result store (nor the report folder), receives no credential of the
host, and a container printing tens of megabytes leaves a log of head and tail."""

from __future__ import annotations

import json
import os

import pytest
from helpers.cli import torchbisect

from torchbisect.exits import Exit
from torchbisect.store.db import Store
from torchbisect.utils import proc

pytestmark = [pytest.mark.docker, pytest.mark.slow]

FLOOD_MB = 40
PROBE = f"""
PROBE_OUTPUT = "document"
import argparse, json, os, sys
parser = argparse.ArgumentParser()
parser.add_argument("--cases"); parser.add_argument("--trials"); parser.add_argument("--json")
args = parser.parse_args()
store, out = os.environ["TB_STORE"], os.environ["TB_OUT"]
seen = {{"store": os.path.exists(store), "store_folder": sorted(os.listdir(os.path.dirname(store)))
        if os.path.isdir(os.path.dirname(store)) else None, "reports": os.path.exists(out),
        "token": os.environ.get("GITHUB_TOKEN"), "aws": os.environ.get("AWS_SECRET_ACCESS_KEY")}}
if seen["store"]:  # what a hostile probe would do: forge a verdict
    import sqlite3
    sqlite3.connect(store).execute("DELETE FROM runs")
print("first line of the probe", flush=True)
line = b"y" * 1048575 + b"\\n"
for _ in range({FLOOD_MB}):
    sys.stdout.buffer.write(line)
sys.stdout.flush()
print("last line of the probe", flush=True)
json.dump({{"schema": 1, "probe": "stale_replay", "probe_version": "1", "verdict": "skipped",
           "cases": {{"capture_data_ptr": {{"verdict": "skipped", "detail": json.dumps(seen)}}}},
           "env": {{"torch_version": "2.13.0+cpu"}}}}, open(args.json, "w"))
sys.exit(125)
"""


def test_a_docker_probe_cannot_reach_the_store_nor_a_credential_and_floods_no_log(tmp_path):
    (tmp_path / "probes").mkdir()
    (tmp_path / "probes" / "stale_replay.py").write_text(PROBE)
    store, out = tmp_path / "results.sqlite", tmp_path / "reports"
    (tmp_path / "matrix.yaml").write_text(
        "defaults:\n  timeout: 300\npreinstalled:\n  image: torchbisect/base:bookworm-torch\n"
        f"  env: {{TB_STORE: '{store}', TB_OUT: '{out}'}}\n"
    )
    env = {
        **os.environ,
        "TORCHBISECT_PROBES": str(tmp_path / "probes"),
        "GITHUB_TOKEN": "ghp_" + "x1" * 18,
        "AWS_SECRET_ACCESS_KEY": "s" * 40,
    }
    done = torchbisect(
        "matrix",
        "--allow-no-gpu",
        "--backend",
        "docker",
        "--store",
        store,
        "--out",
        out,
        "--workdir",
        "work",
        cwd=tmp_path,
        env=env,
        timeout=900,
    )
    assert done.returncode == Exit.OK, done.stderr
    with Store(store, read_only=True) as opened:
        runs = opened.runs()
    assert len(runs) == 1 and runs[0].status.value == "ok", runs  # nothing forged or deleted
    seen = json.loads(runs[0].result.cases[0].detail)
    assert seen["store"] is False and seen["reports"] is False, seen
    assert seen["store_folder"] in (None, ["work"]), seen  # at most the cell's own mount point
    assert seen["token"] is None and seen["aws"] is None, seen
    log = next((out / "logs").glob("preinstalled*.log"))
    assert log.stat().st_size < 3 * proc.KEEP_BYTES
    text = log.read_text()
    assert "first line of the probe" in text and "last line of the probe" in text
    assert text.count("bytes of output cut here") == 1
