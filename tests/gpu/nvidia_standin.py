"""STAND-IN FOR THE NVIDIA CONTAINER TOOLKIT on the lent H200 (test harness, not product).

The lent H200 has a GPU and its driver but no NVIDIA Container Toolkit, and nothing can be
installed there from a registry.  dockerd (20.10) registers its `nvidia` device driver, the one
that accepts `DeviceRequest(capabilities=[["gpu"]])`, only when an executable named
`nvidia-container-runtime-hook` is on its PATH; the driver then adds that hook to the container's
OCI spec as a prestart hook, with the request in the container's environment
(`NVIDIA_VISIBLE_DEVICES=<ids>|all`).  This file stands in for the toolkit's two parts:

* `hook`: installed as `nvidia-container-runtime-hook`.  It is there so that dockerd registers
  the driver.  It is never meant to run: the runtime below takes it out of every spec.  Should a
  container be started by plain runc anyway, it fails loudly instead of giving no GPU.
* `runtime`: registered with dockerd as its default runtime (like the toolkit's
  `nvidia-container-runtime`).  On `create` it edits the bundle's config.json where dockerd put the
  hook: the selected GPUs' device nodes plus nvidiactl, nvidia-uvm and nvidia-uvm-tools (nodes
  and device-cgroup rules), the driver's libraries bound read-only into
  /usr/lib/x86_64-linux-gnu, nvidia-smi read-only, and `ldconfig` run in the container before its
  process (the toolkit's update-ldcache hook; triton finds libcuda through `ldconfig -p`).
  Then it runs the real runc with the same arguments.

What it does not do (the toolkit does): MIG devices (MIG is disabled on the lent H200, so a
`MIG-…` id is refused), driver capabilities other than compute and utility, CUDA version checks.
GPU indexes are the PCI order of /proc/driver/nvidia/gpus, which is nvidia-smi's.

Usage (tests/gpu/h200_docker.sh writes both wrappers):
    nvidia_standin.py hook ...
    nvidia_standin.py runtime --runc PATH --driver-libs DIR -- RUNC_ARGS...
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
from pathlib import Path

HOOK = "nvidia-container-runtime-hook"
# The toolkit's compute + utility libraries (its "compute" and "utility" capabilities).
LIB_PREFIXES = (
    "libcuda.so",
    "libcudadebugger.so",
    "libnvidia-ml.so",
    "libnvidia-cfg.so",
    "libnvidia-ptxjitcompiler.so",
    "libnvidia-nvvm.so",
    "libnvidia-gpucomp.so",
    "libnvidia-allocator.so",
    "libnvidia-opencl.so",
    "libnvidia-pkcs11",
)
CONTROL_NODES = (
    "/dev/nvidiactl",
    "/dev/nvidia-uvm",
    "/dev/nvidia-uvm-tools",
    "/dev/nvidia-modeset",
)
LIB_DIR_IN_CONTAINER = "/usr/lib/x86_64-linux-gnu"


def gpus() -> list[tuple[str, int]]:
    """(UUID, device minor) of each GPU, in PCI bus order (nvidia-smi's index order)."""
    found = []
    root = Path("/proc/driver/nvidia/gpus")
    for bus in sorted(root.iterdir()) if root.is_dir() else []:
        info = dict(
            line.split(":", 1)
            for line in (bus / "information").read_text().splitlines()
            if ":" in line
        )
        found.append((info["GPU UUID"].strip(), int(info["Device Minor"].strip())))
    return found


def selected_minors(visible: str, inventory: list[tuple[str, int]]) -> list[int]:
    """Device minors for NVIDIA_VISIBLE_DEVICES (indexes, GPU UUIDs, `all`, `none`, `void`)."""
    visible = visible.strip()
    if visible in ("", "void", "none"):
        return []
    if visible == "all":
        return [minor for _, minor in inventory]
    minors = []
    for item in (part.strip() for part in visible.split(",")):
        if item.isdigit():
            if int(item) >= len(inventory):
                raise SystemExit(f"nvidia stand-in: no GPU {item} (this host has {len(inventory)})")
            minors.append(inventory[int(item)][1])
        elif item.startswith("GPU-"):
            match = [minor for uuid, minor in inventory if uuid == item]
            if not match:
                raise SystemExit(f"nvidia stand-in: no GPU with UUID {item}")
            minors.append(match[0])
        else:  # MIG-… and anything else: the toolkit would; this stand-in does not
            raise SystemExit(
                f"nvidia stand-in: cannot select {item!r} (only GPU indexes and "
                "GPU-… UUIDs; MIG is not supported by this stand-in)"
            )
    return minors


def _device(path: str) -> tuple[dict, dict]:
    info = os.stat(path)
    major, minor = os.major(info.st_rdev), os.minor(info.st_rdev)
    node = {
        "path": path,
        "type": "c",
        "major": major,
        "minor": minor,
        "fileMode": stat.S_IMODE(info.st_mode) or 0o666,
        "uid": 0,
        "gid": 0,
    }
    rule = {"allow": True, "type": "c", "major": major, "minor": minor, "access": "rwm"}
    return node, rule


def driver_mounts(lib_dir: Path) -> list[dict]:
    """Read-only binds of the driver's libraries (every name, links too) and nvidia-smi."""
    mounts = []
    for path in sorted(lib_dir.iterdir()):
        if path.name.startswith(LIB_PREFIXES) and path.exists():
            mounts.append(
                {
                    "destination": f"{LIB_DIR_IN_CONTAINER}/{path.name}",
                    "type": "bind",
                    "source": str(path.resolve()),
                    "options": ["rbind", "ro", "nosuid", "nodev"],
                }
            )
    smi = lib_dir.parent / "bin" / "nvidia-smi"  # the driver's, not a host wrapper script
    smi = str(smi) if smi.is_file() else shutil.which("nvidia-smi")
    if smi:
        mounts.append(
            {
                "destination": "/usr/bin/nvidia-smi",
                "type": "bind",
                "source": str(Path(smi).resolve()),
                "options": ["rbind", "ro", "nosuid", "nodev"],
            }
        )
    return mounts


def edit_spec(spec: dict, *, rootfs: Path, lib_dir: Path, inventory: list[tuple[str, int]]) -> bool:
    """Give the container what dockerd's nvidia driver asked for; False when it asked nothing."""
    hooks = spec.get("hooks") or {}
    prestart = hooks.get("prestart") or []
    ours = [h for h in prestart if os.path.basename(h.get("path", "")) == HOOK]
    if not ours:
        return False
    hooks["prestart"] = [h for h in prestart if h not in ours]
    env = spec.get("process", {}).get("env", [])
    visible = [e.split("=", 1)[1] for e in env if e.startswith("NVIDIA_VISIBLE_DEVICES=")]
    minors = selected_minors(visible[-1] if visible else "", inventory)
    if not minors:  # `void`, `none`: the container asked for no GPU after all
        spec["hooks"] = hooks
        return True
    linux = spec.setdefault("linux", {})
    nodes = linux.setdefault("devices", [])
    rules = linux.setdefault("resources", {}).setdefault("devices", [])
    paths = [f"/dev/nvidia{m}" for m in minors] + [p for p in CONTROL_NODES if os.path.exists(p)]
    for path in paths:
        node, rule = _device(path)
        nodes.append(node)
        rules.append(rule)
    mounts = driver_mounts(lib_dir)
    spec.setdefault("mounts", []).extend(mounts)
    if any(rootfs.joinpath(p).exists() for p in ("sbin/ldconfig", "usr/sbin/ldconfig")):
        # In the container, after its mounts, before its process: the driver's libraries in
        # ld.so.cache, as the toolkit's update-ldcache hook does.
        hooks.setdefault("startContainer", []).append(
            {"path": "/sbin/ldconfig", "args": ["ldconfig"]}
        )
    spec["hooks"] = hooks
    return True


def runtime(argv: list[str]) -> None:
    runc, lib_dir = argv[argv.index("--runc") + 1], Path(argv[argv.index("--driver-libs") + 1])
    args = argv[argv.index("--") + 1 :]
    if "create" in args:
        bundle = Path(args[args.index("--bundle") + 1]) if "--bundle" in args else Path.cwd()
        config = bundle / "config.json"
        spec = json.loads(config.read_text())
        rootfs = bundle / spec["root"]["path"]  # relative to the bundle, or absolute
        if edit_spec(spec, rootfs=rootfs, lib_dir=lib_dir, inventory=gpus()):
            config.write_text(json.dumps(spec))
    os.execv(runc, [runc, *args])


def main() -> None:
    if sys.argv[1:2] == ["runtime"]:
        runtime(sys.argv[2:])
    elif sys.argv[1:2] == ["hook"]:
        raise SystemExit(
            "nvidia stand-in: the hook ran, so the stand-in runtime was bypassed "
            "(dockerd's default runtime must be tests/gpu's `nvidia` wrapper)"
        )
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
