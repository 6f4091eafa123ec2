"""Harness (issue 54.2), no GPU: where the tool's time goes against the hand loop, on stand-in
wheels of a real wheel's shape, with the tool's install steps switched off one at a time.

    python tests/gpu/loop_standins.py OUT [--size-mb 300] [--py-files 2500] [--sleep 4]
                                          [--import-seconds 0] [--variants a,b]

Builds eight CPU stand-in wheels of torch 2.9.0 ... 2.14.1 (a large half-compressible library, as
torch's .so files are, and many small modules, as torch's 2,565 .py files are), a reproducer that
imports the stand-in (whose import takes `--import-seconds`, as a CUDA build's takes 1.5-2.4 s on
the H100), sleeps `--sleep` seconds (the probe's own time) and exits 1 from 2.12 on, then runs
`torchbisect bench --parts loop` once per variant of tool_variants.py (shipped, no-prefetch,
no-bytecode, old-adapter), switched by a sitecustomize.py this writes; nothing in src/ changes.
Each variant's loop.json goes to OUT/<variant>/, and OUT/summary.txt has the walls side by side.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "tests" / "gpu"))
from helpers import write_wheel  # noqa: E402
from tool_variants import OLD_PROBES, VARIANT, VARIANTS  # noqa: E402

RELEASES = ["2.9.0", "2.9.1", "2.10.0", "2.11.0", "2.12.0", "2.13.0", "2.14.0", "2.14.1"]

# torchbisect's processes find this first on their path: it switches the variant in them
PATCH = "from tool_variants import apply\n\napply()\n"

REPRO = """import sys, time, torch
time.sleep({sleep})
v = tuple(map(int, torch.__version__.split('+')[0].split('.')[:2]))
print('repro on', torch.__version__)
sys.exit(1 if v >= (2, 12) else 0)
"""


def _library(size_mb: int, seed: int) -> bytes:
    """Bytes that deflate to about half, as a CUDA wheel's shared libraries do."""
    rng = random.Random(seed)
    chunk = bytes(rng.getrandbits(8) for _ in range(1 << 16))
    half = chunk[: 1 << 15] + bytes(1 << 15)
    return half * (size_mb * 16)


def wheels(folder: Path, size_mb: int, py_files: int, import_seconds: float) -> None:
    for i, version in enumerate(RELEASES):
        files = {
            "torch/__init__.py": (
                f"import time\ntime.sleep({import_seconds})\n__version__ = {version + '+cpu'!r}\n"
            ),
            "torch/version.py": f"__version__ = {version + '+cpu'!r}\ngit_version = '{i:040x}'\n",
        }
        for n in range(py_files):
            files[f"torch/_mod/m{n}.py"] = f"X = {n}\n\ndef f(a):\n    return a + X\n"
        path = write_wheel(folder, f"{version}+cpu", files, tag="cp311-cp311-manylinux_2_28_x86_64")
        lib = _library(size_mb, i)
        subprocess.run(
            [sys.executable, "-c", _APPEND, str(path), str(len(lib))], input=lib, check=True
        )


# Adds torch/lib/libstandin.so (deflated) and its RECORD line to a wheel written by write_wheel.
_APPEND = """
import base64, hashlib, sys, zipfile
path, size = sys.argv[1], int(sys.argv[2])
data = sys.stdin.buffer.read()
with zipfile.ZipFile(path) as z:
    items = [(i, z.read(i.filename)) for i in z.infolist()]
digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
    for info, body in items:
        if info.filename.endswith("RECORD"):
            body = body + f"torch/lib/libstandin.so,sha256={digest},{size}\\n".encode()
        z.writestr(info, body, zipfile.ZIP_DEFLATED)
    z.writestr("torch/lib/libstandin.so", data, zipfile.ZIP_DEFLATED)
"""


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--size-mb", type=int, default=300)
    parser.add_argument("--py-files", type=int, default=2500)
    parser.add_argument("--sleep", type=float, default=4.0)
    parser.add_argument("--import-seconds", type=float, default=0.0)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    args = parser.parse_args()
    out = args.out.absolute()
    work = out / "work"
    (work / "patch").mkdir(parents=True, exist_ok=True)
    (work / "patch" / "sitecustomize.py").write_text(PATCH)
    folder = work / "wheels"
    if not folder.is_dir():
        started = time.time()
        wheels(folder, args.size_mb, args.py_files, args.import_seconds)
        print(f"wheels built in {time.time() - started:.0f} s", flush=True)
    old = work / "old-probes"
    if not old.is_dir():
        shutil.copytree(REPO / "probes", old, ignore=shutil.ignore_patterns("__pycache__"))
        before = subprocess.run(
            ["git", "-C", str(REPO), "show", "9ae1f3f^:probes/script.py"],
            capture_output=True,
            text=True,
            check=True,
        )
        (old / "script.py").write_text(before.stdout)
    repro = work / "repro.py"
    repro.write_text(REPRO.format(sleep=args.sleep))
    lines = []
    for variant in args.variants.split(","):
        target = out / variant
        target.mkdir(exist_ok=True)
        env = dict(os.environ, **{VARIANT: variant, OLD_PROBES: str(old)})
        env["PYTHONPATH"] = os.pathsep.join(
            [str(work / "patch"), str(REPO / "tests" / "gpu"), str(REPO / "src")]
        )
        shutil.rmtree(work / "bench", ignore_errors=True)
        argv = [
            sys.executable,
            "-m",
            "torchbisect",
            "bench",
            "--parts",
            "loop",
            "--loop-good",
            RELEASES[0],
            "--loop-bad",
            RELEASES[-1],
            "--loop-index",
            str(folder),
            "--loop-script",
            str(repro),
            "--loop-cuda",
            "cpu",
            "--loop-workdir",
            str(work / "bench"),
            "--out",
            str(target),
        ]
        done = subprocess.run(argv, env=env, capture_output=True, text=True)
        (target / "bench.log").write_text(done.stdout + done.stderr)
        if done.returncode != 0:
            lines.append(f"{variant}: exit {done.returncode} (see {target / 'bench.log'})")
            continue
        doc = json.loads((target / "loop.json").read_text())
        t, lp = doc["tool"], doc["loop"]
        lines.append(
            f"{variant:12} tool {doc['tool_seconds']:6.1f} s"
            f" (installs {t['install_seconds']:5.1f}, runs {t['probe_seconds']:5.1f})"
            f"  loop {doc['loop_seconds']:6.1f} s"
            f" (installs {lp['install_seconds']:5.1f}, runs {lp['probe_seconds']:5.1f})"
            f"  floor {doc['floor_seconds']:5.1f} s  tool/loop {doc['tool_vs_loop']}"
            f"  builds {len(lp['builds'])}"
        )
        print(lines[-1], flush=True)
    (out / "summary.txt").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
