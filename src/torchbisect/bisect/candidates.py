"""The ordered list of builds a bisection searches: one nightly per date between the two given
ends, or, when both ends are release versions (`--good 2.12.0 --bad 2.15.0`), every release
between them ("which release first had it?").

Pure: it takes the builds the chooser (index/choose.py) picked from the index — the file of each
version that pip would install on this runner for the CUDA tag — and the `--good`/`--bad` flags,
and returns candidates in order plus notes for the user.  An end whose date has no nightly widens
to the nearest date that has one, and says so; a release listed without a build for this runner
is missing, with why; a yanked file is probed (pip installs it for an `==` pin) and said to be.
A release whose file's CUDA is not known (choose.py's `Unsure`) is never missing: it stays a
candidate that is not probed (`unjudged`), so the search reads it as unknown and an answer next
to it is not exact.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from typing import Any

from packaging.version import InvalidVersion, Version

from .. import cells
from ..errors import ConfigError
from ..model import Cell, Channel

UNKNOWN = "unknown"  # index/cuda.py's word for a build that does not say its CUDA

_DATE = re.compile(r"^(\d{4})-?(\d{2})-?(\d{2})$")


@dataclass(frozen=True, kw_only=True)
class Candidate:
    """One nightly the search may probe: its date, version, wheel and the cell that tests it."""

    date: str  # YYYY-MM-DD; "" for a release
    version: str
    wheel: Any  # torchbisect.index.Wheel
    cell: Cell
    commit: str = ""  # a main-branch commit overlaid on this nightly's binary (bisect/narrow.py)
    # why it cannot be judged without a run ("CUDA not known: …"): unknown, never probed
    unjudged: str = ""

    @property
    def build(self) -> str:
        """The wheel's PEP 427 build tag ("3" for a re-spin), "" for none."""
        return getattr(self.wheel, "build_label", "")

    @property
    def yanked(self) -> str | None:
        """The index's reason when the file is yanked ("" for none given); None when not."""
        return getattr(self.wheel, "yanked", None)

    @property
    def key(self) -> str:
        """What the user calls it: a commit's short sha, a nightly's date, a release's version."""
        return self.commit[:12] or self.date or self.version

    @property
    def label(self) -> str:
        if self.commit:
            return f"commit {self.commit[:12]} on the {self.date} nightly's binary"
        named = self.version + (f", build {self.build}" if self.build else "")
        return f"the {self.date} nightly ({named})" if self.date else f"release {named}"


@dataclass(frozen=True, kw_only=True)
class CandidateList:
    candidates: tuple[Candidate, ...]
    notes: tuple[str, ...] = ()  # widened ends, dropped duplicate versions, skipped releases
    # dates inside the range with no nightly on the index; releases listed there without a
    # build for this runner (their reasons are in `notes`)
    missing: tuple[str, ...] = ()

    def between(self, first: str, last: str) -> CandidateList:
        """The nightlies from `first` to `last` (dates, both included); the notes were said."""
        return CandidateList(
            candidates=tuple(c for c in self.candidates if first <= c.date <= last),
            missing=tuple(d for d in self.missing if first < d < last),
        )


def parse_end(text: str, flag: str) -> str:
    """YYYY-MM-DD from `2025-08-01`, `20250801`, `3 days ago` or `2.10.0.dev20250801+cu128`."""
    text = text.strip()
    match = _DATE.match(text) or _DATE.match(_relative(text) or _nightly_stamp(text))
    if not match:
        raise ConfigError(
            f"{flag} {text!r} is neither a date (YYYY-MM-DD or YYYYMMDD) nor a "
            "nightly version such as 2.10.0.dev20250801; a release such as 2.12.0 "
            "is accepted when both ends are releases"
        )
    try:
        return date(*(int(g) for g in match.groups())).isoformat()
    except ValueError:
        raise ConfigError(f"{flag} {text!r} is not a valid calendar date") from None


def release_of(text: str) -> str | None:
    """ "2.12.0" for a final release version (a local label such as +cu130 is dropped)."""
    try:
        version = Version(text.strip())
    except (InvalidVersion, ValueError):  # a number past Python's 4,300 digits is no release
        return None
    if version.is_prerelease or version.is_devrelease or len(version.release) < 2:
        return None
    return version.public


def build_release_candidates(
    builds: Any,
    *,
    older: str,
    newer: str,
    older_flag: str,
    newer_flag: str,
    cell_template: Cell,
    origin: Mapping[str, tuple[str, str]] | None = None,
) -> CandidateList:
    """Every final release from `older` to `newer` that the index has for this build.

    `builds` is the chooser's answer (`index.choose.Builds`) over the index's final releases:
    the file of each version for this runner, and why the others have none. `origin` gives, per
    version, the CUDA tag and index its file was chosen for when they are not the template's
    (`--cuda auto`)."""
    check_order(
        Version(older), Version(newer), shown=(older, newer), older_flag=older_flag, unit="release"
    )
    chosen, skipped = builds.chosen, builds.skipped
    unsure = builds.unsure
    for end, flag in ((older, older_flag), (newer, newer_flag)):
        if end in chosen:
            continue
        if end in unsure:
            raise ConfigError(
                f"{flag} {end} cannot be judged as the {cell_template.cuda} build "
                f"for Python {cell_template.python}: {unsure[end].why}; give an "
                "end whose CUDA is known, or --cuda with its label"
            )
        if end in skipped:
            raise ConfigError(
                f"{flag} {end} has no build for this runner on the index "
                f"({cell_template.cuda}, Python {cell_template.python}): "
                f"{skipped[end]}"
            )
        near = ", ".join(sorted(chosen, key=Version)[-5:]) or "none"
        raise ConfigError(
            f"{flag} {end} is not on the index for {cell_template.cuda} / "
            f"Python {cell_template.python}; releases there include {near}"
        )
    inside = lambda v: Version(older) <= Version(v) <= Version(newer)  # noqa: E731
    origin = origin or {}
    told = builds.told
    cands = tuple(
        sorted(
            [
                _release_candidate(chosen[v], v, _for(cell_template, origin.get(v)))
                for v in filter(inside, chosen)
            ]
            + [_unsure_candidate(unsure[v], v, cell_template) for v in filter(inside, unsure)],
            key=lambda c: Version(c.wheel.public_version),
        )
    )
    missing = tuple(sorted(filter(inside, skipped), key=Version))
    notes = [f"release {v} is left out: {skipped[v]}" for v in missing]
    notes += [
        f"release {c.wheel.public_version} stays a candidate but is not probed: "
        f"{c.unjudged}; an answer next to it cannot be exact"
        for c in cands
        if c.unjudged
    ]
    notes += [
        f"release {c.version} is yanked on the index{_why(c.yanked)}; it is probed, as "
        "pip installs a yanked file for an == pin"
        for c in cands
        if c.yanked is not None and not c.unjudged
    ]
    notes += [
        f"release {c.version}: probing its re-spin, build {c.build} ({c.wheel.filename}), "
        "the file pip installs"
        for c in cands
        if c.build and not c.unjudged
    ]
    notes += [
        f"release {c.version}: its file {c.wheel.filename} has no CUDA label; its metadata "
        f"pins {c.cell.cuda}'s runtime, so it is the {c.cell.cuda} build"
        + (f" ({told[v]})" if (v := c.wheel.public_version) in told else "")
        for c in cands
        if not getattr(c.wheel, "local", "x") and not c.unjudged
    ]
    return CandidateList(candidates=cands, missing=missing, notes=tuple(notes))


def _unsure_candidate(unsure: Any, version: str, template: Cell) -> Candidate:
    """A release whose file's CUDA is not known: in the list, never probed as any tag's build."""
    wheel = unsure.wheel
    cell_id = cells.release(
        Channel.STABLE, version, UNKNOWN, template.python, template.probe, build=wheel.build_label
    )
    cell = dataclasses.replace(
        template,
        id=cell_id,
        channel=Channel.STABLE,
        cuda=UNKNOWN,
        version=wheel.version,
        url=wheel.url,
        sha256=wheel.sha256,
        yanked=getattr(wheel, "yanked", None),
    )
    return Candidate(date="", version=wheel.version, wheel=wheel, cell=cell, unjudged=unsure.why)


def _for(template: Cell, origin: tuple[str, str] | None) -> Cell:
    if origin is None:
        return template
    cuda, index_url = origin
    return dataclasses.replace(template, cuda=cuda, index_url=index_url)


def _why(reason: str | None) -> str:
    return f" ({reason})" if reason else ""


def _release_candidate(wheel: Any, version: str, template: Cell) -> Candidate:
    cell_id = cells.release(
        Channel.STABLE,
        version,
        template.cuda,
        template.python,
        template.probe,
        build=wheel.build_label,
    )
    cell = dataclasses.replace(
        template,
        id=cell_id,
        channel=Channel.STABLE,
        version=wheel.version,
        url=wheel.url,
        sha256=wheel.sha256,
        yanked=getattr(wheel, "yanked", None),
    )
    return Candidate(date="", version=wheel.version, wheel=wheel, cell=cell)


def check_order(
    older: Any, newer: Any, *, shown: tuple[str, str], older_flag: str, unit: str
) -> None:
    """The older end must come first; the hint follows the direction asked (with --find-fix
    the older end is --bad)."""
    a, b = shown
    if older == newer:
        raise ConfigError(
            f"--good and --bad are the same {unit} ({a}): a bisection needs one "
            f"{unit} without the bug and another with it"
        )
    if older < newer:
        return
    if older_flag == "--good":
        raise ConfigError(
            f"--good ({a}) must be older than --bad ({b}); if the bug went away "
            f"between them, add --find-fix to look for the {unit} that fixed it"
        )
    raise ConfigError(
        f"with --find-fix, --bad ({a}) must be older than --good ({b}), since a fix "
        f"comes after the bug; drop --find-fix to look for the {unit} that "
        "brought the bug"
    )


def _relative(text: str, today: date | None = None) -> str:
    """ "today", "yesterday" or "N days ago" (UTC), as the scheduled workflow passes them."""
    today = today or datetime.now(timezone.utc).date()
    words = text.lower().split()
    if words == ["today"]:
        return today.isoformat()
    if words == ["yesterday"]:
        return (today - timedelta(days=1)).isoformat()
    if len(words) == 3 and words[0].isdigit() and words[1] in ("day", "days") and words[2] == "ago":
        return (today - timedelta(days=int(words[0]))).isoformat()
    return ""


def _nightly_stamp(text: str) -> str:
    try:
        dev = Version(text).dev
    except (InvalidVersion, ValueError):  # past Python's 4,300 digits: no nightly either
        return ""
    return str(dev) if dev is not None else ""


def build_candidates(
    wheels: Iterable[Any],
    *,
    older: str,
    newer: str,
    older_flag: str,
    newer_flag: str,
    cell_template: Cell,
) -> CandidateList:
    """Candidates from `older` to `newer` (YYYY-MM-DD), widening ends that have no nightly."""
    check_order(older, newer, shown=(older, newer), older_flag=older_flag, unit="nightly")
    by_date, bumps, notes = _one_per_date(wheels)
    if not by_date:
        raise ConfigError(
            "the index lists no nightly for this CUDA tag, Python and platform; "
            "check --cuda, --python and --index-url"
        )
    days = sorted(by_date)
    first, note_a = _widen(days, older, older_flag, outward=-1, limit=newer)
    last, note_b = _widen(days, newer, newer_flag, outward=+1, limit=older)
    chosen = [d for d in days if first <= d <= last]
    if len(chosen) < 2:
        raise ConfigError(
            f"the index has fewer than two nightlies between {older} and {newer}; "
            "widen --good/--bad"
        )
    cands = tuple(_candidate(by_date[d], d, cell_template, bump=d in bumps) for d in chosen)
    missing = tuple(d for d in _calendar(first, last) if d not in by_date)
    notes += [
        f"the {c.date} nightly is yanked on the index{_why(c.yanked)}; it is probed"
        for c in cands
        if c.yanked is not None
    ]
    return CandidateList(
        candidates=cands, notes=(*notes, *filter(None, (note_a, note_b))), missing=missing
    )


def _one_per_date(wheels: Iterable[Any]) -> tuple[dict[str, Any], set[str], list[str]]:
    """Around a version bump a date can have two nightlies: keep the newer version, say so, and
    name the date among the bumps (its cell id then carries the version, as the matrix's does)."""
    by_date: dict[str, Any] = {}
    bumps: set[str] = set()
    notes = []
    for wheel in wheels:
        day = wheel.nightly_date
        if not day:
            continue
        kept = by_date.get(day)
        if kept is None or Version(wheel.version) > Version(kept.version):
            by_date[day] = wheel
        if kept is not None and kept.version != wheel.version:
            bumps.add(day)
            dropped = min((kept, wheel), key=lambda w: Version(w.version))
            notes.append(
                f"{day} has two nightlies; using {by_date[day].version}, not {dropped.version}"
            )
    return by_date, bumps, notes


def _widen(
    days: Sequence[str], want: str, flag: str, *, outward: int, limit: str
) -> tuple[str, str | None]:
    if want in days:
        return want, None
    out = [d for d in days if (d < want if outward < 0 else d > want)]
    inward = [d for d in days if (want < d < limit if outward < 0 else limit < d < want)]
    if out:
        got = out[-1] if outward < 0 else out[0]
    elif inward:
        got = inward[0] if outward < 0 else inward[-1]
    else:
        raise ConfigError(f"no nightly on the index near {flag} {want}")
    return got, f"no nightly on {want} ({flag}): using the nearest one, {got}"


def _candidate(wheel: Any, day: str, template: Cell, *, bump: bool) -> Candidate:
    base = Version(wheel.version).base_version if bump else ""
    cell_id = cells.nightly(
        day,
        template.cuda,
        template.python,
        bump_version=base,
        probe=template.probe,
        build=getattr(wheel, "build_label", ""),
    )
    cell = dataclasses.replace(
        template,
        id=cell_id,
        channel=Channel.NIGHTLY,
        version=wheel.version,
        url=wheel.url,
        sha256=wheel.sha256,
        date=day,
        yanked=getattr(wheel, "yanked", None),
    )
    return Candidate(date=day, version=wheel.version, wheel=wheel, cell=cell)


def _calendar(first: str, last: str) -> list[str]:
    start, end = date.fromisoformat(first), date.fromisoformat(last)
    return [(start + timedelta(days=i)).isoformat() for i in range((end - start).days + 1)]
