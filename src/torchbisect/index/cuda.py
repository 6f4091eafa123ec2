"""Which CUDA a build is, from what the build itself says.

A torch wheel names its CUDA in its local version label (`2.10.0+cu128`).  PyPI's wheels, and so
most mirrors', carry no label: their CUDA is the runtime their core metadata pins
(`nvidia-cuda-runtime-cu12==12.1.105` is CUDA 12.1, `cu121`; from CUDA 13 on
`cuda-toolkit[…]==13.0.2`, `cu130`).  The metadata is the file an index serves beside the wheel
(PEP 658/714, `<wheel URL>.metadata`), or, for a wheel on this disk, that file or the wheel's own
`*.dist-info/METADATA`.  A build that says neither is UNKNOWN, and is said to be: it never stands
for a CUDA tag someone asked for.
"""

from __future__ import annotations

import email.parser
import email.policy
import zipfile
from collections.abc import Callable

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from ..cells import build_tag
from ..net import PAGE, NetError, request
from .pages import Wheel

UNKNOWN = "unknown"
METADATA_LIMIT = 4 * 2**20  # torch's METADATA is ~31 KB, its description included
# the requirement that pins the CUDA runtime, by CUDA generation
_RUNTIMES = ("nvidia-cuda-runtime-cu11", "nvidia-cuda-runtime-cu12", "nvidia-cuda-runtime-cu13",
             "nvidia-cuda-runtime", "cuda-toolkit")

Reader = Callable[[str], "str | None"]


def cuda_of(wheel: Wheel, read: Reader | None = None) -> str:
    """The wheel's CUDA tag ("cu121", "cpu", …): its label, else its metadata's runtime pin,
    else UNKNOWN.  `read` gives a wheel URL's metadata text (default: `read_metadata`)."""
    labelled = build_tag(wheel.version)
    if labelled:
        return labelled
    text = (read or read_metadata)(wheel.url)
    return (pinned_cuda(text) if text is not None else None) or UNKNOWN


_MAX_DIGITS = 4


def pinned_cuda(metadata: str) -> str | None:
    """"cu121" for a METADATA text that pins nvidia-cuda-runtime-cu12==12.1.105; None when it
    pins no CUDA runtime exactly (or is no metadata)."""
    message = email.parser.Parser(policy=email.policy.compat32).parsestr(metadata)
    for line in message.get_all("Requires-Dist") or ():
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if canonicalize_name(req.name) not in _RUNTIMES:
            continue
        specs = [s for s in req.specifier if s.operator in ("==", "===")]
        parts = specs[0].version.split(".") if len(specs) == 1 else []
        # a CUDA major and minor have a digit or two; thousands are no CUDA (and past 4,300
        # Python's int() refuses them: issue 53.6)
        if len(parts) >= 2 and all(p.isdigit() and len(p) <= _MAX_DIGITS for p in parts[:2]):
            return f"cu{int(parts[0])}{int(parts[1])}"
    return None


def read_metadata(url: str) -> str | None:
    """The core metadata of the wheel at `url`: the file served beside it (`.metadata`), or for
    a local wheel that file or the wheel's own METADATA; None when there is none, it is over
    METADATA_LIMIT or not text, or the index does not answer (asked once)."""
    from .fetch import local_path  # fetch.py lists pages; this reads one file beside a wheel

    path = local_path(url)
    try:
        if path is not None:
            beside = path.with_name(path.name + ".metadata")
            if beside.is_file():
                if beside.stat().st_size > METADATA_LIMIT:
                    return None
                return beside.read_bytes().decode("utf-8")
            return _inside(path)
        with request("GET", url.split("#", 1)[0] + ".metadata", deadlines=PAGE) as answer:
            body = answer.read(METADATA_LIMIT, f"the metadata of {url}")
        return body.decode("utf-8")
    except (OSError, NetError, UnicodeDecodeError, zipfile.BadZipFile):
        return None


def _inside(path) -> str | None:
    """A local wheel's `*.dist-info/METADATA`, read without unpacking the rest."""
    with zipfile.ZipFile(path) as archive:
        names = [i for i in archive.infolist()
                 if i.filename.count("/") == 1 and i.filename.endswith(".dist-info/METADATA")]
        if len(names) != 1 or names[0].file_size > METADATA_LIMIT:
            return None
        with archive.open(names[0]) as fh:
            return fh.read(METADATA_LIMIT + 1)[:METADATA_LIMIT].decode("utf-8")
