"""Cell identifiers: the one place that builds and reads them.

A cell id is the key of the plan, the store, the logs and the page, so the matrix and the bisection
must give one wheel one id, or neither finds the other's stored verdict.  The shapes:

    stable-2.15.0-cu132-cp312            test-2.16.0-cu132-cp312       (a release, an rc)
    nightly-20261001-cu130-cp312                                        (one build that date)
    nightly-20261001-2.17.0-cu130-cp312                                 (a date with two builds)
    stable-2.10.0-3-cu130-cp312          stable-2.3.0-unknown-cp312    (a re-spin; CUDA unsaid)
    dev-<name>   preinstalled   preinstalled-<label>-cp312              (named, not derived)
    commit-<sha12>-on-nightly-20261001-cu130-cp312        (a commit's Python on a nightly's binary)

A re-spin (a file with a PEP 427 build tag, `torch-2.10.0-3-cp312-…whl`) is another build than
the original: its build tag follows the version, so a verdict on one never stands for the other.
The CUDA part is what the build says (index/cuda.py): "unknown" when it says nothing.
A `--script` run is not a probe run of its build: its id ends in `-script-<sha12>`, so it never
stands in for the probe's verdict on the page.

The preinstalled cell's id is fixed, so the whole cell is built here too (`preinstalled_cell`),
once for the plan and the backends both.
"""

from __future__ import annotations

import fnmatch
import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .model import Cell, Channel

PREINSTALLED = "preinstalled"
COMMIT = "commit"
_BUILD = re.compile(
    r"(?P<channel>stable|test|nightly)-(?P<key>[^-]+)(?:-(?P<version>\d+(?:\.\d+)+))?"
    r"(?:-(?P<build>\d+[^-.]*))?-(?P<cuda>[^-]+)-(?P<python>cp\d+t?)(?:-(?P<variant>script-[0-9a-f]+))?"
)


@dataclass(frozen=True, kw_only=True)
class CellId:
    """A parsed id.  `key` is the version of a release, YYYYMMDD of a nightly, the name of a dev
    or preinstalled cell; `version` is set only for a nightly on a date with two builds."""

    channel: Channel
    key: str
    version: str = ""
    build: str = ""  # a re-spin's PEP 427 build tag ("3"), or ""
    cuda: str = ""
    python: str = ""  # "cp312"
    variant: str = ""  # "script-<sha12>", or ""

    @property
    def lane(self) -> tuple[str, str, str, str]:
        """What successive builds of one series share: channel, CUDA tag, Python and variant."""
        return self.channel.value, self.cuda, self.python, self.variant


_BUILD_TAG = re.compile(r"cu\d+|cpu|rocm[\d.]+|xpu")


def python_tag(python: str) -> str:
    """ "3.12" → "cp312", "3.13t" → "cp313t"; a tag is returned as is."""
    if python.startswith("cp"):
        return python
    major, _, minor = python.partition(".")
    return f"cp{major}{minor}"


def build_tag(version: str) -> str:
    """The build tag in a torch version's local label ("2.15.0+cu132" → "cu132"); "" when the
    label is none of cuNNN, cpu, rocmX.Y, xpu (an NGC image's "+git…") or there is none."""
    local = version.partition("+")[2]
    return local if _BUILD_TAG.fullmatch(local) else ""


def release(
    channel: Channel, version: str, cuda: str, python: str, probe: str = "", *, build: str = ""
) -> str:
    """`stable-2.15.0-cu132-cp312` (or `test-…`); `stable-2.10.0-3-cu130-cp312` for the file of
    build tag 3."""
    return _variant(f"{channel.value}-{version}{_build(build)}-{cuda}-{_tag(python)}", probe)


def _build(build: str) -> str:
    return f"-{build}" if build else ""


def nightly(
    day: str, cuda: str, python: str, *, bump_version: str = "", probe: str = "", build: str = ""
) -> str:
    """`nightly-20261001-cu130-cp312`; `day` is YYYY-MM-DD or YYYYMMDD.

    `bump_version` ("2.17.0", a base version) is given only when the date has two builds, around
    a version bump: both keep a cell then, and the version keeps their ids apart.
    """
    extra = (f"-{bump_version}" if bump_version else "") + _build(build)
    return _variant(f"nightly-{day.replace('-', '')}{extra}-{cuda}-{_tag(python)}", probe)


def commit(sha: str, nightly_id: str) -> str:
    """`commit-<sha12>-on-nightly-20261001-cu130-cp312`: a main-branch commit's Python files
    overlaid on that nightly's binary (`bisect --pytorch-repo`).  Not a build of its own, so
    `parse` does not read it and the page's matrix leaves it out (`is_commit`)."""
    return f"{COMMIT}-{sha[:12]}-on-{nightly_id}"


def is_commit(cell_id: str) -> bool:
    return cell_id.startswith(f"{COMMIT}-")


def dev(name: str) -> str:
    return f"dev-{name}"


def preinstalled(label: str = "", python: str = "") -> str:
    """`preinstalled` (the matrix's one), or `preinstalled-<label>-cp312` for a recorded torch."""
    if not label:
        return PREINSTALLED
    return f"{PREINSTALLED}-{re.sub(r'[^A-Za-z0-9.]+', '-', label)}-{_tag(python)}"


def preinstalled_cell(*, python: str = "", **fields: Any) -> Cell:
    """The cell of a torch already there: the matrix's `preinstalled` entry, or the interpreter's
    own torch when the plan has none.  Its version and CUDA tag are unknown until it is read
    (`backends.preinstalled.with_torch_version`); `python` only when matrix.yaml names one."""
    return Cell(
        id=PREINSTALLED, channel=Channel.PREINSTALLED, version="", cuda="", python=python, **fields
    )


def parse(cell_id: str) -> CellId:
    """The parts of an id; ValueError for text that is no cell id."""
    if match := _BUILD.fullmatch(cell_id):
        parts = match.groupdict(default="")
        return CellId(channel=Channel(parts.pop("channel")), **parts)
    if cell_id == PREINSTALLED:
        return CellId(channel=Channel.PREINSTALLED, key="")
    channel, _, name = cell_id.partition("-")
    if name and channel in (Channel.DEV.value, Channel.PREINSTALLED.value):
        return CellId(channel=Channel(channel), key=name)
    raise ValueError(f"{cell_id!r} is not a cell id (e.g. nightly-20261001-cu130-cp312)")


def _tag(python: str) -> str:
    """ "cp312" for "3.12", "3.12.3" (a full version, as a probe records it) or "cp312"."""
    return python_tag(".".join(python.split(".")[:2]))


def _variant(base: str, probe: str) -> str:
    return f"{base}-{probe.replace(':', '-')}" if probe.startswith("script:") else base


def may_match(patterns: Sequence[str], shape: str) -> bool:
    """Whether some glob of `patterns` (`--cells`) can match some id of `shape`, a glob of the ids
    an entry can produce ("stable-*-*-cp312", "nightly-20261001-*"): planning skips an entry, and
    so its index pages, only when none can.  No patterns: every shape may match."""
    return not patterns or any(_meet(tuple(_tokens(p)), tuple(_tokens(shape))) for p in patterns)


def _tokens(glob: str) -> list[str]:
    """fnmatch's tokens: "*", "?", a "[…]" set, or one character."""
    out, i = [], 0
    while i < len(glob):
        end = _set_end(glob, i) if glob[i] == "[" else -1
        out.append(glob[i : end + 1] if end != -1 else glob[i])
        i = end + 1 if end != -1 else i + 1
    return out


def _set_end(glob: str, start: int) -> int:
    j = start + 1
    j += glob[j : j + 1] == "!"
    j += glob[j : j + 1] == "]"
    return glob.find("]", j)


@functools.cache
def _meet(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    """Whether the two globs match one string in common (a star absorbs any token of the other)."""
    if not a or not b:
        return all(t == "*" for t in a + b)
    if a[0] == "*" or b[0] == "*":
        star, other = (a, b) if a[0] == "*" else (b, a)
        return _meet(star[1:], other) or _meet(star, other[1:])
    return _one_char(a[0], b[0]) and _meet(a[1:], b[1:])


def _one_char(x: str, y: str) -> bool:
    if len(x) == 1 and len(y) == 1 and "?" not in (x, y):
        return x == y
    if len(x) == 1 and x != "?":
        return fnmatch.fnmatchcase(x, y)
    if len(y) == 1 and y != "?":
        return fnmatch.fnmatchcase(y, x)
    return True  # "?" or two sets: assumed to meet (an index read too many, never one too few)
