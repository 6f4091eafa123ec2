"""Stand-ins for the CUDA libraries a torch wheel links but the probe never calls (harness only).

The lent H200 has CUDA 13's libraries and no network; a cu12x torch wheel links cuBLAS, cuDNN,
cuFFT, cuRAND, cuSOLVER, cuSPARSE, NCCL, NVTX, ... of CUDA 12. None of them is called by the
probe's cases, but the dynamic loader must find each one, with the symbol versions torch's
libraries require. For each such library this builds a stand-in: the library's soname, its
version nodes (from the wheel's `.gnu.version_r`) and every symbol the wheel takes from it (its
`.dynsym`), each function writing its name to stderr and aborting, so a call is a crashed case,
never a verdict. Only cuDNN's version getters answer (torch's start-up and the probe's
environment report ask them): the version the wheel pins.

    python3 tests/gpu/standins.py WHEEL OUT --cudnn 9.1.0.70 [--provided DIR ...]

Runs where the wheel is (needs readelf and gcc); OUT gets one `.so` per library, put first on
LD_LIBRARY_PATH there. Libraries found in the wheel itself or in a --provided folder (the carried
CUDA runtime, NVRTC, CUPTI) get no stand-in.  Stdlib only.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
import zipfile

# What a stand-in may stand in for: sonames of NVIDIA's libraries, and the prefixes of the
# unversioned symbols each exports (never the driver's `cu*`: that is libcuda.so.1, the real one).
LIBRARIES = (
    ("libcublasLt", ("cublasLt",)),
    ("libcublas", ("cublas",)),
    ("libcudnn", ("cudnn",)),
    ("libcufft", ("cufft",)),
    ("libcurand", ("curand",)),
    ("libcusolver", ("cusolver",)),
    ("libcusparseLt", ("cusparseLt",)),
    ("libcusparse", ("cusparse",)),
    ("libnccl", ("nccl", "pncclComm", "pnccl")),
    ("libnvshmem_host", ("nvshmem",)),
    ("libcufile", ("cuFile",)),
    ("libnvToolsExt", ("nvtx",)),
    ("libnvJitLink", ("nvJitLink",)),
)
ELF = re.compile(r"(^|/)[^/]+\.so(\.[0-9]+)*$")
NEEDED = re.compile(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]")
VERNEED_FILE = re.compile(r"File: (\S+)")
VERNEED_NAME = re.compile(r"Name: (\S+)")
ANSWERS = """
int cudnnGetVersion(void) { return %(version)d; }
int cudnnGetCudartVersion(void) { return %(cudart)d; }
int cudnnGetProperty(int type, int *value) {
  static const int parts[3] = {%(major)d, %(minor)d, %(patch)d};
  if (type < 0 || type > 2 || !value) return 3; /* CUDNN_STATUS_BAD_PARAM */
  *value = parts[type];
  return 0;
}
"""


def _family(soname):
    for family, prefixes in LIBRARIES:
        if soname == family + ".so" or soname.startswith(family + ".so."):
            return family, prefixes
    return None, ()


def _readelf(flag, path):
    return subprocess.run(
        ["readelf", "-W", flag, path],
        stdout=subprocess.PIPE,
        check=True,
        text=True,
        errors="replace",
    ).stdout


def _needs(path):
    """(sonames this library needs, {version node: soname}, [(symbol, version, kind)] undefined)."""
    needed = NEEDED.findall(_readelf("-d", path))
    versions, current = {}, None
    in_needs = False
    for line in _readelf("-V", path).splitlines():
        if line.startswith("Version needs section"):
            in_needs = True
        elif line.startswith("Version") and "section" in line:
            in_needs = False
        elif in_needs:
            file_match = VERNEED_FILE.search(line)
            if file_match:
                current = file_match.group(1)
                continue
            name_match = VERNEED_NAME.search(line)
            if name_match and current:
                versions[name_match.group(1)] = current
    undefined = []
    for line in _readelf("--dyn-syms", path).splitlines():
        fields = line.split()
        if len(fields) < 8 or fields[6] != "UND" or fields[4] == "WEAK":
            continue
        name, _, version = fields[7].partition("@")
        undefined.append((name, version.split(" ")[0].lstrip("@"), fields[3]))
    return needed, versions, undefined


def _provided(folders):
    names = set()
    for folder in folders:
        for _, _, files in os.walk(folder):
            names.update(files)
    return names


def plan(libs, provided):
    """soname -> {"versions": set, "symbols": {name: (version or "", kind)}} for the stand-ins."""
    own = {os.path.basename(p) for p in libs}
    standins, unversioned = {}, []
    for path in libs:
        needed, versions, undefined = _needs(path)
        for soname in needed:
            if soname in own or soname in provided or not _family(soname)[0]:
                continue
            standins.setdefault(soname, {"versions": set(), "symbols": {}})
        for name, version, kind in undefined:
            soname = versions.get(version)
            if soname in standins:
                standins[soname]["versions"].add(version)
                standins[soname]["symbols"][name] = (version, kind)
            elif not version:
                unversioned.append((name, kind))
    for name, kind in unversioned:
        for soname, entry in standins.items():
            if any(name.startswith(prefix) for prefix in _family(soname)[1]):
                entry["symbols"].setdefault(name, ("", kind))
                break
    return standins


def _source(soname, entry, cudnn):
    lines = [
        "#include <stdio.h>",
        "#include <stdlib.h>",
        "#include <unistd.h>",
        f"/* stand-in for {soname}, made by tests/gpu/standins.py: never a real call */",
    ]
    answered = set()
    if soname.startswith("libcudnn.") and cudnn:
        major, minor, patch = (list(cudnn) + [0, 0, 0])[:3]
        number = (
            major * 1000 + minor * 100 + patch if major < 9 else major * 10000 + minor * 100 + patch
        )
        lines.append(
            ANSWERS
            % {"version": number, "cudart": 12000, "major": major, "minor": minor, "patch": patch}
        )
        answered = {"cudnnGetVersion", "cudnnGetCudartVersion", "cudnnGetProperty"}
    for name, (_, kind) in sorted(entry["symbols"].items()):
        if name in answered:
            continue
        if kind == "OBJECT":
            lines.append(f"char {name}[256];")
            continue
        message = f"torchbisect GPU harness: {name} called in the stand-in for {soname}\\n"
        lines.append(
            f'void {name}(void) {{ static const char m[] = "{message}"; '
            f"write(2, m, sizeof m - 1); abort(); }}"
        )
    return "\n".join(lines) + "\n"


def _script(entry):
    by_version = {}
    for name, (version, _) in entry["symbols"].items():
        by_version.setdefault(version, []).append(name)
    nodes = []
    for version in sorted(v for v in entry["versions"] if v):
        names = "".join(f" {n};" for n in sorted(by_version.get(version, [])))
        nodes.append(f"{version} {{ global:{names} }};")
    if not nodes:
        return None
    plain = "".join(f" {n};" for n in sorted(by_version.get("", [])))
    nodes[0] = nodes[0].replace("global:", f"global:{plain}", 1)
    return "\n".join(nodes) + "\n"


def build(standins, out, cudnn):
    os.makedirs(out, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        for soname, entry in sorted(standins.items()):
            source = os.path.join(scratch, soname + ".c")
            with open(source, "w") as handle:
                handle.write(_source(soname, entry, cudnn))
            argv = [
                "gcc",
                "-shared",
                "-fPIC",
                "-O0",
                "-w",
                f"-Wl,-soname,{soname}",
                "-o",
                os.path.join(out, soname),
                source,
            ]
            script = _script(entry)
            if script:
                path = os.path.join(scratch, soname + ".map")
                with open(path, "w") as handle:
                    handle.write(script)
                argv.insert(1, f"-Wl,--version-script={path}")
            subprocess.run(argv, check=True)
            print(
                f"{soname}: {len(entry['symbols'])} symbols, versions "
                f"{', '.join(sorted(v for v in entry['versions'] if v)) or 'none'}"
            )


def _extract(wheel, folder):
    with zipfile.ZipFile(wheel) as archive:
        names = [n for n in archive.namelist() if n.startswith("torch/") and ELF.search(n)]
        for name in names:
            archive.extract(name, folder)
    return [os.path.join(folder, n) for n in names]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("wheel")
    parser.add_argument("out")
    parser.add_argument("--cudnn", help="the cuDNN version the wheel pins, e.g. 9.1.0.70")
    parser.add_argument(
        "--provided",
        action="append",
        default=[],
        help="a folder of libraries that will be there (no stand-in for them)",
    )
    args = parser.parse_args(argv)
    cudnn = [int(p) for p in args.cudnn.split(".")[:3]] if args.cudnn else None
    with tempfile.TemporaryDirectory() as scratch:
        libs = _extract(args.wheel, scratch)
        build(plan(libs, _provided(args.provided)), args.out, cudnn)
    return 0


if __name__ == "__main__":
    sys.exit(main())
