"""The sentence a maintainer reads first: which releases are affected, since and until which
nightly, and in which release it was fixed, as measured.

The release range is computed from releases only: stable rows, and a preinstalled torch whose
version is a final release (release candidates, nightlies and local builds are not releases).
Nightly edges come from a bisection when there is one, else from the tested nightlies themselves,
and then they are bounds, said as such.  A release is "fixed in" only as measured: the first release
measured not affected after the last one measured affected, with no release the store knows of
between them left without a verdict, and measured not affected on every configuration (GPU model
and CUDA tag) that was ever measured affected: a build measured on another GPU or tag is no
answer for the one that was affected.  Where the newest affected stretch began ("since") is said
the same way: exact only when the release before it was measured not affected, on the GPU
models affected there, with nothing the store knows of between them; else as a bound (per GPU
model, not per tag: under `cuda: auto` each release is measured in its own newest tag).
Which API a probe needs (its `REQUIRES_API`) comes from the probe file; a release measured without
it is where the regression cannot be yet.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import pairwise

from packaging.version import InvalidVersion, Version

from ..cells import build_tag
from ..model import NO_GPU, CellRun, Channel, Verdict
from ..outcome import BisectResult, Direction
from .marks import Mark, mark_for_run

# How releases sort: a PEP 440 version in its order, one that is not after every one that is.
VersionKey = tuple[int, Version | str, str]

_DEV_DATE = re.compile(r"\.dev(\d{4})(\d{2})(\d{2})")


def gpu_of(run: CellRun) -> str:
    """The GPU model a run's verdict belongs to: results of different models are never merged."""
    return run.gpu_model


def nightly_date(run: CellRun) -> str:
    if run.cell.date:
        return run.cell.date
    match = _DEV_DATE.search(run.cell.version)
    return "-".join(match.groups()) if match else ""


@lru_cache(maxsize=1 << 14)  # the same few hundred versions, asked for by every row of a page
def public_version(version: str) -> str:
    """`2.15.0+cu132` → `2.15.0`; strings that are not PEP 440 versions stay as they are."""
    try:
        return Version(version).public
    except InvalidVersion:
        return version.split("+", 1)[0]


def is_release(run: CellRun) -> bool:
    """A stable row, or a preinstalled torch whose version is a final release (`2.11.0+cu130`):
    it was measured, so it counts as that release; `2.11.0a0+git…` (an NGC build) does not."""
    if run.cell.channel is Channel.STABLE:
        return True
    if run.cell.channel is not Channel.PREINSTALLED:
        return False
    try:
        version = Version(run.cell.version)
    except InvalidVersion:
        return False
    return not version.is_prerelease and (not version.local or bool(build_tag(run.cell.version)))


@lru_cache(maxsize=1 << 14)
def version_key(version: str) -> VersionKey:
    try:
        return (0, Version(version), version)
    except InvalidVersion:
        return (1, version, version)


@dataclass(frozen=True, kw_only=True)
class NightlyEdge:
    """Where the verdict changes between two nightlies: `date` is the first one on the new side."""

    date: str
    version: str
    previous: str = ""  # the last date measured the other way, when one was
    bisected: bool = False
    case: str = ""
    compare_url: str = ""
    candidates: tuple[str, ...] = ()  # a bisection's: more than one when unknowns hide the edge
    fixes: bool = False  # a bad→good edge: `previous` was measured affected, `date` not

    @property
    def exact(self) -> bool:
        """Bisected to one nightly, or the nightly measured the other way is the day before: no
        nightly lies between."""
        if self.bisected:
            return len(self.candidates) <= 1
        return _day_before(self.date) == self.previous

    @property
    def could_be(self) -> tuple[str, ...]:
        """The nightlies that can be the first on the new side, oldest first, as far as they
        were named: a bisection's candidates, or the one nightly of an exact edge.  Empty for
        an edge that was not bisected and has untested days before it: any nightly published
        after `previous` (before `date`, without one) up to `date` can be it."""
        if self.bisected and self.candidates:
            return self.candidates
        return (self.date,) if self.exact else ()

    @property
    def text(self) -> str:
        if self.bisected and not self.exact:
            return (
                f"one of {len(self.candidates)}: {', '.join(self.candidates)} (bisected on "
                f"{self.case}; not judged: {', '.join(self.candidates[:-1])})"
            )
        how = (
            f"bisected on {self.case}"
            if self.bisected
            else "exact: tested on consecutive days"
            if self.exact
            else "not bisected"
        )
        side = "affected" if self.fixes else "not affected"
        if self.previous:
            return f"{self.date} ({how}, last nightly before it measured {side}: {self.previous})"
        return f"{self.date} ({how}: no nightly before it was measured {side})"


def _day_before(date: str) -> str:
    try:
        return (dt.date.fromisoformat(date) - dt.timedelta(days=1)).isoformat()
    except ValueError:
        return ""


Config = tuple[str, str]  # (GPU model, CUDA tag): what one verdict of a release is measured on


def config_of(run: CellRun) -> Config:
    return gpu_of(run), run.cell.cuda or build_tag(run.cell.version)


@dataclass(frozen=True, kw_only=True)
class Course:
    """The releases in order, as measured, and what may be claimed from them: where the newest
    affected stretch began and whether (and where) it ended.  Pooled over configurations the
    way the ranges are (a release is affected when any build of it was), but a claim of an
    edge ("since", "fixed in") holds only where the release on the other side was measured
    not affected on the configurations that were affected."""

    states: tuple[tuple[str, str], ...] = ()  # release_states: (release, good/bad/absent/unknown)
    known: tuple[str, ...] = ()  # every release the store holds a run of (infra failures too)
    newest_affected: str = ""
    since: str = ""  # the first affected release after `after`; the first affected without one
    after: str = ""  # the newest release measured not affected (or without the API) before
    # `newest_affected`, "" when none was
    exact: bool = False  # `after` is the release just before `since`, measured on its GPUs
    again: bool = False  # a release older than `after` was affected: the regression came back
    uncovered: tuple[str, ...] = ()  # GPU models affected at `since` not measured at `after`
    later_good: str = ""  # the first release after `newest_affected` measured not affected
    unfixed: tuple[str, ...] = ()  # configurations ever affected that `later_good` was not
    # measured not affected on
    fixed: str = ""  # `later_good` when it is the fix as measured (fixed_release)
    since_other_probe: bool = False  # `after` and `since` were judged by two probe versions
    fixed_other_probe: bool = False  # `newest_affected` and `later_good` were, likewise

    def state(self, version: str) -> str:
        """good/bad/absent/unknown, or "" for a release never measured."""
        return dict(self.states).get(version, "")

    def between(self, older: str, newer: str) -> tuple[str, ...]:
        """The releases the store knows of strictly between two releases."""
        return tuple(
            v for v in self.known if version_key(older) < version_key(v) < version_key(newer)
        )

    @property
    def tested(self) -> tuple[str, ...]:
        return tuple(v for v, s in self.states if s != "unknown")

    @property
    def later_adjacent(self) -> bool:
        """`later_good` follows the newest affected release with nothing between them."""
        return (
            bool(self.later_good)
            and not self.between(self.newest_affected, self.later_good)
            and not _gap(self.newest_affected, self.later_good)
        )

    @property
    def unmeasured_after(self) -> tuple[str, ...]:
        """Releases after the newest affected one that the store knows of without a verdict."""
        if not self.newest_affected:
            return ()
        return tuple(
            v
            for v in self.known
            if version_key(v) > version_key(self.newest_affected)
            and self.state(v) in ("", "unknown")
        )


def _state_by(
    releases: list[CellRun], api: str, key: Callable[[CellRun], Config] = config_of
) -> dict[str, dict[Config, str]]:
    """release → configuration → good/bad/absent/unknown, for configurations with a verdict."""
    groups: dict[tuple[str, Config], list[CellRun]] = {}
    for run in releases:
        groups.setdefault((public_version(run.cell.version), key(run)), []).append(run)
    found: dict[str, dict[Config, str]] = {}
    for (version, config), runs in groups.items():
        for _, state in release_states(runs, api):
            found.setdefault(version, {})[config] = state
    return found


def _names(configs: list[Config], releases: list[CellRun]) -> tuple[str, ...]:
    """Configurations as a reader reads them: the CUDA tag alone when one GPU model measured
    every release here, else the model and the tag."""
    one = len({gpu_of(r) for r in releases}) == 1
    return tuple(
        (tag or "an untagged build") if one else f"{gpu} {tag}".strip()
        for gpu, tag in sorted(configs)
    )


def _next_known(known: tuple[str, ...], version: str) -> str:
    return next((v for v in known if version_key(v) > version_key(version)), "")


GOOD = ("good", "absent")  # measured not affected, or without the API: no regression there


def _per_gpu(run: CellRun) -> Config:
    """A run's GPU model alone, where a claim is said per model ("since", a nightly's bound)."""
    return gpu_of(run), ""


def course_of(releases: list[CellRun], api: str = "") -> Course:
    """The course of `releases` (stable rows and preinstalled releases, every run of them)."""
    states = tuple(release_states(releases, api))
    known = tuple(sorted({public_version(r.cell.version) for r in releases}, key=version_key))
    bad = [v for v, s in states if s == "bad"]
    if not bad:
        return Course(states=states, known=known)
    key = version_key
    newest = bad[-1]
    by_config = _state_by(releases, api)
    quiet = [v for v, s in states if s in ("good", "absent") and key(v) < key(newest)]
    after = quiet[-1] if quiet else ""
    since = next(v for v in bad if key(v) > key(after)) if after else bad[0]
    uncovered: list[str] = []
    reprobed = False
    if after:  # "since" is said per GPU model, as the ranges are: a tag that `after` was not
        # built in (`cuda: auto` takes each release's newest) bounds it no less
        by_gpu = _state_by(releases, api, _per_gpu)
        turned = {c for c, s in by_gpu[since].items() if s == "bad"}
        uncovered = sorted(g for g, _ in turned if by_gpu[after].get((g, "")) not in GOOD)
        reprobed = not _one_question(releases, after, since, turned, _per_gpu)
    exact = (
        bool(after)
        and not uncovered
        and not reprobed
        and _next_known(known, after) == since
        and not _gap(after, since)
    )
    later = [v for v, s in states if s == "good" and key(v) > key(newest)]
    later_good = later[0] if later else ""
    ever = {c for by in by_config.values() for c, s in by.items() if s == "bad"}
    unfixed = [c for c in ever if by_config.get(later_good, {}).get(c) != "good"]
    other_probe = bool(later_good) and not _one_question(
        releases, newest, later_good, {c for c, s in by_config[newest].items() if s == "bad"}
    )
    fixed = (
        later_good
        if (
            later_good
            and not unfixed
            and not other_probe
            and _next_known(known, newest) == later_good
            and not _gap(newest, later_good)
        )
        else ""
    )
    return Course(
        states=states,
        known=known,
        newest_affected=newest,
        since=since,
        after=after,
        exact=exact,
        again=bool(after) and key(bad[0]) < key(after),
        uncovered=tuple(uncovered),
        later_good=later_good,
        unfixed=_names(unfixed, releases) if later_good else (),
        fixed=fixed,
        since_other_probe=reprobed,
        fixed_other_probe=other_probe,
    )


def _one_question(
    releases: list[CellRun],
    older: str,
    newer: str,
    configs: set[Config],
    key: Callable[[CellRun], Config] = config_of,
) -> bool:
    """Whether each configuration that carries an edge between two releases has verdicts of one
    question (`_question`) at both: an edge between verdicts of two (a script edited, then one
    build re-run; a shard run with an older probe) is a change of the question as much as of
    torch, and is claimed by neither.  A stale cell of another tag or python is no part of it."""
    asked: dict[tuple[str, Config], set[str]] = {}
    for run in releases:
        version = public_version(run.cell.version)
        if version in (older, newer) and key(run) in configs and mark_for_run(run).kind != "infra":
            asked.setdefault((version, key(run)), set()).add(_question(run))
    both = [c for c in configs if (older, c) in asked and (newer, c) in asked]
    return all(asked[older, c] & asked[newer, c] for c in both)  # the others: `uncovered`/unfixed


def _question(run: CellRun) -> str:
    """What a verdict means: the probe's declared PROBE_VERSION, bumped when a change alters
    it (probes/README.md); for a file that declares none ("0+<sha>"), any byte changed."""
    fingerprint = run.probe_version or (run.result.probe_version if run.result else "")
    declared, _, _ = fingerprint.partition("+")
    return fingerprint if declared in ("", "0") else declared


def since_sentence(course: Course, api: str = "") -> str:
    """Where the newest affected stretch began, as far as it was measured, or "" when no release
    before it was measured not affected (then only the oldest release probed bounds it)."""
    if not course.after:
        return ""
    since, after = course.since, course.after
    measured = f"without {api}" if course.state(after) == "absent" else "not affected"
    again = "again " if course.again else ""
    if course.exact and measured != "not affected" and not course.again:
        return without_api_sentence(since, after, api)
    if course.exact:
        return f"{again}since {since}: {after} before it was measured {measured}"
    if course.since_other_probe:
        return (
            f"{again}since {since} at the latest: {after} was measured {measured} by another "
            "version of the probe file"
        )
    if course.uncovered:
        return (
            f"{again}since {since} at the latest: {after} was measured {measured}, but not "
            f"on {_listed(course.uncovered)}, where {since} is affected"
        )
    return (
        f"{again}since {since} or an unmeasured release after {after}: {after} was "
        f"measured {measured}"
    )


def _listed(names: tuple[str, ...]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


@dataclass(frozen=True, kw_only=True)
class Headline:
    gpu: str
    tested: tuple[str, ...]  # stable public versions with a verdict (affected or not), ascending
    unclear: tuple[str, ...]  # stable versions probed without a verdict (skipped, error, …)
    affected_ranges: tuple[tuple[str, str], ...]
    affected: tuple[str, ...] = ()  # every affected release, ascending
    first_affected: NightlyEdge | None = None
    first_fixed: NightlyEdge | None = None
    nightly_unclaimed: str = ""  # a later nightly not affected that is no fix: why (nightly_edges)
    newest_run: str = ""
    absent: tuple[str, ...] = ()  # releases measured without `api`, ascending
    api: str = ""  # the API the probe needs (its REQUIRES_API), "" when it names none
    fixed: str = ""  # the release the fix is measured in (fixed_release), or ""
    course: Course = field(default_factory=Course)  # what the claims are computed from

    @property
    def untested(self) -> str:
        """What the claim does not cover: every release older than the oldest one probed, unless
        a release before the newest affected stretch was measured not affected (or without the
        API): then where that stretch began, as far as it was measured."""
        probed = sorted(self.tested + self.unclear, key=version_key)
        if not probed:
            return "no release was tested"
        if self.affected_ranges and (since := since_sentence(self.course, self.api)):
            return since
        return f"releases before {probed[0]} were not tested"

    @property
    def text(self) -> str:
        """The claim and, when it names affected releases, what it does not cover."""
        return f"{self.claim} ({self.untested})" if self.affected_ranges else self.claim

    @property
    def claim(self) -> str:
        where = "without a GPU" if self.gpu == NO_GPU else f"on {self.gpu}"
        if self.affected_ranges:
            ranges = ranges_text(self.affected_ranges)
            fixed = f", fixed in {self.fixed}" if self.fixed else ""
            holes = unmeasured_clause(self.affected_ranges, self.course)
            return f"{ranges} affected {where}{holes}{fixed}"
        if self.tested:
            return f"No tested stable release is affected {where} ({_span(self.tested)} tested)"
        if self.unclear:
            return f"No verdict for stable releases {where} ({', '.join(self.unclear)} probed)"
        return f"No stable release tested {where}"


def ranges_text(ranges: tuple[tuple[str, str], ...]) -> str:
    return " and ".join(a if a == b else f"{a} – {b}" for a, b in ranges)


def unmeasured_clause(ranges: tuple[tuple[str, str], ...], course: Course) -> str:
    """ ", not measured between 2.9.1 and 2.11.0" for each two affected releases of one range
    with a release between them that has no verdict: one the store knows of (an infrastructure
    failure), or one a version shows must exist (a minor series skipped).  A range spans them,
    as an OSV range does, and its reader must not take them for measured."""
    pairs = []
    for first, last in ranges:
        inside = [
            v for v, _ in course.states if version_key(first) <= version_key(v) <= version_key(last)
        ]
        pairs += [(x, y) for x, y in pairwise(inside) if course.between(x, y) or _skipped(x, y)]
    if not pairs:
        return ""
    return ", not measured between " + ", nor between ".join(f"{x} and {y}" for x, y in pairs)


def without_api_sentence(first: str, since: str, api: str) -> str:
    """ "releases before 2.3.0 have no torch.foo: 2.2.2 was measured without it"."""
    return f"releases before {first} have no {api}: {since} was measured without it"


def _span(versions: tuple[str, ...]) -> str:
    return versions[0] if len(versions) == 1 else f"{versions[0]} – {versions[-1]}"


def marks_by(runs: list[CellRun], key: Callable[[CellRun], str]) -> list[tuple[str, list[Mark]]]:
    """Run marks grouped by `key(run)`; infrastructure failures say nothing and are left out."""
    groups: dict[str, list[Mark]] = {}
    for run in runs:
        mark = mark_for_run(run)
        if mark.kind != "infra":
            groups.setdefault(key(run), []).append(mark)
    return list(groups.items())


def state_of(marks: list[Mark]) -> str:
    """One build tested in several CUDA variants: affected if any is, safe only if all are."""
    if any(m.is_affected for m in marks):
        return "bad"
    return "good" if all(m.is_safe for m in marks) else "unknown"


def release_states(stable: list[CellRun], api: str = "") -> list[tuple[str, str]]:
    """(public version, good/bad/absent/unknown) for each tested release, ascending; `absent`:
    every run of it measured the build without `api` (a measurement: the regression cannot be
    there), which is neither good nor bad for the ranges."""
    by_version = marks_by(stable, lambda r: public_version(r.cell.version))
    absent = _without_api(stable, api) if api else set()
    states = [(v, "absent" if v in absent else state_of(m)) for v, m in by_version]
    hidden = _affected_around(stable)
    states = [(v, "unknown" if s == "good" and hidden(v) else s) for v, s in states]
    return sorted(states, key=lambda item: version_key(item[0]))


def _affected_around(stable: list[CellRun]) -> Callable[[str], bool]:
    """Whether a release is left unmeasured on a configuration (GPU model and CUDA tag) that was
    measured affected both before and after it: what was measured not affected there (another
    tag, another GPU) says nothing of that one, so the release is no "not affected" of the
    pooled view, and no range ends there as if it were."""
    measured: dict[Config, set[str]] = {}
    bad: dict[Config, list[VersionKey]] = {}
    for run in stable:
        mark = mark_for_run(run)
        if mark.kind == "infra":
            continue
        version, config = public_version(run.cell.version), config_of(run)
        measured.setdefault(config, set()).add(version)
        if mark.is_affected:
            bad.setdefault(config, []).append(version_key(version))

    def hidden(version: str) -> bool:
        key = version_key(version)
        return any(
            version not in measured[config] and min(keys) < key < max(keys)
            for config, keys in bad.items()
        )

    return hidden


def _without_api(runs: list[CellRun], api: str) -> set[str]:
    """Versions whose every run with a verdict read not_applicable for want of `api` (a case's
    detail names it, as "torch.foo is absent in this build"), not of some other API."""
    seen: dict[str, bool] = {}
    for run in runs:
        if run.result is None:
            continue
        version = public_version(run.cell.version)
        without = run.verdict is Verdict.NOT_APPLICABLE and any(
            api in case.detail for case in run.result.cases
        )
        seen[version] = seen.get(version, True) and without
    return {version for version, without in seen.items() if without}


def affected_ranges(states: list[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """Maximal runs of consecutive affected releases; a release without a verdict ends a run."""
    ranges: list[tuple[str, str]] = []
    start = end = ""
    for version, state in states:
        if state == "bad":
            start, end = start or version, version
            continue
        if start:
            ranges.append((start, end))
        start = end = ""
    if start:
        ranges.append((start, end))
    return tuple(ranges)


def fixed_release(releases: list[CellRun], api: str = "") -> str:
    """The first release measured not affected after the last one measured affected, or "".

    Only when nothing lies between them: the next release the store knows of (`releases`, every
    run of a release, infrastructure failures too: a matrix of `all from X` plans every release
    the index lists) after the last affected one must be that release, measured not affected,
    and it must follow without a gap a version can show (no minor series skipped, the next
    series from its .0).  A release between them without a verdict, or never measured, leaves
    the fix unplaced: it could be there.  And it must be measured not affected on every GPU
    model and CUDA tag that was ever measured affected: a fix seen on another is no fix of
    theirs (course_of)."""
    return course_of(releases, api).fixed


def _skipped(older: str, newer: str) -> bool:
    """Whether a version shows that a release lies between two of one major series (a minor
    series skipped, a series that does not start at .0): `_gap` without its doubt about a new
    major or a version that is not PEP 440, which may have nothing between."""
    try:
        same = Version(older).major == Version(newer).major
    except InvalidVersion:
        return False
    return same and _gap(older, newer)


def _gap(older: str, newer: str) -> bool:
    """Whether a release must exist between two versions: a minor series skipped, a new series
    that does not start at .0, a new major; or versions that are not PEP 440 at all."""
    try:
        a, b = Version(older).release + (0, 0), Version(newer).release + (0, 0)
    except InvalidVersion:
        return True
    if a[0] != b[0]:
        return True
    return b[1] > a[1] + 1 or (b[1] == a[1] + 1 and b[2] != 0)


@dataclass(frozen=True, kw_only=True)
class NightlyEdges:
    first_affected: NightlyEdge | None = None
    first_fixed: NightlyEdge | None = None
    unclaimed: str = ""  # why a nightly measured not affected after the newest affected one
    # is no fix (it was never measured on a configuration affected before it), or ""


def nightly_edges(nightly: list[CellRun]) -> NightlyEdges:
    """Where the tested nightlies first turned affected, and where they were fixed (bounds, not
    bisected).

    The first affected nightly's `previous` is the newest nightly before it measured not affected
    on the GPU models affected there (per GPU model, as "since" is for releases: under
    `cuda: auto` the nightlies move to a newer CUDA tag as the plans do).  A fix is the first
    nightly after the newest affected one measured not affected on every configuration (GPU model
    and CUDA tag) ever measured affected, as "fixed in" is for releases: a nightly fixed and then
    affected again has no fix, and one measured on another tag only is none of that tag's
    (`unclaimed` says so)."""
    dated = [r for r in nightly if nightly_date(r)]
    versions = {nightly_date(r): r.cell.version for r in dated}
    series = sorted((d, state_of(m)) for d, m in marks_by(dated, nightly_date))
    bad = [d for d, s in series if s == "bad"]
    if not bad:
        return NightlyEdges()
    by_config = _nightly_states(dated, config_of)
    by_gpu = _nightly_states(dated, _per_gpu)

    def good_on(states: dict[str, dict[Config, str]], date: str, configs: set[Config]) -> bool:
        return bool(configs) and all(states.get(date, {}).get(c) == "good" for c in configs)

    first, newest = bad[0], bad[-1]
    at_first = {c for c, s in by_gpu[first].items() if s == "bad"}
    before = [d for d, _ in series if d < first and good_on(by_gpu, d, at_first)]
    first_bad = NightlyEdge(
        date=first, version=versions[first], previous=before[-1] if before else ""
    )
    ever = {c for by in by_config.values() for c, s in by.items() if s == "bad"}
    fix = next((d for d, _ in series if d > newest and good_on(by_config, d, ever)), "")
    if fix:
        edge = NightlyEdge(date=fix, version=versions[fix], previous=newest, fixes=True)
        return NightlyEdges(first_affected=first_bad, first_fixed=edge)
    later = next((d for d, s in series if d > newest and s == "good"), "")
    if not later:
        return NightlyEdges(first_affected=first_bad)
    never = [c for c in ever if by_config.get(later, {}).get(c) != "good"]
    return NightlyEdges(
        first_affected=first_bad,
        unclaimed=(
            f"{later} was measured not affected, but never on {_listed(_names(never, dated))}, "
            "where earlier nightlies were affected: no fix is claimed there"
        ),
    )


def _nightly_states(
    dated: list[CellRun], key: Callable[[CellRun], Config]
) -> dict[str, dict[Config, str]]:
    """date → configuration → good/bad/unknown: every build of that day on it pooled (two
    nightlies of one date, the branch cut's, are affected there if either is)."""
    marks: dict[tuple[str, Config], list[Mark]] = {}
    for run in dated:
        mark = mark_for_run(run)
        if mark.kind != "infra":  # an infrastructure failure says nothing, as in marks_by
            marks.setdefault((nightly_date(run), key(run)), []).append(mark)
    found: dict[str, dict[Config, str]] = {}
    for (date, config), said in marks.items():
        found.setdefault(date, {})[config] = state_of(said)
    return found


def _from_bisection(bisection: BisectResult) -> NightlyEdge | None:
    if bisection.after is None:
        return None
    return NightlyEdge(
        date=bisection.after.date,
        version=bisection.after.version,
        previous=bisection.before.date if bisection.before else "",
        bisected=True,
        fixes=bisection.direction is not Direction.REGRESSION,
        case=bisection.case,
        compare_url=bisection.compare_url,
        candidates=bisection.candidates,
    )


def build_headline(
    gpu: str, runs: list[CellRun], bisections: list[BisectResult], api: str = ""
) -> Headline:
    """`api`: the probe's REQUIRES_API, whose absence in a release is said as such."""
    releases = [r for r in runs if is_release(r)]
    course = course_of(releases, api)
    states = list(course.states)
    edges = nightly_edges([r for r in runs if r.cell.channel is Channel.NIGHTLY])
    first_bad, first_good, unclaimed = edges.first_affected, edges.first_fixed, edges.unclaimed
    for bisection in bisections:
        edge = _from_bisection(bisection)
        if edge and bisection.direction is Direction.REGRESSION:
            first_bad = edge
        elif edge:
            first_good, unclaimed = edge, ""
    newest = max((r.started for r in runs if r.started), default="")
    return Headline(
        gpu=gpu,
        tested=tuple(v for v, s in states if s != "unknown"),
        unclear=tuple(v for v, s in states if s == "unknown"),
        absent=tuple(v for v, s in states if s == "absent"),
        affected_ranges=affected_ranges(states),
        affected=tuple(v for v, s in states if s == "bad"),
        first_affected=first_bad,
        first_fixed=first_good,
        nightly_unclaimed=unclaimed,
        newest_run=newest[:10],
        api=api,
        fixed=course.fixed,
        course=course,
    )
