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

`builds` does this for every version of a listing and says, for each version it cannot choose a
file of, why; the answer names what it skipped from that.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from packaging.version import Version

from ..cells import python_tag
from . import cuda as cudas
from .pages import Wheel
from .tags import compatible, priority


@dataclass(frozen=True, kw_only=True)
class Builds:
    """What `builds` chose: per version (public, "2.10.0" or "2.10.0.dev20250801"), the file,
    in version order; and the versions listed without one for this runner, with why."""

    chosen: dict[str, Wheel] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)


class Chooser:
    """Chooses as pip does; remembers each unlabelled file's CUDA (one metadata read a file).

    `read` gives the metadata text of a wheel URL (cuda.read_metadata unless told); `known`
    maps URLs to the CUDA already learned of them (a lock's), which is not asked again."""

    def __init__(self, read: Callable[[str], str | None] | None = None, *,
                 known: Mapping[str, str] | None = None):
        self._read = read or cudas.read_metadata
        self._cuda: dict[str, str] = {u: c for u, c in (known or {}).items() if c}

    def cuda_of(self, wheel: Wheel) -> str:
        """What the build says its CUDA is: its label, its metadata's runtime, or "unknown"."""
        if wheel.url not in self._cuda:
            self._cuda[wheel.url] = cudas.cuda_of(wheel, self._read)
        return self._cuda[wheel.url]

    def pick(self, files: Iterable[Wheel], *, cuda: str, python: str,
             platform: str | None = None) -> Wheel | str:
        """The file of one version that is its `cuda` build on this runner, or why none is."""
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
        says = self.cuda_of(chosen)
        if says == cuda:
            return chosen
        if says == cudas.UNKNOWN:
            return (f"its wheel {chosen.filename} has no CUDA label and its metadata pins no "
                    "CUDA runtime: its CUDA is unknown")
        return f"its wheel {chosen.filename} is a {says} build (its metadata pins that CUDA)"

    def builds(self, wheels: Iterable[Wheel], *, cuda: str, python: str,
               platform: str | None = None) -> Builds:
        """For every version listed, the file `pick` chooses, or why there is none."""
        by_version: dict[str, list[Wheel]] = {}
        for wheel in wheels:
            by_version.setdefault(wheel.public_version, []).append(wheel)
        chosen, skipped = {}, {}
        for version in sorted(by_version, key=Version):
            got = self.pick(by_version[version], cuda=cuda, python=python, platform=platform)
            if isinstance(got, str):
                skipped[version] = got
            else:
                chosen[version] = got
        return Builds(chosen=chosen, skipped=skipped)


def best(files: list[Wheel], *, python: str, platform: str | None = None) -> Wheel:
    """Of files of one version that install here, the one pip installs (module docstring)."""
    return max(files, key=lambda w: (w.yanked is None,
                                     -priority(w, python=python, platform=platform),
                                     w.build, w.filename))
