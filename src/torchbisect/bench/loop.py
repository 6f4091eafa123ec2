"""From a reproducer to an answer: `torchbisect bisect --script` against the loop a user writes.

The `loop` part of `torchbisect bench` (loop.json).  A maintainer with a reproducer who does not
use torchbisect runs, for each release, a fresh `uv venv`, `uv pip install` of that wheel and
`python repro.py`, one after the other.  This part measures both on the same machine:

1. the tool: `torchbisect bisect --find-fix (or not) --script "python SCRIPT" --repeat 1` over a
   local folder of wheels (an air-gapped mirror), from an empty uv cache, an empty work folder
   and an empty store; its store says which builds it judged, in which order, and each one's
   install and probe seconds;
2. the loop: the same wheel files in the same order, each in a fresh venv made by uv from an
   empty uv cache of its own, the script run once in it; each build's install (venv + install)
   and probe seconds.  Each venv is removed after its run, outside the timing (a GPU build's
   venv is gigabytes; the tool's are removed too once its store is read).

The floor is the sum of the loop's probe seconds: the reproducer's own time, which no tool can
save.  `--repeat 1` because the loop asks each build once (the tool's default with --script asks
twice, to catch a flaky script).  The page cache is dropped before each side where the host lets
us (root on Linux), so neither reads the wheels the other warmed; the JSON says whether it was.
Numbers are measured and reported, never asserted.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sqlite3
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..backends import Purpose, default_backend
from ..utils import files, proc
from . import plots

GOAL_LOOP = 0.8  # the tool at most this share of the loop's wall time
GOAL_FLOOR = 1.3  # and within this many times the reproducer's own time


@dataclass(frozen=True, kw_only=True)
class LoopSetup:
    """What both sides run: the range, the reproducer, the wheels, and where to work."""

    good: str
    bad: str
    index: Path  # a flat folder of wheels (or a PEP 503 page the tool reads; the loop takes
    # the files the tool's store names)
    script: Path  # the reproducer: exit 0 good, 1-127 bad, as `git bisect run` reads it
    workdir: Path  # emptied first: caches, venvs and stores of both sides
    find_fix: bool = True
    cuda: str = "auto"
    python: str = "3.12"  # the venvs' Python (the tool's --python)
    interpreter: str = sys.executable  # the loop's overlay base: the tool's is this Python too
    overlay: bool = True  # only torch goes in, over the interpreter's CUDA libraries
    extra: tuple[str, ...] = ()  # more `bisect` flags


def measure(setup: LoopSetup) -> dict[str, Any]:
    """Both sides, one after the other; the document loop.json holds."""
    shutil.rmtree(setup.workdir, ignore_errors=True)
    setup.workdir.mkdir(parents=True)
    tool = run_tool(setup)
    for kept in ("venvs", "uv-cache"):  # the disk: a GPU build's venv is gigabytes (not timed)
        shutil.rmtree(setup.workdir / "tool" / kept, ignore_errors=True)
    loop = run_loop(setup, [(b["version"], b["wheel"]) for b in tool["builds"]])
    floor = sum(b["probe_seconds"] for b in loop["builds"])
    doc = {
        "part": "loop",
        "measured": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        **_machine(),
        "good": setup.good,
        "bad": setup.bad,
        "find_fix": setup.find_fix,
        "script": setup.script.name,
        "overlay": setup.overlay,
        "cuda": setup.cuda,
        "tool_seconds": tool["seconds"],
        "loop_seconds": loop["seconds"],
        "floor_seconds": round(floor, 3),
        "tool_vs_loop": _ratio(tool["seconds"], loop["seconds"]),
        "tool_vs_floor": _ratio(tool["seconds"], floor),
        "goals": {"tool_vs_loop_at_most": GOAL_LOOP, "tool_vs_floor_at_most": GOAL_FLOOR},
        "tool": tool,
        "loop": loop,
        "same_verdicts": [b["verdict"] for b in tool["builds"]]
        == [b["verdict"] for b in loop["builds"]],
    }
    doc["where_the_rest_goes"] = _rest(doc)
    return doc


def run_tool(setup: LoopSetup) -> dict[str, Any]:
    """`torchbisect bisect … --script`, timed from the command's start to its exit."""
    work = setup.workdir / "tool"
    store, answer = work / "results.sqlite", work / "bisect.json"
    argv = [
        sys.executable,
        "-m",
        "torchbisect",
        "bisect",
        "--good",
        setup.good,
        "--bad",
        setup.bad,
        *(["--find-fix"] if setup.find_fix else []),
        "--cuda",
        setup.cuda,
        "--python",
        setup.python,
        "--index-url",
        str(setup.index),
        "--backend",
        default_backend(Purpose.BENCH).name,
        *(["--overlay"] if setup.overlay else []),
        "--script",
        f"python {shlex.quote(str(setup.script))}",
        "--repeat",
        "1",
        "--no-github",
        "--workdir",
        str(work / "venvs"),
        "--store",
        str(store),
        "--json",
        str(answer),
        *setup.extra,
    ]
    env = {"UV_CACHE_DIR": str(work / "uv-cache")}
    dropped = drop_page_cache()
    began = time.perf_counter()
    done = proc.run(
        argv, env=env, log=setup.workdir / "tool.log", check=False, timeout=3600, echo=_say
    )
    seconds = time.perf_counter() - began
    builds = _judged(store)
    result = json.loads(answer.read_text()) if answer.is_file() else {}
    edge = {
        k: (result.get(k) or {}).get("version")
        for k in ("last_bad", "first_good", "last_good", "first_bad")
    }
    return {
        "seconds": round(seconds, 3),
        "exit": done.returncode,
        "page_cache_dropped": dropped,
        "command": shlex.join(argv[1:]),
        "answer": {k: v for k, v in edge.items() if v},
        "builds": builds,
        "install_seconds": round(sum(b["install_seconds"] for b in builds), 3),
        "probe_seconds": round(sum(b["probe_seconds"] for b in builds), 3),
    }


def _judged(store: Path) -> list[dict[str, Any]]:
    """The builds the tool judged, in the order their verdicts were stored."""
    if not store.is_file():
        return []
    with sqlite3.connect(store) as db:
        rows = db.execute(
            "SELECT cell_json, status, verdict, seconds_install, seconds_probe "
            "FROM runs ORDER BY id"
        ).fetchall()
    builds = []
    for cell_json, status, verdict, install, probe in rows:
        cell = json.loads(cell_json)
        builds.append(
            {
                "version": cell["version"],
                "wheel": cell["url"],
                "status": status,
                "verdict": _word(verdict),
                "install_seconds": round(install, 3),
                "probe_seconds": round(probe, 3),
            }
        )
    return builds


def run_loop(setup: LoopSetup, builds: list[tuple[str, str]]) -> dict[str, Any]:
    """The hand loop over `builds` (version, wheel file), one after the other."""
    work = setup.workdir / "loop"
    work.mkdir(parents=True, exist_ok=True)
    uv = _uv()
    env = {"UV_CACHE_DIR": str(work / "uv-cache")}
    log = setup.workdir / "loop.log"
    dropped = drop_page_cache()
    rows: list[dict[str, Any]] = []
    seconds = 0.0
    for version, wheel in builds:
        venv = work / f"venv-{version}"
        start = time.perf_counter()
        proc.run(
            [
                uv,
                "venv",
                "--python",
                setup.interpreter if setup.overlay else setup.python,
                *(["--system-site-packages"] if setup.overlay else []),
                str(venv),
            ],
            env=env,
            log=log,
            timeout=600,
        )
        proc.run(
            [
                uv,
                "pip",
                "install",
                "--python",
                str(venv / "bin" / "python"),
                *(["--no-deps"] if setup.overlay else []),
                _local(wheel),
            ],
            env=env,
            log=log,
            timeout=1800,
        )
        installed = time.perf_counter()
        done = proc.run(
            [str(venv / "bin" / "python"), str(setup.script)], log=log, check=False, timeout=3600
        )
        probed = time.perf_counter()
        rows.append(
            {
                "version": version,
                "exit": done.returncode,
                "verdict": "good"
                if done.returncode == 0
                else "skip"
                if done.returncode == 125
                else "bad",
                "install_seconds": round(installed - start, 3),
                "probe_seconds": round(probed - installed, 3),
            }
        )
        seconds += probed - start
        _say(
            f"loop: {version} {rows[-1]['verdict']} (install {installed - start:.1f} s, "
            f"script {probed - installed:.1f} s)"
        )
        shutil.rmtree(venv, ignore_errors=True)
    return {
        "seconds": round(seconds, 3),
        "page_cache_dropped": dropped,
        "builds": rows,
        "install_seconds": round(sum(r["install_seconds"] for r in rows), 3),
        "probe_seconds": round(sum(r["probe_seconds"] for r in rows), 3),
    }


def drop_page_cache() -> bool:
    """Write back and drop the kernel's page cache (root on Linux only): True when done."""
    os.sync()
    try:
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
    except OSError:
        return False
    return True


def _rest(doc: dict[str, Any]) -> dict[str, Any]:
    """Where the tool's wall time beyond the floor goes, from its own figures: the reproducer's
    runs (as the tool timed them), installing that the probes did not hide, and the rest
    (resolving the range, the index, venvs, the store)."""
    tool = doc["tool"]
    probing = tool["probe_seconds"]
    builds = tool["builds"]
    first_install = builds[0]["install_seconds"] if builds else 0.0
    unhidden = max(0.0, tool["install_seconds"] - probing) if len(builds) > 1 else first_install
    return {
        "reproducer_in_tool_seconds": round(probing, 3),
        "tool_install_seconds_all": tool["install_seconds"],
        "first_install_seconds": round(first_install, 3),
        "install_not_hidden_at_least_seconds": round(max(first_install, unhidden), 3),
        "other_seconds_at_most": round(tool["seconds"] - probing - first_install, 3),
    }


def _machine() -> dict[str, Any]:
    from ..utils.gpus import list_gpus

    gpus = list_gpus()
    return {
        "gpu": gpus[0].name if gpus else "none",
        "driver": gpus[0].driver if gpus else "",
        "cpus": os.cpu_count(),
    }


def _uv() -> str:
    from ..backends.venv import uv_binary

    return uv_binary()


def _local(wheel: str) -> str:
    return wheel[len("file://") :] if wheel.startswith("file://") else wheel


def _word(verdict: str | None) -> str:
    return {"affected": "bad", "not_affected": "good"}.get(verdict or "", verdict or "none")


def _ratio(a: float, b: float) -> float | None:
    return round(a / b, 3) if b else None


def _say(line: str) -> None:
    print(line, file=sys.stderr)


def write(doc: dict[str, Any], out: Path | None) -> None:
    """loop.json into `out` (None: printed only), and the figures on stderr."""
    text = json.dumps(doc, indent=2) + "\n"
    if out is not None:
        files.write_text(out / "loop.json", text)
        (out / "loop.svg").write_text(chart(doc))
    _say(
        f"bench loop on {doc['gpu']} (driver {doc['driver']}): tool {doc['tool_seconds']:.1f} s, "
        f"loop {doc['loop_seconds']:.1f} s, floor {doc['floor_seconds']:.1f} s over "
        f"{len(doc['loop']['builds'])} builds: tool/loop {doc['tool_vs_loop']} (goal <= "
        f"{GOAL_LOOP}), tool/floor {doc['tool_vs_floor']} (goal <= {GOAL_FLOOR})"
    )


def chart(doc: dict[str, Any]) -> str:
    """loop.svg: the tool, the hand loop and the floor in seconds, the tool's goal as a tick (the
    stricter of its two: 0.8x the loop, 1.3x the floor)."""
    goal = min(GOAL_LOOP * doc["loop_seconds"], GOAL_FLOOR * doc["floor_seconds"])
    return plots.bar_chart(
        f"From a reproducer to an answer, {len(doc['loop']['builds'])} builds ({doc['gpu']})",
        "seconds",
        {
            "torchbisect": doc["tool_seconds"],
            "hand loop": doc["loop_seconds"],
            "reproducer alone": doc["floor_seconds"],
        },
        {"torchbisect": goal},
    )
