"""`torchbisect bench`: what the workaround costs on this GPU, and what the tool costs per cell.

Writes into `--out` (default reports/bench/): `workaround.json` + `workaround.svg` (clone() against
a lazy clone that materializes, eager and inside CUDA Graphs; one more pair per
--compare-interpreter, named by its torch version), `probe.json` + `probe.svg` (whole probe runs
with an earlier probe script and with today's) and `tool.json` + `tool.svg` (per-cell overhead
against the bare probe, an unchanged re-run, planning 1,000 nightly dates, rendering 2,000 cells
and, with --gpu-matrix, one GPU against all).  Each figure is measured in this run; nothing is
asserted, the numbers are reported.  reports/bench/ keeps measurements made on a GPU: a machine
without one writes files only into a folder that --out names.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import date, timedelta
from pathlib import Path

from .. import bench_plots, proc
from ..backends.base import host_python
from ..errors import ConfigError
from .options import add_backend_option, add_interpreter_option

PARTS = ("workaround", "probe", "overhead", "rerun", "plan", "render", "gpus")
DEFAULT_OUT = Path("reports/bench")
# The probe before it imported torch once and forked its cases (PROBE_VERSION 1).
BASELINE_PROBE = "2665c53:probes/stale_replay.py"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path,
                        help=f"folder for the JSON and SVG files (default: {DEFAULT_OUT}, on a "
                        "machine with a GPU only)")
    parser.add_argument("--parts", default="workaround,overhead,rerun,plan,render",
                        help=f"comma list of {', '.join(PARTS)} (default: %(default)s)")
    add_interpreter_option(parser, "interpreter whose torch the workaround cost is measured "
                                   "with (default: the one running torchbisect)",
                           default=host_python())
    parser.add_argument("--compare-interpreter", action="append", default=[], metavar="PATH",
                        help="another interpreter whose torch's workaround cost is measured "
                        "beside the first (repeatable)")
    parser.add_argument("--probe-baseline", type=Path, metavar="SCRIPT",
                        help=f"the 'probe' part's earlier probe (default: {BASELINE_PROBE} "
                        "from git)")
    parser.add_argument("--sizes-mib", default="1,4,16,64,256,1024")
    parser.add_argument("--gpu-matrix", type=Path,
                        help="matrix file for the 'gpus' part: run on one GPU, then on all")
    add_backend_option(parser, "backend for the 'gpus' part (default: %(default)s)",
                       default="venv")
    parser.add_argument("--overhead-cases", default="",
                        help="probe cases for the 'overhead' part (default: all of them)")


def run(args: argparse.Namespace) -> int:
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        raise ConfigError(f"--parts: unknown part {unknown[0]!r}; choose from {', '.join(PARTS)}")
    if "gpus" in parts and not args.gpu_matrix:
        raise ConfigError("--parts gpus needs --gpu-matrix PATH (the matrix to run twice)")
    args.out = _out(args.out)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
    if "workaround" in parts:
        for i, python in enumerate([args.interpreter, *args.compare_interpreter]):
            _workaround(args, python, "workaround" if i == 0 else None)
    if "probe" in parts:
        _probe_part(args)
    tool = {name: _TOOL_PARTS[name](args) for name in parts if name in _TOOL_PARTS}
    if tool:
        _write_tool(args.out, tool)
    return 0


def _out(out: Path | None) -> Path | None:
    """Where to write: --out, else reports/bench/ on a machine with a GPU, else nowhere."""
    from ..gpus import list_gpus

    if out is not None or list_gpus():
        return out or DEFAULT_OUT
    print(f"bench: no GPU here, so nothing is written to {DEFAULT_OUT}/ (it keeps the numbers "
          "measured on a GPU); pass --out DIR to keep this run's", file=sys.stderr)
    return None


def _write(out: Path | None, name: str, text: str) -> None:
    if out is not None:
        (out / name).write_text(text)


def _workaround(args: argparse.Namespace, python: str, stem: str | None) -> None:
    """`stem`.json/.svg, or workaround-<torch version> when None."""
    script = Path(__file__).resolve().parent.parent / "workaround_bench.py"
    print(f"bench: workaround cost with {python}", file=sys.stderr)
    done = proc.run([python, str(script), "--sizes-mib", args.sizes_mib], timeout=1800,
                    echo=lambda line: print(line, file=sys.stderr))
    doc = json.loads(done.output[done.output.index("{"):])
    if "rows" not in doc:
        print(f"bench: workaround cost skipped: {doc.get('skipped')}", file=sys.stderr)
        return
    stem = stem or f"workaround-{doc['torch'].replace('+', '-')}"
    _write(args.out, f"{stem}.json", json.dumps(doc, indent=2) + "\n")
    rows = doc["rows"]
    sizes = [r["size_mib"] for r in rows]
    svg = bench_plots.line_chart(
        f"clone() vs lazy clone on {doc['gpu']} (torch {doc['torch']})", "tensor size (MiB)",
        "GB/s copied",
        sizes, {"eager clone()": [r["eager_clone_gbps"] for r in rows],
                "eager lazy clone + data_ptr()": [r["eager_lazy_materialize_gbps"] for r in rows],
                "clone node in a CUDA Graph": [r["graph_clone_node_gbps"] or 0 for r in rows]},
        hline=("device copy peak", doc["peak_copy_gbps"]))
    _write(args.out, f"{stem}.svg", svg)
    for r in rows:
        share = r["graph_clone_node_fraction_of_peak"]
        print(f"  {r['size_mib']:>5} MiB  clone {r['eager_clone_ms']:.3f} ms  "
              f"lazy+materialize {r['eager_lazy_materialize_ms']:.3f} ms  graph clone node "
              f"{r['graph_clone_node_ms']:.4f} ms "
              f"({'within noise' if share is None else f'{share:.0%} of peak'})", file=sys.stderr)


def _probe_part(args: argparse.Namespace) -> None:
    """Whole probe runs, the baseline script against today's, with --interpreter's torch."""
    from ..benchmarks import probe_speed

    doc = probe_speed(python=args.interpreter,
                      baseline=args.probe_baseline or _baseline_from_git())
    _write(args.out, "probe.json", json.dumps(doc, indent=2) + "\n")
    bars = {f"{label} ({kind})": doc[kind][label] for kind in ("cold", "warm")
            for label in ("before", "after")}
    _write(args.out, "probe.svg", bench_plots.bar_chart(
        f"seconds per probe run, all cases: {doc['gpu']}, torch {doc['torch']}", "", bars,
        {k: doc["goal_seconds"] for k in bars if k.startswith("after")}))
    print(json.dumps(doc, indent=2))


def _baseline_from_git() -> Path:
    checkout = Path(__file__).resolve().parents[3]
    done = subprocess.run(["git", "-C", str(checkout), "show", BASELINE_PROBE],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise ConfigError(f"the 'probe' part needs the earlier probe, and git cannot show "
                          f"{BASELINE_PROBE} here: pass --probe-baseline SCRIPT")
    path = Path(tempfile.mkdtemp(prefix="torchbisect-baseline-")) / "stale_replay.py"
    path.write_text(done.stdout)
    return path


def _overhead(args: argparse.Namespace) -> dict:
    from ..benchmarks import cell_overhead
    from .matrix import preinstalled_cell

    cases = tuple(c for c in args.overhead_cases.split(",") if c)
    return cell_overhead(cell=preinstalled_cell(cases=cases))


def _rerun(args: argparse.Namespace) -> dict:
    from ..benchmarks import rerun_unchanged

    return rerun_unchanged(20)


def _render(args: argparse.Namespace) -> dict:
    from ..report import bench_render

    return bench_render(2000)


def _plan(args: argparse.Namespace) -> dict:
    """Planning 1,000 nightly dates against a local index in PyTorch's format."""
    indexserver = _test_helper("indexserver")
    from ..config import load_matrix
    from ..resolve import build_plan

    first = date(2023, 12, 1)
    days = indexserver.daily(first, 1000,
                             skip=[first + timedelta(days=d) for d in range(3, 1000, 97)])
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        indexserver.make_nightly_index(root, days, bump=(days[500], "2.18.0"))
        matrix = root / "matrix.yaml"
        with indexserver.serve(root) as url:
            matrix.write_text(f"indexes:\n  nightly: {url}/whl/nightly/{{cuda}}/\n"
                              f"nightly:\n  from: {first}\n  to: {days[-1]}\n  cuda: cu130\n")
            began = time.perf_counter()
            plan = build_plan(load_matrix(matrix), lock=None, python="3.12",
                              platform="linux_x86_64", driver="580.65.06", today=days[-1])
            seconds = time.perf_counter() - began
    return {"dates": 1000, "cells": len(plan.cells), "missing": len(plan.missing),
            "seconds": round(seconds, 3), "transport": "HTTP on 127.0.0.1"}


def _gpus(args: argparse.Namespace) -> dict:
    """The same matrix on the first GPU alone, then on every GPU; environments already built."""
    from ..gpus import list_gpus

    gpus = list_gpus()
    if len(gpus) < 2:
        return {"skipped": f"{len(gpus)} GPU(s) visible; this part needs at least two"}
    times = {}
    with tempfile.TemporaryDirectory() as tmp:
        for label, visible in (("warm-up", None), ("one GPU", str(gpus[0].index)),
                               ("all GPUs", None)):
            env = dict(os.environ)
            if visible is not None:
                env["CUDA_VISIBLE_DEVICES"] = visible
            argv = [sys.executable, "-m", "torchbisect", "matrix", "--matrix",
                    str(args.gpu_matrix), "--backend", args.backend, "--force", "--no-report",
                    "--store", str(Path(tmp) / f"{label}.sqlite")]
            print(f"bench: gpus: {label}: {' '.join(argv)}", file=sys.stderr)
            began = time.monotonic()
            subprocess.run(argv, env=env, check=True)
            times[label] = time.monotonic() - began
    return {"gpus": len(gpus), "gpu": gpus[0].name, "one_gpu_seconds": round(times["one GPU"], 2),
            "all_gpus_seconds": round(times["all GPUs"], 2),
            "speedup": round(times["one GPU"] / times["all GPUs"], 2), "goal_speedup": 1.8}


_TOOL_PARTS = {"overhead": _overhead, "rerun": _rerun, "plan": _plan, "render": _render,
               "gpus": _gpus}


def _write_tool(out: Path | None, tool: dict) -> None:
    _write(out, "tool.json", json.dumps(tool, indent=2) + "\n")
    bars, goals = {}, {}
    if "ratio" in tool.get("overhead", {}):
        bars["cell / bare probe"], goals["cell / bare probe"] = tool["overhead"]["ratio"], 1.2
    if "seconds" in tool.get("rerun", {}):
        bars["re-run 20 cells (s)"], goals["re-run 20 cells (s)"] = tool["rerun"]["seconds"], 2.0
    if "seconds" in tool.get("plan", {}):
        bars["plan 1,000 dates (s)"] = tool["plan"]["seconds"]
    if "seconds" in tool.get("render", {}):
        bars["render 2,000 (s)"], goals["render 2,000 (s)"] = tool["render"]["seconds"], 1.0
    if "speedup" in tool.get("gpus", {}):
        bars["GPU speed-up"], goals["GPU speed-up"] = tool["gpus"]["speedup"], 1.8
    if bars:
        _write(out, "tool.svg",
               bench_plots.bar_chart("torchbisect overhead (measured in one run)", "", bars, goals))
    print(json.dumps(tool, indent=2))


def _test_helper(name: str):
    """The test suite's index builder: present in a checkout (the package is installed -e)."""
    tests = Path(__file__).resolve().parents[3] / "tests"
    if not (tests / f"{name}.py").is_file():
        raise ConfigError(f"the 'plan' benchmark needs the checkout's tests/{name}.py; run it "
                          "from a clone of torchbisect")
    sys.path.insert(0, str(tests))
    return __import__(name)
