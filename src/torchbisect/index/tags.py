"""Which wheels install here: a wheel's tags against a Python ("3.12", "3.13t") and a platform.

Pure rules, no network: `compatible` filters what an index lists, `python_of` reads a wheel's
Python back, `host_platform` names this machine's platform family.  A cell id's Python part
("cp312") is `cells.python_tag`.
"""

from __future__ import annotations

import re
import sysconfig
from functools import cache

from ..cells import python_tag
from .pages import Wheel

_ARCHES = ("x86_64", "aarch64", "arm64", "universal2", "ppc64le", "s390x", "i686", "armv7l")


def compatible(wheels: list[Wheel], *, python: str, platform: str | None = None) -> list[Wheel]:
    """The wheels that install on `python` ("3.12", "3.13t", "cp312") and `platform`.

    `platform` is a wheel platform tag or a family ("linux_x86_64", "linux_aarch64", "win_amd64",
    "macosx_arm64"); None means this machine.  manylinux glibc versions are not compared.
    """
    family = platform_family(platform or host_platform())
    accepted = _accepted_pairs(python)
    return [w for w in wheels if any(
        (i, a) in accepted and platform_family(p) in (family, "any") for i, a, p in w.tags)]


@cache
def platform_family(tag: str) -> str:
    """"manylinux_2_28_x86_64" → "linux_x86_64"; "macosx_11_0_arm64" → "macosx_arm64"."""
    tag = tag.replace("-", "_").replace(".", "_")
    if tag == "any":
        return "any"
    kind = next((k for k in ("musllinux", "linux", "macosx") if k in tag), None)
    arch = next((a for a in _ARCHES if tag.endswith(a)), None)
    return f"{kind}_{arch}" if kind and arch else tag


def host_platform() -> str:
    return platform_family(sysconfig.get_platform())


def _accepted_pairs(python: str) -> set[tuple[str, str]]:
    tag = python_tag(python)
    free_threaded = tag.endswith("t")
    digits = tag[2:].rstrip("t")
    major, minor = digits[0], int(digits[1:] or 0)
    pairs = {(f"cp{digits}", tag), (f"py{digits}", "none"), (f"py{major}", "none")}
    if not free_threaded:  # neither the stable ABI nor "cpXY-none" builds load there
        pairs |= {(f"cp{digits}", "none")}
        pairs |= {(f"cp{major}{m}", "abi3") for m in range(2, minor + 1)}
    return pairs


def python_of(wheel: Wheel) -> str | None:
    """"3.12" for a cp312-cp312 wheel, "3.13t" for cp313-cp313t; None for py3/abi3 wheels."""
    match = re.fullmatch(r"cp(\d)(\d+)", wheel.python_tag)
    if not match or wheel.abi_tag in ("abi3", "none"):
        return None
    return f"{match[1]}.{match[2]}" + ("t" if wheel.abi_tag.endswith("t") else "")
