"""The lent H200 only: give each carried release the libraries it needs, chosen by its own version.

Harness, not product (tests/gpu/README.md). A matrix entry names its release's environment
(h200.cumsum.matrix.yaml), but `torchbisect bisect` installs the releases it chooses itself, each
in a venv of its own, and runs them all with one environment. With this folder on PYTHONPATH,
every Python that starts finds the torch it would import (without importing it), looks its
version up in old_releases.py and, when that release needs other libraries than the process was
started with (the CUDA 12 runtime of its minor and the stand-ins for a cu12x wheel; the NCCL stub
and NVSHMEM for the CUDA 13 ones), starts itself again with them: the dynamic loader reads
LD_LIBRARY_PATH and LD_PRELOAD only when a process starts. A Python without torch, or with the
machine's own 2.11.0, is left as it is.
"""

import importlib.util
import os
import re
import sys

_MARK = "H200_RELEASE_ENV"


def _torch_version():
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(list(spec.submodule_search_locations)[0], "version.py")
    try:
        with open(path) as handle:
            match = re.search(r"^__version__\s*=\s*['\"]([^'\"+]+)", handle.read(), re.M)
    except OSError:
        return None
    return match.group(1) if match else None


def _environment(version, h):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from old_releases import MACHINE, RELEASES

    release = next((r for r in RELEASES if r.version == version), None)
    if release is None or version == "2.11.0":
        return {}
    if release.runtime != MACHINE:
        libs = [os.path.join(h, "standins", version)] + [
            os.path.join(h, "cuda", release.runtime, "nvidia", name, "lib")
            for name in ("cuda_runtime", "cuda_nvrtc", "cuda_cupti")
        ]
        rest = os.environ.get("LD_LIBRARY_PATH", "")
        return {"LD_LIBRARY_PATH": ":".join(libs + ([rest] if rest else []))}
    preload = [os.path.join(h, "libncclstub.so")]
    if version == "2.15.0":
        preload.append(os.path.join(h, "libnvshmem_host.so.3"))
    return {"LD_PRELOAD": " ".join(preload)}


def _restart():
    version = _torch_version()
    if not version or os.environ.get(_MARK) == version:
        return
    env = _environment(version, os.environ.get("H200_RELEASES", "/tmp/h200r"))
    if not env:
        return
    os.environ.update(env)
    os.environ[_MARK] = version
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, sys.orig_argv)


_restart()


def _machine_libraries():
    # A CUDA 13 release uses the machine's CUDA libraries (the nvidia-* wheels beside its own
    # torch): a venv that does not see them (the hand loop's) finds them as torch's loader does,
    # on sys.path, after the venv's own packages.
    version = _torch_version()
    if not version or (version != "2.11.0" and "LD_PRELOAD" not in _environment(version, "/")):
        return
    site = os.environ.get("MACHINE_SITE_PACKAGES", "/opt/torch/.venv/lib/python3.12/site-packages")
    if os.path.isdir(site) and site not in sys.path:
        sys.path.append(site)


_machine_libraries()


def _tool_variant():
    # the loop bench with one of the tool's steps switched off (tool_variants.py; the bench verb's
    # BENCH_VARIANTS): only in torchbisect's own processes, which apply() tells by their argv
    if os.environ.get("BENCH_TOOL_VARIANT", "shipped") == "shipped":
        return
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from tool_variants import apply

    apply()


_tool_variant()
