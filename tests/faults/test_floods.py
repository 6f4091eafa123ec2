"""E4: a probe that floods its output costs neither torchbisect's memory nor the disk: the log
keeps the first and last 2 MiB and says, with the bound, how much was cut; the cell is judged
from its document as usual."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from helpers import fake_torch_wheel
from helpers.cli import local_matrix

from torchbisect.exits import Exit
from torchbisect.utils import proc

FLOOD_MB = 300
PROBE = f"""
PROBE_OUTPUT = "document"
import argparse, json, sys
parser = argparse.ArgumentParser()
parser.add_argument("--cases"); parser.add_argument("--trials"); parser.add_argument("--json")
args = parser.parse_args()
print("first line of the probe", flush=True)
line = b"x" * 1048575 + b"\\n"
for _ in range({FLOOD_MB}):
    sys.stdout.buffer.write(line)
sys.stdout.flush()
print("last line of the probe", flush=True)
json.dump({{"schema": 1, "probe": "stale_replay", "probe_version": "1", "verdict": "skipped",
           "cases": {{"capture_data_ptr": {{"verdict": "skipped", "detail": "no CUDA"}}}},
           "env": {{"torch_version": "2.99.0+cpu"}}}}, open(args.json, "w"))
sys.exit(125)
"""
# torchbisect's own peak memory, reported by the process itself when it ends
MEASURED = (
    "import sys\nfrom torchbisect.cli import main\ntry:\n    code = main()\nfinally:\n"
    # VmHWM: the peak of this process alone (getrusage's maxrss survives fork and exec,
    # so it would report the test runner's own peak)
    "    hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM')]\n"
    "    print('maxrss_kb', hwm[0].split()[1], file=sys.stderr)\nsys.exit(code)\n"
)


@pytest.mark.slow
def test_a_probe_printing_hundreds_of_megabytes_leaves_a_bounded_log_and_memory(tmp_path):
    (tmp_path / "probes").mkdir()
    (tmp_path / "probes" / "stale_replay.py").write_text(PROBE)
    wheel = fake_torch_wheel(tmp_path / "wheels", "2.99.0+cpu")
    (tmp_path / "matrix.yaml").write_text(
        f"dev:\n  - wheel: {wheel}\n    name: flood\n    overlay: true\n"
    )
    env = {**os.environ, "TORCHBISECT_PROBES": str(tmp_path / "probes")}
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            MEASURED,
            *local_matrix(),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == Exit.OK, done.stderr
    log = tmp_path / "reports" / "logs" / "dev-flood.log"
    assert log.stat().st_size < 3 * proc.KEEP_BYTES  # head + tail + the install's lines
    text = log.read_text()
    assert "first line of the probe" in text and "last line of the probe" in text
    cut = [line for line in text.splitlines() if "bytes of output cut here" in line]
    assert len(cut) == 1 and "first and last 2 MiB" in cut[0]
    assert int(cut[0].split()[2].replace(",", "")) > (FLOOD_MB - 5) * 1048576
    maxrss_mb = int(done.stderr.rsplit("maxrss_kb", 1)[1].split()[0]) / 1024
    assert maxrss_mb < FLOOD_MB / 2, f"torchbisect peaked at {maxrss_mb:.0f} MB"
    assert "skipped" in (tmp_path / "reports" / "summary.md").read_text()


def test_what_is_kept_is_the_head_and_the_tail_with_the_cut_said_once():
    kept = proc.Kept(keep=64)
    for i in range(10_000):
        kept.add(b"line %05d\n" % i)
    text = kept.text()
    assert text.startswith("line 00000\n") and text.endswith("line 09999\n")
    assert text.count("cut here") == 1 and "first and last 64 bytes" in text
    assert len(text) < 64 * 2 + 200
    live = proc.Kept(keep=64)  # a container's log: written as it comes, then the rest
    pieces = []
    for i in range(10_000):
        live.add(b"line %05d\n" % i)
        pieces.append(live.new_lines())
    assert "".join(pieces) + live.rest() == text


def test_data_read_into_a_file_is_whole_and_unmasked_while_messages_stay_bounded(tmp_path):
    """`proc.run(stdout=FILE)` (git log's thousands of commits): the data is the command's own,
    however long, and a token-shaped file name in it stays; its stderr is kept and masked."""
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    code = (
        f"import sys; sys.stdout.write('torch/{token}.py\\0' * 300000); "
        f"sys.stderr.write('warning: {token}\\n')"
    )
    out = tmp_path / "stdout"
    done = proc.run([sys.executable, "-c", code], stdout=out, timeout=120)
    data = out.read_bytes()
    assert len(data) > 2 * proc.KEEP_BYTES and data == f"torch/{token}.py\0".encode() * 300000
    assert done.output.startswith("warning: ") and token not in done.output
