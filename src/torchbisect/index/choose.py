"""The one chooser of "the file that is build V on this runner", for `plan`, nightlies and
releases alike: the file `pip install torch==V+<cuda>` (or `torch==V` from a PyPI-shaped index)
gives the user, so that a verdict is about the bytes the user gets.

For one version and one CUDA tag, among the files the index lists:

* the files that install on the runner's Python and platform (tags.py: `packaging.tags`,
  manylinux glibc compared with the runner's);
* the files whose local label is the tag exactly (`2.10.0+cu124` for cu124); when there is none,
  the unlabelled files, whose CUDA is what their metadata pins (cuda.py) — they stand for the tag
  only when the file pip would take of them says it is that CUDA;
* of those, as pip ranks the files of one version: a file not yanked before a yanked one (pip
  takes a yanked file for an `==` pin only when every file of it is yanked), then the runner's
  most preferred tag, then the highest PEP 427 build tag, compared as a number (`-10` after `-9`).

The file pip would take whose CUDA stays unknown (no label, and a metadata that could not be read
or pins no runtime) is `Unsure`: it may well be the build asked for, so it is never said to be
missing — a bisection keeps it as a candidate it cannot judge, a plan says why it has no cell.

`builds` does this for every version of a listing and says, for each version it cannot choose a
file of, why; the answer names what it skipped from that.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from packaging.version import Version

from ..cells import python_tag
from . import cuda as cudas
from .metadata import Found
from .pages import Wheel
from .tags import compatible, priority


@dataclass(frozen=True, kw_only=True)
class Unsure:
    """The file pip would install of a version, whose CUDA is not known (`why`, a sentence part
    that begins "CUDA not known: ")."""

    wheel: Wheel
    why: str


@dataclass(frozen=True, kw_only=True)
class Builds:
    """What `builds` chose: per version (public, "2.10.0" or "2.10.0.dev20250801"), the file,
    in version order; the versions whose file's CUDA is not known; and the versions listed
    without one for this runner, with why.  `told`: per chosen version whose served .metadata
    was not there or not believed, how its CUDA was read instead (a phrase for the user)."""

    chosen: dict[str, Wheel] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    unsure: dict[str, Unsure] = field(default_factory=dict)
    told: dict[str, str] = field(default_factory=dict)


class Chooser:
    """Chooses as pip does; remembers each unlabelled file's CUDA (one metadata read a file).

    `read` finds a wheel's metadata (cuda.read_wheel unless told); `known` maps URLs to the
    CUDA already learned of them (a lock's), which is not asked again."""

    def __init__(self, read: cudas.Reader | None = None, *, known: Mapping[str, str] | None = None):
        self._read = read or cudas.read_wheel
        # a lock's "unknown" is no knowledge: such a file is read again (online)
        self._cuda = {
            u: cudas.Learned(cuda=c) for u, c in (known or {}).items() if c and c != cudas.UNKNOWN
        }

    def cuda_of(self, wheel: Wheel) -> str:
        """What the build says its CUDA is: its label, its metadata's runtime, or "unknown"."""
        return self.learned(wheel).cuda

    def learned(self, wheel: Wheel) -> cudas.Learned:
        """`cuda_of`, with how the metadata was found (read once a file)."""
        if wheel.url not in self._cuda:
            self._cuda[wheel.url] = cudas.cuda_of(wheel, self._read)
        return self._cuda[wheel.url]

    def told(self, wheel: Wheel) -> str:
        """How an unlabelled file's CUDA was read when its served .metadata was not there or not
        believed, in words ("" when it was, the file is local or labelled)."""
        found = self.learned(wheel).found
        if found is None or found.text is None or not found.doubts:
            return ""
        return f"{'; '.join(found.doubts)}; its metadata was read from {found.source}"

    def pick(
        self, files: Iterable[Wheel], *, cuda: str, python: str, platform: str | None = None
    ) -> Wheel | Unsure | str:
        """The file of one version that is its `cuda` build on this runner, `Unsure` when the
        file pip would take does not say its CUDA, or why none is."""
        files = list(files)
        fit = compatible(files, python=python, platform=platform)
        if not fit:
            where = platform or "this machine"
            return f"no {python_tag(python)} wheel for {where}"
        labelled = [w for w in fit if w.local == cuda]
        if labelled:
            return best(labelled, python=python, platform=platform)
        plain = [w for w in fit if not w.local]
        if not plain:
            others = sorted({w.local for w in fit})
            return f"built for {', '.join(others)}, not {cuda}"
        chosen = best(plain, python=python, platform=platform)
        learned = self.learned(chosen)
        if learned.cuda == cuda:
            return chosen
        found = learned.found
        if learned.cuda == cudas.UNKNOWN:
            return Unsure(wheel=chosen, why=_unknown(chosen, found))
        told = self.told(chosen)
        return (
            f"its wheel {chosen.filename} is a {learned.cuda} build (its metadata pins that "
            f"CUDA{'; ' + told if told else ''})"
        )

    def builds(
        self, wheels: Iterable[Wheel], *, cuda: str, python: str, platform: str | None = None
    ) -> Builds:
        """For every version listed, the file `pick` chooses, or why there is none."""
        by_version: dict[str, list[Wheel]] = {}
        for wheel in wheels:
            by_version.setdefault(wheel.public_version, []).append(wheel)
        chosen: dict[str, Wheel] = {}
        skipped: dict[str, str] = {}
        unsure: dict[str, Unsure] = {}
        for version in sorted(by_version, key=Version):
            got = self.pick(by_version[version], cuda=cuda, python=python, platform=platform)
            if isinstance(got, str):
                skipped[version] = got
            elif isinstance(got, Unsure):
                unsure[version] = got
            else:
                chosen[version] = got
        told = {v: t for v, w in chosen.items() if (t := self.told(w))}
        return Builds(chosen=chosen, skipped=skipped, unsure=unsure, told=told)


def _unknown(wheel: Wheel, found: Found | None) -> str:
    """Why an unlabelled file's CUDA is not known, beginning "CUDA not known: "."""
    head = f"CUDA not known: its wheel {wheel.filename} has no CUDA label"
    if found is None:
        return head
    if found.text is None:
        return f"{head}, and its metadata could not be read: {found.story}"
    return f"{head}, and its metadata ({found.source}) pins no CUDA runtime"


def best(files: list[Wheel], *, python: str, platform: str | None = None) -> Wheel:
    """Of files of one version that install here, the one pip installs (module docstring)."""
    return max(
        files,
        key=lambda w: (
            w.yanked is None,
            -priority(w, python=python, platform=platform),
            w.build,
            w.filename,
        ),
    )
