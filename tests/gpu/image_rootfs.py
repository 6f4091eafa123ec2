"""Harness on the lent H200: the file list of an image made from the machine's own python + torch.

No registry can be reached there, so the docker backend's images are imported from this host:
its system (/usr, /etc and the merged-usr links, without the CUDA toolkit, the driver and
documentation) plus torch and the packages torch requires (read from their metadata, extras
included), taken from the interpreter running this script (a venv: /opt/torch/.venv) and put in
the site-packages of that venv's base interpreter, where an NGC image keeps its torch.  The
driver is not in the image: the toolkit (here its stand-in, nvidia_standin.py) binds it in.

Prints nothing; writes, for `tar --null --no-recursion -T LIST | docker import`:
    LIST       NUL-separated paths relative to /
    LIST.xform GNU tar --transform expression (the venv's site-packages -> the base's)
    LIST.env   the image's PATH
and reports sizes on stderr.
"""

from __future__ import annotations

import importlib.metadata as md
import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

SKIP_DIRS = re.compile(
    r"^(usr/local/cuda[^/]*|usr/local/nvidia|usr/share/(doc|man|info|locale)"
    r"|opt/nvidia|usr/lib/python3\.\d+/test|usr/lib/(jvm|llvm-[^/]*|chromium|"
    r"google-cloud-sdk))(/|$)"
)
# CUDA toolkit and driver libraries installed system-wide: the image's CUDA comes with torch's
# packages, and the driver from the container toolkit (its stand-in).
SKIP_LIBS = re.compile(
    r"^usr/lib/x86_64-linux-gnu/(libcudnn|libnccl|libcublas|libcufft|"
    r"libcurand|libcusolver|libcusparse|libnvjitlink|libnvrtc|libnpp|"
    r"libnvinfer|libcutensor|libcuda|libnvidia-|libnvcuvid|libnvoptix|"
    r"libcupti|libnvToolsExt|libcudart)"
)


def closure(root: str = "torch") -> dict[str, md.Distribution]:
    """torch and everything it requires (markers evaluated, requested extras followed)."""
    dists = {canonicalize_name(d.metadata["Name"]): d for d in md.distributions()}
    seen: dict[str, md.Distribution] = {}
    todo = [(canonicalize_name(root), frozenset())]
    while todo:
        name, extras = todo.pop()
        dist = dists.get(name)
        if dist is None or (name in seen and not extras):
            continue
        seen[name] = dist
        for line in dist.requires or []:
            req = Requirement(line)
            envs = [{"extra": e} for e in extras] or [{"extra": ""}]
            if req.marker is None or any(req.marker.evaluate(env) for env in envs):
                todo.append((canonicalize_name(req.name), frozenset(req.extras)))
    return seen


BIG: dict[str, int] = {}  # bytes per folder three levels down, for the log


def walk(top: str, out: list[str]) -> int:
    size = 0
    for dirpath, dirnames, filenames in os.walk("/" + top):
        rel = dirpath.lstrip("/")
        if SKIP_DIRS.match(rel):
            dirnames[:] = []
            continue
        out.append(rel)
        for name in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            path = f"{rel}/{name}"
            if SKIP_LIBS.match(path) or SKIP_DIRS.match(path):
                continue
            out.append(path)
            n = os.lstat("/" + path).st_size
            size += n
            key = "/".join(path.split("/")[:3])
            BIG[key] = BIG.get(key, 0) + n
        dirnames[:] = [d for d in dirnames if not os.path.islink(os.path.join(dirpath, d))]
    return size


def main() -> None:
    listing = Path(sys.argv[1])
    extra = sys.argv[2:]  # more host folders to include whole (the NCCL stub's)
    site = Path(sysconfig.get_paths()["purelib"])
    # the base interpreter's first site folder (Debian: /usr/local/lib/python3.X/dist-packages)
    base_site = subprocess.run(
        [sys._base_executable, "-c", "import site; print(site.getsitepackages()[0])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    paths: list[str] = []
    system = 0
    base = sys.base_prefix.lstrip("/")
    tops = ["bin", "sbin", "lib", "lib64", "etc", "usr", *extra]
    if not base.startswith("usr"):  # a standalone python (uv's, say) outside the system
        tops.append(base)
    for top in tops:
        if os.path.islink("/" + top):
            paths.append(top)
        elif os.path.isdir("/" + top):
            system += walk(top, paths)
    own = base_site.lstrip("/")
    paths = [p for p in paths if p != own and not p.startswith(own + "/")]
    paths.append("tmp")
    torch_size, names = 0, []
    rel_site = str(site).lstrip("/")
    parents = set()
    for name, dist in sorted(closure().items()):
        names.append(f"{name}=={dist.version}")
        for file in dist.files or []:
            if ".." in file.parts:
                continue  # console scripts outside site-packages
            full = site / file
            if full.exists() or full.is_symlink():
                paths.append(f"{rel_site}/{file}")
                torch_size += full.lstat().st_size
                parents.update(
                    str(p)
                    for p in Path(f"{rel_site}/{file}").parents
                    if str(p).startswith(rel_site + "/")
                )
    paths += sorted(parents)
    paths.append(rel_site)
    listing.write_bytes(b"\0".join(p.encode() for p in paths) + b"\0")
    Path(f"{listing}.xform").write_text(
        f"s,^{rel_site.replace('.', chr(92) + '.')},{base_site.lstrip('/')},S"
    )
    bin_dir = os.path.join(sys.base_prefix, "bin")
    Path(f"{listing}.env").write_text(
        f"PATH={bin_dir}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    )
    print(
        f"image: system {system / 1e9:.2f} GB, torch and its requirements "
        f"{torch_size / 1e9:.2f} GB ({len(names)} packages: {' '.join(names)}); "
        f"site-packages {site} -> {base_site}; base python {sys.base_prefix}",
        file=sys.stderr,
    )
    for key, n in sorted(BIG.items(), key=lambda kv: -kv[1])[:12]:
        print(f"  {n / 1e6:9.0f} MB  /{key}", file=sys.stderr)


if __name__ == "__main__":
    main()
