"""Which CUDA a build is, from what the build itself says.

A torch wheel names its CUDA in its local version label (`2.10.0+cu128`).  PyPI's wheels, and so
most mirrors', carry no label: their CUDA is the runtime their core metadata pins
(`nvidia-cuda-runtime-cu12==12.1.105` is CUDA 12.1, `cu121`; from CUDA 13 on
`cuda-toolkit[…]==13.0.2`, `cu130`).  The metadata is read by metadata.py: the file an index
serves beside the wheel (PEP 658/714) when it matches the page's hash, else the wheel's own
`*.dist-info/METADATA`.  A build that says neither is UNKNOWN, and is said to be, with what was
read and what was not: it never stands for a CUDA tag someone asked for, and it is never called
a build of another.
"""

from __future__ import annotations

import email.parser
import email.policy
from collections.abc import Callable
from dataclasses import dataclass

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from ..cells import build_tag
from . import metadata
from .metadata import Found
from .pages import Wheel

UNKNOWN = "unknown"
# the requirement that pins the CUDA runtime, by CUDA generation
_RUNTIMES = (
    "nvidia-cuda-runtime-cu11",
    "nvidia-cuda-runtime-cu12",
    "nvidia-cuda-runtime-cu13",
    "nvidia-cuda-runtime",
    "cuda-toolkit",
)

Reader = Callable[[Wheel], Found]  # a wheel's metadata, as metadata.read finds it


@dataclass(frozen=True, kw_only=True)
class Learned:
    """What a build says its CUDA is (a tag, or UNKNOWN) and, for an unlabelled one, how its
    metadata was found (`metadata.Found`); None for a labelled build."""

    cuda: str
    found: Found | None = None


def cuda_of(wheel: Wheel, read: Reader | None = None) -> Learned:
    """The wheel's CUDA tag ("cu121", "cpu", …): its label, else its metadata's runtime pin,
    else UNKNOWN.  `read` finds a wheel's metadata (default: `read_wheel`)."""
    labelled = build_tag(wheel.version)
    if labelled:
        return Learned(cuda=labelled)
    found = (read or read_wheel)(wheel)
    pinned = pinned_cuda(found.text) if found.text is not None else None
    return Learned(cuda=pinned or UNKNOWN, found=found)


def read_wheel(wheel: Wheel) -> Found:
    """The metadata of `wheel`, the served file checked against the hash its page declares."""
    return metadata.read(wheel.url, metadata_sha256=wheel.metadata_sha256)


def pinned_cuda(text: str) -> str | None:
    """ "cu121" for a METADATA text that pins nvidia-cuda-runtime-cu12==12.1.105; None when it
    pins no CUDA runtime exactly (or is no metadata)."""
    message = email.parser.Parser(policy=email.policy.compat32).parsestr(text)
    for line in message.get_all("Requires-Dist") or ():
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if canonicalize_name(req.name) not in _RUNTIMES:
            continue
        specs = [s for s in req.specifier if s.operator in ("==", "===")]
        parts = specs[0].version.split(".") if len(specs) == 1 else []
        if len(parts) >= 2 and _number(parts[0]) and _number(parts[1]):
            return f"cu{int(parts[0])}{int(parts[1])}"
    return None


read_metadata = metadata.read_metadata  # plan/deps.py reads a wheel's pins through this name


def _number(part: str) -> bool:
    """A CUDA version's part: a few ASCII digits (a pin of 5,000 digits is no CUDA, and int()
    would refuse it)."""
    return part.isascii() and part.isdigit() and len(part) <= 4
