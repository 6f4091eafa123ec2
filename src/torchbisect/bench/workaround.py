"""What the workaround costs: `clone()` against a lazy clone that materializes, on one GPU.

Standalone (stdlib + torch, run as a script with the interpreter that has the torch to measure)
so `torchbisect bench` can run it in any cell's environment.  Prints one JSON document.

For each size it measures, in eager mode, `x.clone()` and `torch._lazy_clone(x)` followed by
`data_ptr()` (the materializing copy); and under CUDA Graphs, the replay time of a graph computing
`x * 2` with and without a `clone()` node in front: the price of the correct graph.  Bandwidths are
bytes copied per second, and each is also given as a fraction of the device's copy bandwidth
measured here with a large device-to-device clone.
"""

from __future__ import annotations  # the annotations stay text: any Python 3.8+ runs this

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

MIB = 1 << 20
DEFAULT_SIZES_MIB = (1, 4, 16, 64, 256, 1024)
REPLAYS_PER_TIMING = 20


def _median_ms_events(torch: ModuleType, fn: Callable[[], object], reps: int) -> float:
    """Median milliseconds of `fn` on the current stream, timed with CUDA events."""
    times: list[float] = []
    for _ in range(reps):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def _median_ms_wall(torch: ModuleType, fn: Callable[[], object], reps: int) -> float:
    """Median wall milliseconds with the device idle before and after: the materializing copy
    is a synchronous cudaMemcpy on the legacy stream, which stream events would not bracket."""
    times: list[float] = []
    for _ in range(reps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def _peak_copy_gbps(torch: ModuleType, reps: int) -> float:
    x = torch.empty(2048 * MIB, dtype=torch.uint8, device="cuda")
    for _ in range(3):
        x.clone()
    ms = _median_ms_events(torch, lambda: x.clone(), reps)
    gbps: float = x.numel() / (ms / 1e3) / 1e9
    return gbps


def _graph_replay_ms(torch: ModuleType, x: Any, with_clone: bool, reps: int) -> float:
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # warm up outside capture, as torch.cuda.graphs advises
        (x.clone() if with_clone else x).mul(2)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = (x.clone() if with_clone else x).mul(2)
    for _ in range(3):
        graph.replay()

    def replays() -> None:  # a batch a timing: one replay of a small graph is mostly launch jitter
        for _ in range(REPLAYS_PER_TIMING):
            graph.replay()

    ms = _median_ms_events(torch, replays, reps) / REPLAYS_PER_TIMING
    del out
    return ms


def _row(torch: ModuleType, size_mib: int, reps: int, peak: float) -> dict[str, Any]:
    x = torch.rand(size_mib * MIB // 4, device="cuda")
    nbytes: int = x.numel() * 4
    clone_ms = _median_ms_wall(torch, lambda: x.clone(), reps)

    def lazy_then_materialize() -> None:
        y = torch._lazy_clone(x)
        y.data_ptr()

    lazy_ms = _median_ms_wall(torch, lazy_then_materialize, reps)
    without = _graph_replay_ms(torch, x, False, reps)
    with_clone = _graph_replay_ms(torch, x, True, reps)
    node_ms = with_clone - without

    def gbps(ms: float) -> float | None:
        # None when the difference is within timing noise: no bandwidth can be read from it
        return nbytes / (ms / 1e3) / 1e9 if ms > 1e-4 else None

    node_gbps, clone_gbps = gbps(node_ms), gbps(clone_ms)
    assert clone_gbps is not None  # an eager clone of 1 MiB or more takes far more than 0.1 us
    return {
        "size_mib": size_mib,
        "eager_clone_ms": clone_ms,
        "eager_lazy_materialize_ms": lazy_ms,
        "eager_clone_gbps": gbps(clone_ms),
        "eager_lazy_materialize_gbps": gbps(lazy_ms),
        "graph_replay_ms_without_clone": without,
        "graph_replay_ms_with_clone": with_clone,
        "graph_clone_node_ms": node_ms,
        "graph_clone_node_gbps": gbps(node_ms),
        "graph_clone_node_fraction_of_peak": node_gbps / peak if node_gbps else None,
        "eager_clone_fraction_of_peak": clone_gbps / peak,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--sizes-mib", default=",".join(str(s) for s in DEFAULT_SIZES_MIB))
    parser.add_argument("--reps", type=int, default=20)
    args = parser.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print(json.dumps({"skipped": "no CUDA device"}))
        return 0
    if not hasattr(torch, "_lazy_clone"):
        print(json.dumps({"skipped": "torch._lazy_clone is absent in this torch"}))
        return 0
    peak = _peak_copy_gbps(torch, args.reps)
    rows = [_row(torch, int(s), args.reps, peak) for s in args.sizes_mib.split(",")]
    props = torch.cuda.get_device_properties(0)
    print(
        json.dumps(
            {
                "torch": torch.__version__,
                "git_version": getattr(torch.version, "git_version", ""),
                "gpu": props.name,
                "driver": _driver(),
                "peak_copy_gbps": peak,
                "reps": args.reps,
                "rows": rows,
            },
            indent=2,
        )
    )
    return 0


def _driver() -> str:
    # Standalone (no import of torchbisect, so neither proc.run nor gpus.driver_version).
    try:
        import subprocess

        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout
        return out.strip().splitlines()[0]
    except Exception:
        return ""


if __name__ == "__main__":
    sys.exit(main())
