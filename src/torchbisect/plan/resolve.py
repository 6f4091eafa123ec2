"""Resolution: matrix.yaml + wheel indexes + the lock → the Plan, one concrete wheel per cell.

`build_plan` depends only on its arguments (config, lock, runner Python/platform/driver, today);
index pages come through `fetch`, at most once per index URL per run (`indexes` reads them
and holds the picking rules; `cells` names what is picked).  The rules:
- a stable or test version that is on no index is an error naming the closest ones there;
- a version that exists but has no wheel this runner can install (Python, platform, driver) and a
  nightly date without a build are listed in `Plan.missing`, which is not fatal;
- the lock wins for stable, nightly and dev cells, so a run months later installs the same bytes
  even after the nightly index pruned them (a locked nightly date never hits the index); test
  cells follow the index, because a re-spun release candidate keeps its version but not its bytes;
- around a version bump one date can have two nightlies: both become cells, and their ids carry
  the version (`nightly-20261001-2.17.0-cu130-cp312`) to stay unique.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable, Sequence
from datetime import date
from typing import TypedDict

from packaging.version import Version

from .. import cells as ids
from ..cells import python_tag
from ..config.matrix import (
    DevEntry,
    MatrixConfig,
    NightlyEntry,
    Preinstalled,
    Settings,
    StableEntry,
    TestEntry,
)
from ..errors import ConfigError, ResolveError
from ..index.choose import Unsure
from ..index.fetch import fetch_wheels, local_path, sha256_of
from ..index.pages import Wheel
from ..index.tags import compatible, python_of
from ..model import Cell, Channel, MissingBuild, Plan, split_interpreter
from ..net import links
from .indexes import (
    Fetch,
    IndexView,
    Note,
    distance,
    driver_supports,
    final,
    index_for,
    tag_order,
    within,
)
from .lock import Lock


def build_plan(
    config: MatrixConfig,
    *,
    lock: Lock | None,
    python: str,
    platform: str,
    driver: str | None,
    today: date,
    offline: bool = False,
    note: Note | None = None,
    fetch: Fetch = fetch_wheels,
    hasher: Callable[[str], str] | None = None,
    select: Sequence[str] = (),
) -> Plan:
    """Resolve every entry of `config` into cells.

    `python` is the Python for entries that do not name one; `driver` ("580.159.04", or None when
    unknown) decides what `cuda: auto` may pick; `offline` resolves from the lock alone;
    `hasher` (e.g. `index.fetch.sha256_of`) fills in sha256s the index does not publish.  `select`,
    the globs of `--cells`, leaves out the entries (and nightly dates) none of whose cells they
    can match, so their index pages are not read: the plan then holds the selected cells and
    maybe others of the same entries, which the caller's own filter drops.
    """
    if fetch is fetch_wheels and config.allow_links_to:  # a page's redirects obey it too
        fetch = functools.partial(fetch_wheels, allow=tuple(config.allow_links_to))
    r = _Resolver(
        config,
        lock or Lock(),
        python=python,
        platform=platform,
        driver=driver,
        today=today,
        offline=offline,
        note=note or (lambda _: None),
        fetch=fetch,
        select=tuple(select),
    )
    cells: list[Cell] = []
    missing: list[MissingBuild] = []
    for channel, entries in ((Channel.STABLE, config.stable), (Channel.TEST, config.test)):
        for release in entries:
            if r.may_select(channel, release):
                r.releases(channel, release, cells, missing)
    for nightly in config.nightly:
        r.nightlies(nightly, cells, missing)
    for dev in config.dev:
        if ids.may_match(select, ids.dev(dev.cell_name)):
            cells += r.dev(dev)
    if config.preinstalled is not None and ids.may_match(select, ids.PREINSTALLED):
        cells += r.preinstalled(config.preinstalled)
    if hasher:
        hasher = functools.cache(hasher)  # a build probed by several probes is hashed once
        cells = [
            dataclasses.replace(c, sha256=hasher(c.url)) if c.url and not c.sha256 else c
            for c in cells
        ]
    _unique(cells)
    return Plan(cells=tuple(cells), missing=tuple(missing))


def preinstalled_plan(config: MatrixConfig, *, python: str, platform: str, today: date) -> Plan:
    """Only the matrix's preinstalled cell, with no index contacted (a host without a GPU)."""
    if config.preinstalled is None:
        return Plan(cells=())
    r = _Resolver(
        config,
        Lock(),
        python=python,
        platform=platform,
        driver=None,
        today=today,
        offline=True,
        note=lambda _: None,
        fetch=fetch_wheels,
    )
    return Plan(cells=tuple(r.preinstalled(config.preinstalled)))


def _trusted(lock: Lock, allow: list[str], note: Note) -> Lock:
    """The lock without entries its own index could not have sent (written before that rule)."""
    refused = [
        k for k, b in lock.builds.items() if b.index and not links.allowed(b.url, b.index, allow)
    ]
    for cell_id in refused:
        b = lock.builds[cell_id]
        note(
            f"{cell_id}: the lock's wheel is ignored and resolved again: "
            f"{links.refusal(b.url, b.index or '')}"
        )
    return (
        Lock(builds={k: b for k, b in lock.builds.items() if k not in refused}) if refused else lock
    )


def _unique(cells: list[Cell]) -> None:
    """One build may be probed by several probes, but by each only once."""
    seen: set[tuple[str, str]] = set()
    for cell in cells:
        if (cell.id, cell.probe) in seen:
            raise ConfigError(
                f"two entries of the matrix produce the cell {cell.id} for the "
                f"probe {cell.probe}; remove one or give it another cuda, python "
                "or probe"
            )
        seen.add((cell.id, cell.probe))


class _Resolver:
    """The entries of one matrix, resolved over the index pages its `IndexView` reads."""

    def __init__(
        self,
        config: MatrixConfig,
        lock: Lock,
        *,
        python: str,
        platform: str,
        driver: str | None,
        today: date,
        offline: bool,
        note: Note,
        fetch: Fetch,
        select: tuple[str, ...] = (),
    ):
        self.lock = _trusted(lock, config.allow_links_to, note)
        self.indexes = IndexView(
            config,
            self.lock,
            platform=platform,
            driver=driver,
            today=today,
            offline=offline,
            note=note,
            fetch=fetch,
        )
        self.config, self.python, self.platform, self.driver = config, python, platform, driver
        self.today, self.offline, self.note, self.select = today, offline, note, select

    def may_select(self, channel: Channel, entry: StableEntry | TestEntry) -> bool:
        """Whether `--cells` can match a cell of this release entry (see `build_plan`)."""
        s = self.config.settings(entry)
        versions = entry.versions if isinstance(entry.versions, list) else ["*"]
        tag = "*" if s.cuda == "auto" else s.cuda
        cp = python_tag(s.python or self.python)
        # a re-spin's build tag follows the version (`stable-2.10.0-3-cu130-cp312`)
        return any(ids.may_match(self.select, f"{channel.value}-{v}*-{tag}-{cp}") for v in versions)

    # ---- stable and release candidates
    def releases(
        self,
        channel: Channel,
        entry: StableEntry | TestEntry,
        cells: list[Cell],
        missing: list[MissingBuild],
    ) -> None:
        s = self.config.settings(entry)
        python, tags = s.python or self.python, self.indexes.tags(s.cuda)
        if s.cuda == "auto":
            self.indexes.prefetch(channel, tags)
        known = self._versions(channel, tags, required=s.cuda != "auto")
        for version in self._wanted(channel, entry, known, tags):
            picked = self._pick(channel, version, tags, python)
            if isinstance(picked, str):
                missing.append(MissingBuild(channel=channel, what=version, reason=picked))
                continue
            tag, wheel = picked
            cells += self._cells(
                ids.release(channel, version, tag, python, build=wheel.build_label),
                channel,
                wheel,
                tag,
                python,
                s,
            )

    def _versions(self, channel: Channel, tags: list[str], *, required: bool) -> list[str]:
        found = {
            w.public_version
            for t in tags
            for w in self.indexes.listing(channel, t, required=required)
        }
        return sorted(found, key=Version)

    def _wanted(
        self, channel: Channel, entry: StableEntry | TestEntry, known: list[str], tags: list[str]
    ) -> list[str]:
        where = self.indexes.where(channel, tags)
        if isinstance(entry.versions, list):
            return [self._exists(v, known, where) for v in entry.versions]
        if entry.versions == "current":
            if len(tags) > 1:
                self.indexes.prefetch(Channel.STABLE, tags)
            newest = max(self._versions(Channel.STABLE, tags, required=False) or ["0"], key=Version)
            found = [v for v in known if final(v) and Version(v) > Version(newest)]
            if not found:
                self.note(f"test: no release candidate newer than {newest} on {where}")
            return found
        matched = re.fullmatch(r"all(?: from (\S+?)(?: to (\S+))?)?", entry.versions)
        assert matched is not None  # config/fields.py lets no other string through
        low, high = matched.groups()
        found = [v for v in known if final(v) and within(v, low, high)]
        if not found and not known and self.offline:
            raise ResolveError(
                f"--offline plans from the lock alone, and the lock pins no "
                f"{channel.value} build: run `torchbisect plan` once with network "
                "access first"
            )
        if not found:
            raise ResolveError(
                f"no {channel.value} release matches {entry.versions!r} on {where}; "
                f"the newest there is {known[-1] if known else 'none'}"
            )
        return found

    def _exists(self, wanted: str, known: list[str], where: str) -> str:
        match = [v for v in known if Version(v) == Version(wanted)]
        if match:
            return match[0]
        ranked = sorted(known, key=lambda v: distance(v, wanted))[:3]
        closest = ", ".join(sorted(ranked, key=Version, reverse=True)) or "none"
        raise ResolveError(
            f"torch {wanted} is not on {where}; the closest versions there are {closest}"
        )

    def _pick(
        self, channel: Channel, version: str, tags: list[str], python: str
    ) -> tuple[str, Wheel] | str:
        """The newest tag with a build of `version` for this runner (the file pip would install:
        index/choose.py), or why there is none."""
        why: dict[str, str] = {}
        for tag in tags:
            if not driver_supports(tag, self.driver):
                continue
            picked = self.indexes.pick(channel, tag, python, version)
            if isinstance(picked, Wheel):
                return tag, picked
            if isinstance(picked, Unsure):  # no cell can say it is this tag's build
                why[tag] = picked.why
            elif picked is not None:
                why[tag] = picked
        built = [
            t
            for t in tags
            if any(
                w.public_version == version
                for w in self.indexes.listing(channel, t, required=False)
            )
        ]
        usable = [t for t in built if driver_supports(t, self.driver)]
        if built and not usable:
            return (
                f"built only for {', '.join(sorted(built, key=tag_order))}, which need a "
                f"newer driver than {self.driver}"
            )
        no_wheel = f"no {python_tag(python)} wheel for"
        if all(r.startswith(no_wheel) for r in why.values()):
            return (
                f"{no_wheel} {self.platform} among its "
                f"{', '.join(sorted(usable, key=tag_order))} builds"
            )
        return "; ".join(f"{t}: {why[t]}" for t in sorted(why, key=tag_order, reverse=True))

    # ---- nightlies
    def nightlies(
        self, entry: NightlyEntry, cells: list[Cell], missing: list[MissingBuild]
    ) -> None:
        s = self.config.settings(entry)
        python, days = s.python or self.python, [d.isoformat() for d in entry.days(self.today)]
        if not days:
            self.note(f"a nightly entry selects no date up to today ({self.today})")
            return
        days = [d for d in days if ids.may_match(self.select, f"nightly-{d.replace('-', '')}-*")]
        if not days:
            return  # --cells selects none of its dates
        tag = s.cuda if s.cuda != "auto" else self._nightly_tag(python)
        if tag is None:
            missing.append(
                MissingBuild(
                    channel=Channel.NIGHTLY,
                    what=f"{days[0]} … {days[-1]}",
                    reason=f"no nightly index lists a {python_tag(python)} "
                    f"{self.platform} build this driver supports",
                )
            )
            return
        locked = self.indexes.locked_nightlies(tag, python)
        live = self.indexes.by_date(tag, python) if any(d not in locked for d in days) else {}
        for day in days:
            builds = locked.get(day) or live.get(day)
            if not builds:
                why = self.indexes.why_missing(day, tag, python)
                missing.append(
                    MissingBuild(channel=Channel.NIGHTLY, what=day, reason=f"{tag}: {why}")
                )
                continue
            for wheel in builds:
                bump = wheel.parsed_version.base_version if len(builds) > 1 else ""
                cell_id = ids.nightly(day, tag, python, bump_version=bump, build=wheel.build_label)
                cells += self._cells(cell_id, Channel.NIGHTLY, wheel, tag, python, s, day)

    def _nightly_tag(self, python: str) -> str | None:
        for tag in self.indexes.tags("auto"):
            if driver_supports(tag, self.driver) and self.indexes.by_date(
                tag, python, required=False
            ):
                return tag
        return None

    # ---- dev wheels and the preinstalled torch
    def dev(self, entry: DevEntry) -> list[Cell]:
        s = self.config.settings(entry)
        wheel = Wheel.parse(entry.filename, entry.wheel, sha256=entry.sha256)
        python = python_of(wheel) or s.python or self.python
        if not compatible([wheel], python=python, platform=self.platform):
            raise ResolveError(
                f"the dev wheel {wheel.filename} does not install on "
                f"{python_tag(python)} {self.platform}"
            )
        # `cuda: auto`: what the build says (its label, else its metadata), else "unknown"
        cuda = s.cuda if s.cuda != "auto" else self.indexes.chooser.cuda_of(wheel)
        sha256 = self._dev_sha(entry)
        return [
            Cell(
                id=ids.dev(entry.cell_name),
                channel=Channel.DEV,
                version=wheel.version,
                cuda=cuda,
                python=python,
                url=entry.wheel,
                sha256=sha256,
                index_url=entry.index,
                **run,
                base_image=self.config.image(cuda),
                overlay=s.overlay,
            )
            for run in _per_probe(s)
        ]

    def _dev_sha(self, entry: DevEntry) -> str | None:
        if entry.sha256:
            return entry.sha256.lower()
        path = local_path(entry.wheel)
        if path is not None:
            if not path.is_file():
                raise ResolveError(f"the dev wheel {path} does not exist; fix `dev` in the matrix")
            return sha256_of(str(path))  # a local build can change under the same name
        locked = self.lock.builds.get(ids.dev(entry.cell_name))
        if locked and locked.url == entry.wheel and locked.sha256:
            return locked.sha256
        if self.offline:
            self.note(
                f"{ids.dev(entry.cell_name)}: sha256 unknown (offline); it is hashed on install"
            )
            return None
        return sha256_of(entry.wheel)

    def preinstalled(self, entry: Preinstalled) -> list[Cell]:
        s = self.config.settings(entry)
        python, interpreter = split_interpreter(entry.interpreter)
        return [
            ids.preinstalled_cell(
                python=python, interpreter=interpreter, base_image=entry.image, **run
            )
            for run in _per_probe(s)
        ]

    # ---- shared
    def _cells(
        self,
        cell_id: str,
        channel: Channel,
        wheel: Wheel,
        tag: str,
        python: str,
        s: Settings,
        day: str | None = None,
    ) -> list[Cell]:
        """The build's cell for each probe of its entry: one wheel, one id, several probes."""
        wheel = self._pinned(cell_id, channel, wheel, python)
        return [
            Cell(
                id=cell_id,
                channel=channel,
                version=wheel.version,
                cuda=tag,
                python=python,
                url=wheel.url,
                sha256=wheel.sha256,
                date=day,
                yanked=wheel.yanked,
                **run,
                base_image=self.config.image(tag),
                overlay=s.overlay,
                index_url=index_for(self.config, channel, tag),
            )
            for run in _per_probe(s)
        ]

    def _pinned(self, cell_id: str, channel: Channel, wheel: Wheel, python: str) -> Wheel:
        """The locked bytes for this cell when the lock has usable ones, else the index's."""
        b = self.lock.builds.get(cell_id)
        if b is None:
            return wheel
        locked = Wheel.parse(b.filename, b.url, sha256=b.sha256, yanked=b.yanked)
        if not compatible([locked], python=python, platform=self.platform):
            self.note(f"{cell_id}: the lock names a wheel for another platform; re-resolved")
            return wheel
        differs = bool(wheel.sha256 and b.sha256 and wheel.sha256 != b.sha256)
        if channel is Channel.TEST:
            if differs:
                self.note(
                    f"{cell_id}: the index now serves other bytes than the lock (a re-spun "
                    "release candidate); the lock follows the index"
                )
            same = b.url == wheel.url and not differs
            return dataclasses.replace(wheel, sha256=wheel.sha256 or (b.sha256 if same else None))
        if differs:
            self.note(
                f"{cell_id}: the index lists another sha256 than the lock; keeping the locked bytes"
            )
        if not locked.sha256 and b.url == wheel.url:
            locked = dataclasses.replace(locked, sha256=wheel.sha256)
        return locked


class _ProbeFields(TypedDict):
    """A cell's fields that say how its probe runs (Cell's, as ProbeSettings has them)."""

    probe: str
    cases: tuple[str, ...]
    trials: int | None
    timeout: float
    env: tuple[tuple[str, str], ...]


def _per_probe(s: Settings) -> list[_ProbeFields]:
    """A cell's probe fields, once for each probe the entry runs."""
    return [
        {"probe": p.probe, "cases": p.cases, "trials": p.trials, "timeout": p.timeout, "env": p.env}
        for p in s.probes
    ]
