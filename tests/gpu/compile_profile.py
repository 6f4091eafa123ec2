"""Harness (issue 54.3): where the shipped probe's torch.compile case spends its time.

    python compile_profile.py PROBE fresh|fork|fork-preimport|fork-preimport-nvml

fresh: one process times `import torch`, `import torch._dynamo`, `import torch._inductor`, CUDA's
initialisation, then each variant of stale_replay's compile case in turn (the first pays what a
process pays once). fork: as the probe runs them, the parent imports torch only and forks one
child per variant, all at once; fork-preimport: the parent also imports Dynamo and Inductor before
forking; fork-preimport-nvml: the same with PYTORCH_NVML_BASED_CUDA_CHECK=1 (torch asks NVML, not
the CUDA driver, whether a GPU is there, so an import that asks does not initialise the driver).
Before forking, the parent says whether the CUDA driver library is mapped and how many threads it
has (either makes a forked child's CUDA unusable). Each child prints its CUDA initialisation and
variant seconds, or the error it ended with; the parent its wall.
Run each twice with the same TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR for what caches save.
"""

import importlib.util
import json
import os
import sys
import time

os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
spec = importlib.util.spec_from_file_location("stale_replay", sys.argv[1])
probe = importlib.util.module_from_spec(spec)
spec.loader.exec_module(probe)
mode = sys.argv[2]
if mode == "fork-preimport-nvml":
    os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
t0 = time.perf_counter()


def lap(label, start):
    now = time.perf_counter()
    print(f"{mode}: {label} {now - start:.2f} s", flush=True)
    return now


t = time.perf_counter()
import torch  # noqa: E402

t = lap("import torch", t)
if mode in ("fresh", "fork-preimport", "fork-preimport-nvml"):
    import torch._dynamo  # noqa: E402,F401

    t = lap("import torch._dynamo", t)
    import torch._inductor.compile_fx  # noqa: E402,F401

    t = lap("import torch._inductor.compile_fx", t)
    print(f"{mode}: cuda initialised in parent: {torch.cuda.is_initialized()}", flush=True)
with open("/proc/self/maps") as maps:
    driver = any("libcuda.so" in line for line in maps)
threads = len(os.listdir("/proc/self/task"))
print(f"{mode}: before forking: libcuda mapped {driver}, {threads} thread(s)", flush=True)
if mode == "fresh":
    torch.cuda.init()
    t = lap("cuda init", t)
    for variant in probe.COMPILE_VARIANTS:
        result = probe._run_case(torch, f"{probe.COMPILE_CASE}:{variant}", 5)
        t = lap(f"variant {variant} ({result.get('verdict')})", t)
else:
    children = {}
    for variant in probe.COMPILE_VARIANTS:
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read)
            c = time.perf_counter()
            try:
                torch.cuda.init()
                init = time.perf_counter() - c
                result = probe._run_case(torch, f"{probe.COMPILE_CASE}:{variant}", 5)
                said = {
                    "init": round(init, 2),
                    "verdict": result.get("verdict"),
                    "detail": str(result.get("detail", ""))[:300],
                    "seconds": round(time.perf_counter() - c, 2),
                }
            except BaseException as exc:  # noqa: BLE001 - the reason is what this mode asks
                said = {"error": f"{type(exc).__name__}: {exc}"[:600]}
            os.write(write, json.dumps(said).encode())
            os._exit(0)
        os.close(write)
        children[variant] = (pid, read)
    for variant, (pid, read) in children.items():
        data = b""
        while True:
            chunk = os.read(read, 4096)
            if not chunk:
                break
            data += chunk
        _, status = os.waitpid(pid, 0)
        said = data.decode() or f"no result (wait status {status})"
        print(f"{mode}: child {variant}: {said}", flush=True)
    lap("all children", t)
print(f"{mode}: whole {time.perf_counter() - t0:.2f} s", flush=True)
