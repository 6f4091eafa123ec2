"""Development machine: what h200_releases.sh carries to the lent H200, in `.gpu-carry/` (ignored).

Harness, not product (README.md here).

    python3 tests/gpu/h200_releases_pack.py setup WORK    # .gpu-carry/setup/: tools and wheels
    python3 tests/gpu/h200_releases_pack.py stream WORK [--final]

WORK holds what the download and packing steps made (README.md: "Every release since 2.2.2"):
`wheels/` (PyPI's torch wheels), `aux/` (the CUDA runtime and Triton wheels), `packed/<version>/`
and `packed_triton/<version>/` (wheel_delta.py pack). `stream` appends every bundle that is ready,
in `old_releases.stream()` order, to one byte stream (a JSON header line, then a tar, per bundle)
and cuts it into parts of PART bytes, `.gpu-carry/sNNN/part`, one per device call. Re-running it
adds what became ready; `--final` also cuts the last, short part.
"""

import argparse
import glob
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from old_releases import RUNTIMES, stream  # noqa: E402

PART = 54 * 2**20  # the repository (~8 MiB in 2026-12) rides along within the call's 64 MiB
CARRY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".gpu-carry")
TOOLS = {
    "bin": ("/usr/bin/zstd", "/usr/bin/zip", "/usr/bin/x86_64-linux-gnu-readelf"),
    "lib": (
        "libz.so.1",
        "liblz4.so.1",
        "liblzma.so.5",
        "libbz2.so.1.0",
        "libzstd.so.1",
        "libctf-nobfd.so.0",
        "libsframe.so.0",
    ),
}
DEPS = (
    "docker==7.1.0",
    "pydantic==2.14.4",
    "pydantic-core==2.50.5",
    "annotated-types==0.8.0",
    "typing-inspection==0.4.5",
    "typing-extensions==4.16.0",
    "uv==0.13.9",
    "platformdirs==4.14.9",
    "argcomplete==3.7.2",
)


def setup(work):
    """Debian's zstd, Info-ZIP zip and readelf (with the libraries they need, zlib 1.2.13 among
    them: the deflate the wheels were made with) and torchbisect's dependencies the H200 lacks."""
    dest = os.path.join(CARRY, "setup")
    for kind, names in TOOLS.items():
        os.makedirs(os.path.join(dest, "tools", kind), exist_ok=True)
        for name in names:
            source = name if kind == "bin" else os.path.join("/lib/x86_64-linux-gnu", name)
            target = os.path.join(
                dest, "tools", kind, os.path.basename(source).replace("x86_64-linux-gnu-", "")
            )
            shutil.copy2(os.path.realpath(source), target)
    nvshmem = glob.glob(os.path.join(work, "aux", "nvidia_nvshmem_cu13-*.whl"))
    if nvshmem:  # 2.15.0 links libnvshmem_host.so.3; the rest of the 135 MB wheel stays here
        with zipfile.ZipFile(nvshmem[0]) as wheel:
            data = wheel.read("nvidia/nvshmem/lib/libnvshmem_host.so.3")
        lib = os.path.join(CARRY, "nvshmem")  # its own call: with the tools it passes 64 MiB
        os.makedirs(lib, exist_ok=True)
        subprocess.run(
            ["zstd", "-q", "-19", "-f", "-", "-o", os.path.join(lib, "libnvshmem_host.so.3.zst")],
            input=data,
            check=True,
        )
    whl = os.path.join(dest, "whl")
    os.makedirs(whl, exist_ok=True)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "-q",
            "--no-deps",
            "--only-binary=:all:",
            "--python-version",
            "3.12",
            "--implementation",
            "cp",
            "--platform",
            "manylinux_2_28_x86_64",
            "--platform",
            "manylinux_2_17_x86_64",
            "--platform",
            "manylinux2014_x86_64",
            "-d",
            whl,
            *DEPS,
        ],
        check=True,
        env={**os.environ, "PIP_CONFIG_FILE": os.devnull},
    )
    subprocess.run(["du", "-sh", dest], check=True)


def _bundle_files(work, kind, name):
    if kind == "runtime":
        files = []
        for spec in RUNTIMES[name]:
            package, version = spec.split("==")
            files += glob.glob(
                os.path.join(work, "aux", package.replace("-", "_") + f"-{version}-*.whl")
            )
        return files if len(files) == len(RUNTIMES[name]) else None
    folder = os.path.join(work, "packed" if kind == "torch" else "packed_triton", name)
    if not os.path.exists(os.path.join(folder, "manifest.json")):
        return None  # still being packed
    return sorted(os.path.join(folder, n) for n in os.listdir(folder))


def _tar(files):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for path in files:
            archive.add(path, arcname=os.path.basename(path))
    return buffer.getvalue()


def extend(work, final):
    os.makedirs(CARRY, exist_ok=True)
    state_path = os.path.join(CARRY, "stream.json")
    state = {"bundles": [], "parts": 0}
    if os.path.exists(state_path):
        with open(state_path) as handle:
            state = json.load(handle)
    data_path = os.path.join(CARRY, "stream.bin")
    for kind, name in stream():
        key = f"{kind}-{name}"
        if key in state["bundles"]:
            continue
        files = _bundle_files(work, kind, name)
        if files is None:
            break
        body = _tar(files)
        header = (
            json.dumps(
                {
                    "kind": kind,
                    "name": name,
                    "bytes": len(body),
                    "sha256": hashlib.sha256(body).hexdigest(),
                }
            ).encode()
            + b"\n"
        )
        with open(data_path, "ab") as out:
            out.write(header + body)
        state["bundles"].append(key)
        print(f"{key}: {len(body) / 2**20:.0f} MiB")
    size = os.path.getsize(data_path) if os.path.exists(data_path) else 0
    with open(data_path, "rb") as source:
        while (state["parts"] + 1) * PART <= size or (final and state["parts"] * PART < size):
            folder = os.path.join(CARRY, f"s{state['parts']:03d}")
            os.makedirs(folder, exist_ok=True)
            source.seek(state["parts"] * PART)
            with open(os.path.join(folder, "part.tmp"), "wb") as part:
                part.write(source.read(PART))
            os.replace(os.path.join(folder, "part.tmp"), os.path.join(folder, "part"))
            state["parts"] += 1
    state["final"] = bool(final and state["parts"] * PART >= size)
    with open(state_path, "w") as handle:
        json.dump(state, handle)
    print(
        f"{state['parts']} parts ({size / 2**20:.0f} MiB in the stream)"
        + (", the last one cut" if state["final"] else "")
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("verb", choices=("setup", "stream"))
    parser.add_argument("work")
    parser.add_argument("--final", action="store_true")
    args = parser.parse_args(argv)
    if args.verb == "setup":
        setup(args.work)
    else:
        extend(args.work, args.final)
    return 0


if __name__ == "__main__":
    sys.exit(main())
