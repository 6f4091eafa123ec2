"""Stand-in torch nightlies for the act rehearsal: tiny installable cp311 wheels (the stock-runner
image is Debian 12, Python 3.11) on a PEP 503 page shaped like download.pytorch.org's nightly one.

`torch.STALE_LAZY_CLONE` tells the stand-in probe whether a build is affected.
"""

from __future__ import annotations

import base64
import hashlib
import zipfile
from datetime import date
from pathlib import Path

TAG = "cp311"
PLATFORM = "manylinux_2_28_x86_64"


def nightly_version(day: date, cuda: str = "cu130") -> str:
    return f"2.17.0.dev{day:%Y%m%d}+{cuda}"


def standin_wheel(folder: Path, version: str, *, stale: bool, git: str) -> Path:
    name = f"torch-{version}-{TAG}-{TAG}-{PLATFORM}.whl"
    info = f"torch-{version}.dist-info"
    files = {
        "torch/__init__.py": (f"from . import version\n__version__ = {version!r}\n"
                              f"STALE_LAZY_CLONE = {stale!r}\n"),
        "torch/version.py": f"__version__ = {version!r}\ngit_version = {git!r}\n",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n",
        f"{info}/WHEEL": ("Wheel-Version: 1.0\nGenerator: torchbisect-tests\n"
                          f"Root-Is-Purelib: false\nTag: {TAG}-{TAG}-{PLATFORM}\n"),
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        record.append(f"{path},sha256={digest.decode()},{len(text.encode())}")
    files[f"{info}/RECORD"] = "\n".join([*record, f"{info}/RECORD,,"]) + "\n"
    with zipfile.ZipFile(folder / name, "w") as whl:
        for path, text in files.items():
            whl.writestr(path, text)
    return folder / name


def nightly_index(root: Path, days: list[date], *, first_stale: date,
                  git_versions: dict[date, str], cuda: str = "cu130") -> Path:
    """`root/<cuda>/torch/index.html` and the wheels beside it; builds from `first_stale` on
    are affected; `git_versions` are their commits on a (stand-in) pytorch `nightly` branch.
    Returns `root`, whose URL + `{cuda}/` is the index."""
    folder = root / cuda
    (folder / "torch").mkdir(parents=True)
    links = []
    for day in days:
        whl = standin_wheel(folder, nightly_version(day, cuda), stale=day >= first_stale,
                            git=git_versions[day])
        href = "../" + whl.name.replace("+", "%2B")
        links.append(f'<a href="{href}">{whl.name}</a><br/>')
    (folder / "torch" / "index.html").write_text(
        "<!DOCTYPE html>\n<html><body>\n<h1>Links for torch</h1>\n" + "\n".join(links)
        + "\n</body></html>\n")
    return root
