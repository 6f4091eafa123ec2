"""Stand-in torch nightlies for the act rehearsal: tiny installable cp311 wheels (the stock-runner
image is Debian 12, Python 3.11) on a PEP 503 page shaped like download.pytorch.org's nightly one,
one per platform a runner kind can be (manylinux x86_64 and aarch64, as PyTorch publishes them),
so each kind's plan has its own platform's wheels to find and nothing else.

`torch.STALE_LAZY_CLONE` tells the stand-in probe whether a build is affected.
"""

from __future__ import annotations

from datetime import date
from pathlib import Path

from helpers import write_wheel

from torchbisect.bench.nightly_index import anchor, write_page

TAG = "cp311"
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_28_aarch64")


def nightly_version(day: date, cuda: str = "cu130") -> str:
    return f"2.17.0.dev{day:%Y%m%d}+{cuda}"


def standin_wheel(
    folder: Path, version: str, *, stale: bool, git: str, platform: str = PLATFORMS[0]
) -> Path:
    return write_wheel(
        folder,
        version,
        {
            "torch/__init__.py": (
                f"from . import version\n__version__ = {version!r}\nSTALE_LAZY_CLONE = {stale!r}\n"
            ),
            "torch/version.py": f"__version__ = {version!r}\ngit_version = {git!r}\n",
        },
        tag=f"{TAG}-{TAG}-{platform}",
    )


def nightly_index(
    root: Path,
    days: list[date],
    *,
    first_stale: date,
    git_versions: dict[date, str],
    cuda: str = "cu130",
) -> Path:
    """`root/<cuda>/torch/index.html` and the wheels beside it; builds from `first_stale` on
    are affected; `git_versions` are their commits on a (stand-in) pytorch `nightly` branch.
    Returns `root`, whose URL + `{cuda}/` is the index."""
    folder = root / cuda
    folder.mkdir(parents=True)
    links = []
    for day in days:
        for platform in PLATFORMS:
            whl = standin_wheel(
                folder,
                nightly_version(day, cuda),
                stale=day >= first_stale,
                git=git_versions[day],
                platform=platform,
            )
            links.append(anchor("../" + whl.name, whl.name))
    write_page(folder / "torch", links)
    return root
