"""Which wheels install here: a wheel's tags against a Python ("3.12", "3.13t") and a platform.

Pure rules, no network, through `packaging.tags` as pip and uv read them: `supported` is the
ordered list of tags a runner accepts (most preferred first, the order pip ranks files by),
`compatible` filters what an index lists, `python_of` reads a wheel's Python back,
`host_platform` names this machine's platform family and `runner_platform` its own tag, glibc
included.  A platform is one of:

* None: this machine, as `packaging.tags.platform_tags()` reads it (its glibc bounds manylinux);
* a precise tag, "manylinux_2_17_x86_64" or "manylinux2014_x86_64": a runner with that glibc,
  which accepts manylinux wheels up to it (a `manylinux_2_28` wheel does not install on 2.17);
* a family, "linux_x86_64": a runner of that CPU whose glibc is not known (every manylinux
  wheel of the family is accepted, as nothing says which would not load).

A cell id's Python part ("cp312") is `cells.python_tag`.
"""

from __future__ import annotations

import re
import sysconfig
from collections.abc import Iterable
from functools import cache

from packaging import tags as ptags
from packaging.tags import Tag

from ..cells import python_tag
from .pages import Wheel

_ARCHES = ("x86_64", "aarch64", "arm64", "universal2", "ppc64le", "s390x", "i686", "armv7l")
_LEGACY = {"manylinux1": 5, "manylinux2010": 12, "manylinux2014": 17}  # PEP 600's aliases
_NEWEST_GLIBC = 60  # "any glibc": every manylinux_2_N tag up to here is accepted
_MANYLINUX = re.compile(
    r"manylinux_(\d+)_(\d+)_(\w+)|(manylinux1|manylinux2010|manylinux2014)_"
    r"(\w+)"
)


def compatible(wheels: Iterable[Wheel], *, python: str, platform: str | None = None) -> list[Wheel]:
    """The wheels that install on `python` ("3.12", "3.13t", "cp312") and `platform`."""
    accepted = set(supported(python, platform))
    return [w for w in wheels if not w.tags.isdisjoint(accepted)]


def priority(wheel: Wheel, *, python: str, platform: str | None = None) -> int:
    """How much the runner prefers `wheel`'s best tag: 0 is the most preferred (pip's order);
    a wheel that does not install here ranks after every one that does."""
    order = _ranks(python, platform)
    return min((order[t] for t in wheel.tags if t in order), default=len(order))


@cache
def supported(python: str, platform: str | None = None) -> tuple[Tag, ...]:
    """The tags a runner of `python` on `platform` accepts, most preferred first."""
    tag = python_tag(python)
    free_threaded = tag.endswith("t")
    digits = tag[2:].rstrip("t")
    version = (int(digits[0]), int(digits[1:] or 0))
    platforms = _platforms(platform)
    abis = [f"cp{digits}t" if free_threaded else f"cp{digits}"]
    cpython = ptags.cpython_tags(version, abis=abis, platforms=platforms)
    generic = ptags.compatible_tags(version, interpreter=f"cp{digits}", platforms=platforms)
    found = list(dict.fromkeys([*cpython, *generic]))
    if free_threaded:  # neither the stable ABI nor "cpXY-none" builds load there
        found = [t for t in found if t.abi not in ("abi3", "none") or t.interpreter[:2] == "py"]
    return tuple(found)


@cache
def _ranks(python: str, platform: str | None) -> dict[Tag, int]:
    return {t: i for i, t in enumerate(supported(python, platform))}


def _platforms(platform: str | None) -> list[str]:
    if platform is None:
        return list(ptags.platform_tags())
    tag = platform.replace("-", "_").replace(".", "_")
    found = _MANYLINUX.fullmatch(tag)
    if found:
        glibc = int(found[2]) if found[1] else _LEGACY[found[4]]
        arch = found[3] or found[5]
        return [*_manylinux(arch, glibc), f"linux_{arch}"]
    family = platform_family(tag)
    kind, _, arch = family.partition("_")
    if kind == "linux" and arch:
        return [*_manylinux(arch, _NEWEST_GLIBC), f"linux_{arch}"]
    if kind == "musllinux" and arch:
        return [f"musllinux_1_{m}_{arch}" for m in range(9, -1, -1)] + [f"linux_{arch}"]
    if kind == "macosx" and arch and tag == family:  # no version given: every macOS
        return list(ptags.mac_platforms((99, 0), arch))
    if kind == "macosx" and arch:
        numbers = re.search(r"macosx_(\d+)_(\d+)_", tag)
        version = (int(numbers[1]), int(numbers[2])) if numbers else (99, 0)
        return list(ptags.mac_platforms(version, arch))
    return [tag]


def _manylinux(arch: str, glibc: int) -> list[str]:
    """manylinux tags of glibc 2.`glibc` and older, newest first, PEP 600's aliases at theirs."""
    out = []
    for minor in range(glibc, 4, -1):
        out.append(f"manylinux_2_{minor}_{arch}")
        out += [f"{alias}_{arch}" for alias, at in _LEGACY.items() if at == minor]
    return out


_PLATFORM = re.compile(
    rf"(?:(?:many|musl)linux_\d+_\d+|manylinux(?:1|2010|2014)|linux|macosx_\d+_\d+)"
    rf"_(?:{'|'.join(_ARCHES)})|win32|win_amd64|win_arm64"
)


def is_platform_tag(tag: str) -> bool:
    """Whether `tag` is a wheel platform tag (PEP 425/600/656) of an architecture torch ships:
    "manylinux_2_28_x86_64", "linux_aarch64", "macosx_11_0_arm64", "win_amd64"."""
    return _PLATFORM.fullmatch(tag) is not None


@cache
def platform_family(tag: str) -> str:
    """ "manylinux_2_28_x86_64" → "linux_x86_64"; "macosx_11_0_arm64" → "macosx_arm64"."""
    tag = tag.replace("-", "_").replace(".", "_")
    if tag == "any":
        return "any"
    kind = next((k for k in ("musllinux", "linux", "macosx") if k in tag), None)
    arch = next((a for a in _ARCHES if tag.endswith(a)), None)
    return f"{kind}_{arch}" if kind and arch else tag


def host_platform() -> str:
    """This machine's platform family ("linux_x86_64"), as runners.yaml names a kind's."""
    return platform_family(sysconfig.get_platform())


def runner_platform() -> str:
    """This machine's own platform tag, its glibc included ("manylinux_2_36_x86_64"): what
    `plan` resolves for when no --platform is given."""
    return next(
        (p for p in ptags.platform_tags() if p.startswith(("manylinux_", "musllinux_"))),
        host_platform(),
    )


def python_of(wheel: Wheel) -> str | None:
    """ "3.12" for a cp312-cp312 wheel, "3.13t" for cp313-cp313t; None for py3/abi3 wheels."""
    for tag in wheel.tags:
        match = re.fullmatch(r"cp(\d)(\d+)", tag.interpreter)
        if match and tag.abi not in ("abi3", "none"):
            return f"{match[1]}.{match[2]}" + ("t" if tag.abi.endswith("t") else "")
    return None
