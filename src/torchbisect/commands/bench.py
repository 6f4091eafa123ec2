"""`torchbisect bench`: what the workaround costs on this GPU, and what the tool costs per cell.

Writes into `--out` (default reports/bench/): `workaround.json` + `workaround.svg` (clone() against
a lazy clone that materializes, eager and inside CUDA Graphs; one more pair per
--compare-interpreter, named by its torch version), `probe.json` + `probe.svg` (whole probe runs
with an earlier probe script and with today's) and `tool.json` + `tool.svg` (per-cell overhead
against the bare probe, an unchanged re-run, planning 1,000 nightly dates, rendering 2,000 cells
and, with --gpu-matrix, one GPU against all), and `scale.json` + `scale.svg` (`report` on a
store of three years of nightlies on four GPU kinds: time, peak memory, page size, phone layout;
no GPU needed, so `--parts scale --out reports/bench` on any machine), and `loop.json` (`bisect
--script` from a reproducer to an answer against the loop a user writes over the same builds:
--loop-good, --loop-bad, --loop-index, --loop-script).  Each figure is measured
in this run; nothing is
asserted, the numbers are reported.  reports/bench/ keeps measurements made on a GPU: a machine
without one writes files only into a folder that --out names.  The measuring is the bench
package's; this module reads the flags and says where the files go.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .. import defaults
from ..backends.base import host_python
from ..bench import PARTS
from ..bench.figures import BASELINE_PROBE
from ..cli.options import Output, add_backend_option, add_interpreter_option
from ..errors import ConfigError


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--out",
        type=Output("dir"),
        help="folder for the JSON and SVG files (default: "
        f"{defaults.BENCH_OUT}, on a machine with a GPU only)",
    )
    parser.add_argument(
        "--parts",
        default="workaround,overhead,rerun,plan,render,scale",
        help=f"comma list of {', '.join(PARTS)} (default: %(default)s)",
    )
    add_interpreter_option(
        parser,
        "interpreter whose torch the workaround cost is measured "
        "with (default: the one running torchbisect)",
        default=host_python(),
    )
    parser.add_argument(
        "--compare-interpreter",
        action="append",
        default=[],
        metavar="PATH",
        help="another interpreter whose torch's workaround cost is measured "
        "beside the first (repeatable)",
    )
    parser.add_argument(
        "--probe-baseline",
        type=Path,
        metavar="SCRIPT",
        help=f"the 'probe' part's earlier probe (default: {BASELINE_PROBE} from git)",
    )
    parser.add_argument("--sizes-mib", default="1,4,16,64,256,1024")
    parser.add_argument(
        "--gpu-matrix",
        type=Path,
        help="matrix file for the 'gpus' part: run on one GPU, then on all",
    )
    from ..backends import Purpose, default_backend

    add_backend_option(
        parser,
        "backend for the 'gpus' part (default: %(default)s)",
        default=default_backend(Purpose.BENCH).name,
    )
    parser.add_argument(
        "--overhead-cases",
        default="",
        help="probe cases for the 'overhead' part (default: all of them)",
    )
    loop = parser.add_argument_group("the 'loop' part: bisect --script against the hand loop")
    loop.add_argument("--loop-good", metavar="VERSION", help="the bisection's --good release")
    loop.add_argument("--loop-bad", metavar="VERSION", help="the bisection's --bad release")
    loop.add_argument(
        "--loop-find-fix",
        action="store_true",
        help="look for the fix (--bad is the older end), as bisect --find-fix",
    )
    loop.add_argument(
        "--loop-index",
        metavar="DIR",
        help="a folder of torch wheels (an air-gapped mirror) both sides install",
    )
    loop.add_argument(
        "--loop-script",
        type=Path,
        metavar="FILE",
        help="the reproducer: exit 0 good, 1-127 bad (e.g. probes/cumsum_64bit.py)",
    )
    loop.add_argument(
        "--loop-cuda",
        default="auto",
        metavar="TAG",
        help="the bisection's --cuda (default: %(default)s)",
    )
    loop.add_argument(
        "--loop-workdir",
        type=Path,
        metavar="DIR",
        help="emptied, then both sides' caches, venvs and stores (default: "
        ".torchbisect/bench-loop)",
    )


def run(args: argparse.Namespace) -> int:
    from ..bench import figures, tool

    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        raise ConfigError(f"--parts: unknown part {unknown[0]!r}; choose from {', '.join(PARTS)}")
    if "gpus" in parts and not args.gpu_matrix:
        raise ConfigError("--parts gpus needs --gpu-matrix PATH (the matrix to run twice)")
    if "loop" in parts:
        lacking = [
            f"--loop-{n}"
            for n in ("good", "bad", "index", "script")
            if not getattr(args, f"loop_{n}")
        ]
        if lacking:
            raise ConfigError(
                f"--parts loop needs {', '.join(lacking)} (the range, the folder "
                "of wheels and the reproducer both sides run)"
            )
        if not args.loop_script.is_file():
            raise ConfigError(f"--loop-script {args.loop_script}: no such file")
    out = _out(args.out)
    if out:
        out.mkdir(parents=True, exist_ok=True)
    if "workaround" in parts:
        for i, python in enumerate([args.interpreter, *args.compare_interpreter]):
            figures.workaround(
                python, sizes_mib=args.sizes_mib, out=out, stem="workaround" if i == 0 else None
            )
    if "probe" in parts:
        figures.probe(args.interpreter, baseline=args.probe_baseline, out=out)
    tool.measure(
        parts,
        out=out,
        overhead_cases=args.overhead_cases,
        gpu_matrix=args.gpu_matrix,
        backend=args.backend,
    )
    if "scale" in parts:
        from ..bench.scale import write_scale

        write_scale(out)
    if "loop" in parts:
        from ..bench import loop

        setup = loop.LoopSetup(
            good=args.loop_good,
            bad=args.loop_bad,
            index=Path(args.loop_index),
            script=args.loop_script.absolute(),
            find_fix=args.loop_find_fix,
            cuda=args.loop_cuda,
            python=f"{sys.version_info[0]}.{sys.version_info[1]}",
            workdir=(args.loop_workdir or Path(".torchbisect") / "bench-loop").absolute(),
        )
        loop.write(loop.measure(setup), out)
    return 0


def _out(out: Path | None) -> Path | None:
    """Where to write: --out, else reports/bench/ on a machine with a GPU, else nowhere."""
    from ..utils.gpus import list_gpus

    if out is not None or list_gpus():
        return out or defaults.BENCH_OUT
    print(
        f"bench: no GPU here, so nothing is written to {defaults.BENCH_OUT}/ (it keeps the "
        "numbers measured on a GPU); pass --out DIR to keep this run's numbers",
        file=sys.stderr,
    )
    return None
