"""Time `CI=true bash .ci/run` as CI meets it, and add the figure to .ci/suite.json.

Usage: python3 .ci/time_suite.py [--cold] [--record FILE] [--keep DIR]

What it does, in order:
  1. clones this checkout's HEAD into a new folder (uncommitted changes are not measured: it
     says so), with ../shared copied beside the clone when this checkout has one, as CI's has;
  2. with --cold, first removes what a new machine would not have: every Docker image, container
     and volume (`docker system prune -af --volumes`), uv's, act's and npm's caches;
  3. times a fixed pure-Python loop, so that figures from two machines can be compared;
  4. runs `CI=true bash .ci/run` in the clone, reading the CPU's busy share from /proc/stat every
     5 s and noting when pytest starts and what it ends with;
  5. appends one record to FILE (default .ci/suite.json, beside this script),
     never changing the records already there.  The clone's log is kept in DIR (default: the new
     folder), and its path is printed.

Exit status: that of `.ci/run`; 2 for a bad argument or a checkout it cannot clone.
Standalone: stdlib only, as it runs before anything is installed.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RECORD = Path(__file__).resolve().parent / "suite.json"  # not reports/: no GPU measured it
SUMMARY = re.compile(r"^=+ (?P<result>.*\b(?:passed|failed|error)\b.*) in (?P<took>[\d.]+)s\b")
CACHES = ("~/.cache/uv", "~/.cache/act", "~/.npm/_cacache")
YARDSTICK = 20_000_000  # additions in a pure-Python loop: about 1.2 s on the machines seen


def say(line: str) -> None:
    print(f"time_suite: {line}", flush=True)


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(REPO), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def yardstick() -> float:
    started = time.perf_counter()
    total = 0
    for i in range(YARDSTICK):
        total += i
    return round(time.perf_counter() - started, 2)


def machine() -> dict:
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {"cpu": model, "cores": os.cpu_count(), "memory_gib": round(memory, 1),
            "system": f"{platform.system()} {platform.release()}",
            "yardstick_s": yardstick()}


class Busy(threading.Thread):
    """The share of CPU time not idle, over the whole run, from /proc/stat."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.samples: list[float] = []
        self.stop = threading.Event()

    @staticmethod
    def read() -> tuple[int, int]:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        idle = fields[3] + fields[4]  # idle, iowait
        return sum(fields[:8]) - idle, sum(fields[:8])

    def run(self) -> None:
        busy, total = self.read()
        while not self.stop.wait(5):
            now_busy, now_total = self.read()
            if now_total > total:
                self.samples.append(100 * (now_busy - busy) / (now_total - total))
            busy, total = now_busy, now_total

    def mean(self) -> float | None:
        return round(sum(self.samples) / len(self.samples), 1) if self.samples else None


def make_cold() -> None:
    say("--cold: removing every Docker image, container and volume, and the uv, act and npm "
        "caches")
    if shutil.which("docker") and subprocess.run(["docker", "info"], capture_output=True
                                                 ).returncode == 0:
        subprocess.run(["docker", "system", "prune", "-af", "--volumes"], check=True,
                       stdout=subprocess.DEVNULL)
    for cache in CACHES:
        shutil.rmtree(Path(cache).expanduser(), ignore_errors=True)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="time_suite.py", description=__doc__.split("\n")[0])
    parser.add_argument("--cold", action="store_true",
                        help="first remove Docker's images and volumes and uv/act/npm caches")
    parser.add_argument("--record", type=Path, default=RECORD,
                        help=f"the JSON list the figure is appended to (default {RECORD})")
    parser.add_argument("--keep", type=Path, help="folder for the clone and its log")
    args = parser.parse_args(argv)
    try:
        records = json.loads(args.record.read_text()) if args.record.exists() else []
    except (OSError, ValueError) as e:
        parser.error(f"--record {args.record} is not a JSON list this script wrote ({e})")
    if not isinstance(records, list):
        parser.error(f"--record {args.record} is not a JSON list this script wrote")
    try:
        commit = git("rev-parse", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"time_suite.py: error: {REPO} is not a git checkout it can clone ({e})",
              file=sys.stderr)
        return 2
    if dirty:
        say(f"uncommitted changes are not measured: the clone is of HEAD, {commit[:12]}")
    base = args.keep or Path(tempfile.mkdtemp(prefix="torchbisect-suite."))
    base.mkdir(parents=True, exist_ok=True)
    clone = base / "main"
    if clone.exists():
        parser.error(f"--keep {base} already holds a clone (main/): give an empty folder")
    if args.cold:
        make_cold()
    shared = REPO.parent / "shared"
    if shared.is_dir() and not (base / "shared").exists():
        shutil.copytree(shared, base / "shared", symlinks=True)
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
    facts = machine()
    say(f"{facts['cores']} cores ({facts['cpu']}), the yardstick loop took "
        f"{facts['yardstick_s']} s; running CI=true bash .ci/run in {clone}")
    log_path = base / "ci-run.log"
    busy = Busy()
    started = time.monotonic()
    pytest_started = result = took = None
    busy.start()
    env = {**os.environ, "CI": "true"}
    with log_path.open("w", buffering=1) as log, subprocess.Popen(
            ["bash", ".ci/run"], cwd=clone, env=env, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, errors="replace") as run:
        for line in run.stdout:
            log.write(line)
            if pytest_started is None and line.startswith("nox > python -m pytest"):
                pytest_started = round(time.monotonic() - started)
                say(f"pytest started {pytest_started} s in")
            found = SUMMARY.match(line.strip())
            if found:
                result, took = found["result"], round(float(found["took"]))
                say(f"pytest: {result} in {took} s")
        code = run.wait()
    total = round(time.monotonic() - started)
    busy.stop.set()
    record = {"measured": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
              "commit": commit, "state": "cold" if args.cold else "as found",
              "machine": facts, "total_s": total, "pytest_started_s": pytest_started,
              "pytest_s": took, "result": result, "exit_status": code,
              "cpu_busy_percent": busy.mean()}
    records.append(record)
    args.record.parent.mkdir(parents=True, exist_ok=True)
    part = args.record.with_name(args.record.name + ".part")
    part.write_text(json.dumps(records, indent=2) + "\n")
    part.replace(args.record)
    say(f".ci/run ended with {code} after {total} s ({total / 60:.1f} min); recorded in "
        f"{args.record}; its log: {log_path}")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
