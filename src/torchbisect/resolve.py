"""Resolution: matrix.yaml + wheel indexes + the lock → the Plan, one concrete wheel per cell.

`build_plan` depends only on its arguments (config, lock, runner Python/platform/driver, today);
index pages come through `fetch`, at most once per index URL per run.  The rules:
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
import re
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from datetime import date

from packaging.version import Version

from . import links
from .config import DevEntry, MatrixConfig, NightlyEntry, Settings, StableEntry, TestEntry
from .errors import ConfigError, ResolveError
from .index import (
    PageMissing,
    Wheel,
    compatible,
    default_index,
    fetch_wheels,
    local_path,
    python_tag,
    reachable,
    sha256_of,
)
from .lock import Lock
from .model import Cell, Channel, MissingBuild, Plan

Note = Callable[[str], None]
Fetch = Callable[[str], list[Wheel]]
_DRIVER_MIN = {"cu11": 450, "cu12": 525, "cu13": 580}  # major driver version per CUDA major


def build_plan(config: MatrixConfig, *, lock: Lock | None, python: str, platform: str,
               driver: str | None, today: date, offline: bool = False, note: Note | None = None,
               fetch: Fetch = fetch_wheels, hasher: Callable[[str], str] | None = None) -> Plan:
    """Resolve every entry of `config` into cells.

    `python` is the Python for entries that do not name one; `driver` ("580.159.04", or None when
    unknown) decides what `cuda: auto` may pick; `offline` resolves from the lock alone;
    `hasher` (e.g. `index.sha256_of`) fills in sha256s the index does not publish.
    """
    r = _Resolver(config, lock or Lock(), python=python, platform=platform, driver=driver,
                  today=today, offline=offline, note=note or (lambda _: None), fetch=fetch)
    cells: list[Cell] = []
    missing: list[MissingBuild] = []
    for channel, entries in ((Channel.STABLE, config.stable), (Channel.TEST, config.test)):
        for entry in entries:
            r.releases(channel, entry, cells, missing)
    for entry in config.nightly:
        r.nightlies(entry, cells, missing)
    cells += [r.dev(entry) for entry in config.dev]
    if config.preinstalled is not None:
        cells.append(r.preinstalled())
    if hasher:
        cells = [dataclasses.replace(c, sha256=hasher(c.url)) if c.url and not c.sha256 else c
                 for c in cells]
    _unique(cells)
    return Plan(cells=tuple(cells), missing=tuple(missing))


def preinstalled_plan(config: MatrixConfig, *, python: str, platform: str, today: date) -> Plan:
    """Only the matrix's preinstalled cell, with no index contacted (a host without a GPU)."""
    if config.preinstalled is None:
        return Plan(cells=())
    r = _Resolver(config, Lock(), python=python, platform=platform, driver=None, today=today,
                  offline=True, note=lambda _: None, fetch=fetch_wheels)
    return Plan(cells=(r.preinstalled(),))


def _trusted(lock: Lock, allow: list[str], note: Note) -> Lock:
    """The lock without entries its own index could not have sent (written before that rule)."""
    refused = [k for k, b in lock.builds.items()
               if b.index and not links.allowed(b.url, b.index, allow)]
    for cell_id in refused:
        b = lock.builds[cell_id]
        note(f"{cell_id}: the lock's wheel is ignored and resolved again: "
             f"{links.refusal(b.url, b.index or '')}")
    return Lock(builds={k: b for k, b in lock.builds.items() if k not in refused}) \
        if refused else lock


def nightly_builds(index_url: str, *, cuda: str, python: str,
                   platform: str | None = None) -> list[Wheel]:
    """Every nightly on `index_url` installable here, sorted by date then version."""
    listed = list(reachable(fetch_wheels(index_url), index_url))
    wheels = [w for w in compatible(listed, python=python, platform=platform)
              if w.nightly_date and w.local in (cuda, "")]
    return sorted(_one_per_version(wheels, cuda),
                  key=lambda w: (w.nightly_date, w.parsed_version))


def driver_supports(cuda: str, driver: str | None) -> bool:
    """CUDA 11.x wheels need driver ≥ 450, 12.x ≥ 525, 13.x ≥ 580 (minor-version compatibility)."""
    if driver is None or not cuda.startswith("cu"):
        return True
    need = _DRIVER_MIN.get(cuda[:4], 10_000)  # a CUDA major this table does not know: too new
    major = re.match(r"\d+", driver)
    return major is not None and int(major.group()) >= need


def index_for(config: MatrixConfig, channel: Channel, cuda: str) -> str:
    template = getattr(config.indexes, channel.value)
    return template.replace("{cuda}", cuda) if template else default_index(channel.value, cuda)


def _tag_order(tag: str) -> int:
    return int(tag[2:]) if tag.startswith("cu") else 0


def _one_per_version(wheels: Iterable[Wheel], cuda: str) -> list[Wheel]:
    """Several files of a version can fit (manylinux_2_17 and _2_28): keep one, always the same."""
    best: dict[str, Wheel] = {}
    for w in sorted(wheels, key=lambda w: (w.local != cuda, w.filename)):
        best.setdefault(w.version, w)
    return list(best.values())


def _unique(cells: list[Cell]) -> None:
    seen: set[str] = set()
    for cell in cells:
        if cell.id in seen:
            raise ConfigError(f"two entries of the matrix produce the cell {cell.id}; remove one "
                              "or give it another cuda or python")
        seen.add(cell.id)


class _Resolver:
    def __init__(self, config: MatrixConfig, lock: Lock, *, python: str, platform: str,
                 driver: str | None, today: date, offline: bool, note: Note, fetch: Fetch):
        self.config, self.python, self.platform = config, python, platform
        self.driver, self.today, self.offline, self.note, self.fetch = (
            driver, today, offline, note, fetch)
        self.lock = _trusted(lock, config.allow_links_to, note)
        self._pages: dict[str, tuple | PageMissing] = {}  # by URL; "<channel> <tag>" offline
        self._fits: dict[tuple[str, str, str], list[Wheel]] = {}
        self._nights: dict[tuple[str, str], dict[str, list[Wheel]]] = {}
        self._assumed = False

    # ---- index pages: one read per URL, from the lock when offline
    def listing(self, channel: Channel, tag: str, *, required: bool) -> tuple[Wheel, ...]:
        """Every wheel the (channel, tag) index lists; () for a missing page unless `required`."""
        if self.offline:
            return self._locked(channel, tag)
        page = self._page(index_for(self.config, channel, tag))
        if isinstance(page, PageMissing):
            if required:
                raise page
            return ()
        return page

    def prefetch(self, channel: Channel, tags: list[str]) -> None:
        """Read several indexes at once (auto reads one per CUDA tag)."""
        urls = list(dict.fromkeys(index_for(self.config, channel, t) for t in tags))
        todo = [u for u in urls if u not in self._pages]
        if todo and not self.offline:
            with ThreadPoolExecutor(max_workers=8) as pool:
                list(pool.map(self._page, todo))

    def _page(self, url: str) -> tuple[Wheel, ...] | PageMissing:
        if url not in self._pages:
            try:
                self._pages[url] = reachable(self.fetch(url), url,
                                             allow=self.config.allow_links_to, note=self.note)
            except PageMissing as err:
                self._pages[url] = err
        return self._pages[url]

    def _locked(self, channel: Channel, tag: str) -> tuple[Wheel, ...]:
        key = f"{channel.value} {tag}"
        if key not in self._pages:
            self._pages[key] = tuple(Wheel.parse(b.filename, b.url, sha256=b.sha256)
                                     for b in self.lock.builds.values()
                                     if b.channel == channel.value and b.cuda == tag)
        return self._pages[key]

    def fits(self, channel: Channel, tag: str, python: str, *, required: bool) -> list[Wheel]:
        """The wheels of the (channel, tag) index that install on this runner."""
        key = (channel.value, tag, python)
        if key not in self._fits:
            wheels = compatible(list(self.listing(channel, tag, required=required)),
                                python=python, platform=self.platform)
            self._fits[key] = [w for w in wheels if w.local in (tag, "")]
        return self._fits[key]

    # ---- stable and release candidates
    def releases(self, channel: Channel, entry: StableEntry | TestEntry, cells: list[Cell],
                 missing: list[MissingBuild]) -> None:
        s = self.config.settings(entry)
        python, tags = s.python or self.python, self._tags(s.cuda)
        if s.cuda == "auto":
            self.prefetch(channel, tags)
        known = self._versions(channel, tags, required=s.cuda != "auto")
        for version in self._wanted(channel, entry, known, tags):
            picked = self._pick(channel, version, tags, python)
            if isinstance(picked, str):
                missing.append(MissingBuild(channel=channel, what=version, reason=picked))
                continue
            tag, wheel = picked
            cells.append(self._cell(f"{channel.value}-{version}-{tag}-{python_tag(python)}",
                                    channel, wheel, tag, python, s))

    def _versions(self, channel: Channel, tags: list[str], *, required: bool) -> list[str]:
        found = {w.public_version for t in tags
                 for w in self.listing(channel, t, required=required)}
        return sorted(found, key=Version)

    def _wanted(self, channel: Channel, entry: StableEntry | TestEntry, known: list[str],
                tags: list[str]) -> list[str]:
        where = self._where(channel, tags)
        if isinstance(entry.versions, list):
            return [self._exists(v, known, where) for v in entry.versions]
        if entry.versions == "current":
            if len(tags) > 1:
                self.prefetch(Channel.STABLE, tags)
            newest = max(self._versions(Channel.STABLE, tags, required=False) or ["0"], key=Version)
            found = [v for v in known if _final(v) and Version(v) > Version(newest)]
            if not found:
                self.note(f"test: no release candidate newer than {newest} on {where}")
            return found
        low, high = re.fullmatch(r"all(?: from (\S+?)(?: to (\S+))?)?", entry.versions).groups()
        found = [v for v in known if _final(v) and _within(v, low, high)]
        if not found:
            raise ResolveError(f"no {channel.value} release matches {entry.versions!r} on {where}; "
                               f"the newest there is {known[-1] if known else 'none'}")
        return found

    def _exists(self, wanted: str, known: list[str], where: str) -> str:
        match = [v for v in known if Version(v) == Version(wanted)]
        if match:
            return match[0]
        ranked = sorted(known, key=lambda v: _distance(v, wanted))[:3]
        closest = ", ".join(sorted(ranked, key=Version, reverse=True)) or "none"
        raise ResolveError(f"torch {wanted} is not on {where}; the closest versions there are "
                           f"{closest}")

    def _pick(self, channel: Channel, version: str, tags: list[str],
              python: str) -> tuple[str, Wheel] | str:
        """The newest tag with an installable wheel of `version`, or why there is none."""
        for tag in tags:
            if not driver_supports(tag, self.driver):
                continue
            fit = [w for w in self.fits(channel, tag, python, required=False)
                   if w.public_version == version]
            if fit:
                return tag, _one_per_version(fit, tag)[0]
        built = [t for t in tags if any(w.public_version == version
                                        for w in self.listing(channel, t, required=False))]
        usable = [t for t in built if driver_supports(t, self.driver)]
        if built and not usable:
            return (f"built only for {', '.join(sorted(built, key=_tag_order))}, which need a "
                    f"newer driver than {self.driver}")
        return (f"no {python_tag(python)} wheel for {self.platform} among its "
                f"{', '.join(sorted(usable, key=_tag_order))} builds")

    # ---- nightlies
    def nightlies(self, entry: NightlyEntry, cells: list[Cell],
                  missing: list[MissingBuild]) -> None:
        s = self.config.settings(entry)
        python, days = s.python or self.python, [d.isoformat() for d in entry.days(self.today)]
        if not days:
            self.note(f"a nightly entry selects no date up to today ({self.today})")
            return
        tag = s.cuda if s.cuda != "auto" else self._nightly_tag(python)
        if tag is None:
            missing.append(MissingBuild(channel=Channel.NIGHTLY, what=f"{days[0]} … {days[-1]}",
                                        reason=f"no nightly index lists a {python_tag(python)} "
                                               f"{self.platform} build this driver supports"))
            return
        locked = self._locked_nightlies(tag, python)
        live = self._by_date(tag, python) if any(d not in locked for d in days) else {}
        for day in days:
            builds = locked.get(day) or live.get(day)
            if not builds:
                missing.append(MissingBuild(channel=Channel.NIGHTLY, what=day,
                                            reason=f"{tag}: {self._why(day, tag, python)}"))
                continue
            for wheel in builds:
                extra = f"-{wheel.parsed_version.base_version}" if len(builds) > 1 else ""
                cell_id = f"nightly-{day.replace('-', '')}{extra}-{tag}-{python_tag(python)}"
                cells.append(self._cell(cell_id, Channel.NIGHTLY, wheel, tag, python, s, day))

    def _nightly_tag(self, python: str) -> str | None:
        for tag in self._tags("auto"):
            if driver_supports(tag, self.driver) and self._by_date(tag, python, required=False):
                return tag
        return None

    def _by_date(self, tag: str, python: str, *, required: bool = True) -> dict[str, list[Wheel]]:
        if (tag, python) not in self._nights:
            days: dict[str, list[Wheel]] = {}
            fit = self.fits(Channel.NIGHTLY, tag, python, required=required)
            for w in _one_per_version((w for w in fit if w.nightly_date), tag):
                days.setdefault(w.nightly_date, []).append(w)
            self._nights[tag, python] = {d: sorted(ws, key=lambda w: w.parsed_version)
                                         for d, ws in days.items()}
        return self._nights[tag, python]

    def _locked_nightlies(self, tag: str, python: str) -> dict[str, list[Wheel]]:
        days: dict[str, list[Wheel]] = {}
        for b in self.lock.builds.values():
            if b.channel == Channel.NIGHTLY.value and b.cuda == tag and b.python == python:
                wheel = Wheel.parse(b.filename, b.url, sha256=b.sha256)
                if compatible([wheel], python=python, platform=self.platform) and b.date:
                    days.setdefault(b.date, []).append(wheel)
        return {d: sorted(ws, key=lambda w: w.parsed_version) for d, ws in days.items()}

    def _why(self, day: str, tag: str, python: str) -> str:
        """Why the nightly index has no build of `day` for this runner."""
        if self.offline:
            return "not in the lock (offline: run plan without --offline to resolve it)"
        key = f"nightly dates {tag}"
        if key not in self._pages:
            self._pages[key] = tuple(sorted({
                w.nightly_date for w in self.listing(Channel.NIGHTLY, tag, required=True)
                if w.nightly_date}))
        listed = self._pages[key]
        if day in listed:
            return f"no {python_tag(python)} wheel for {self.platform} on this date"
        if day >= self.today.isoformat() and (not listed or day > listed[-1]):
            return "not published yet (nightlies appear around 07:30 UTC)"
        if not listed:
            return "the index lists no nightlies"
        if day > listed[-1]:
            return f"newer than the newest nightly on the index ({listed[-1]})"
        if day < listed[0]:
            return (f"older than the oldest nightly the index still lists ({listed[0]}); it keeps "
                    "only about 60, so plan while they are listed to lock them")
        return "no nightly was published on this date"

    # ---- dev wheels and the preinstalled torch
    def dev(self, entry: DevEntry) -> Cell:
        s = self.config.settings(entry)
        wheel = Wheel.parse(entry.filename, entry.wheel, sha256=entry.sha256)
        python = _python_of(wheel) or s.python or self.python
        if not compatible([wheel], python=python, platform=self.platform):
            raise ResolveError(f"the dev wheel {wheel.filename} does not install on "
                               f"{python_tag(python)} {self.platform}")
        cuda = s.cuda if s.cuda != "auto" else (
            wheel.local if re.fullmatch(r"cu\d{3}|cpu", wheel.local) else "")
        cell = Cell(id=f"dev-{entry.cell_name}", channel=Channel.DEV, version=wheel.version,
                    cuda=cuda, python=python, url=entry.wheel, sha256=self._dev_sha(entry),
                    index_url=entry.index, **_run_fields(s), base_image=self.config.image(cuda),
                    overlay=s.overlay)
        return cell

    def _dev_sha(self, entry: DevEntry) -> str | None:
        if entry.sha256:
            return entry.sha256.lower()
        path = local_path(entry.wheel)
        if path is not None:
            if not path.is_file():
                raise ResolveError(f"the dev wheel {path} does not exist; fix `dev` in the matrix")
            return sha256_of(str(path))  # a local build can change under the same name
        locked = self.lock.builds.get(f"dev-{entry.cell_name}")
        if locked and locked.url == entry.wheel and locked.sha256:
            return locked.sha256
        if self.offline:
            self.note(f"dev-{entry.cell_name}: sha256 unknown (offline); it is hashed on install")
            return None
        return sha256_of(entry.wheel)

    def preinstalled(self) -> Cell:
        entry = self.config.preinstalled
        s = self.config.settings(entry)
        # Cell has no interpreter field yet: `python` carries the interpreter path ("" = default).
        return Cell(id="preinstalled", channel=Channel.PREINSTALLED, version="", cuda="",
                    python=entry.interpreter or "", base_image=entry.image, **_run_fields(s))

    # ---- shared
    def _cell(self, cell_id: str, channel: Channel, wheel: Wheel, tag: str, python: str,
              s: Settings, day: str | None = None) -> Cell:
        wheel = self._pinned(cell_id, channel, wheel, python)
        return Cell(id=cell_id, channel=channel, version=wheel.version, cuda=tag, python=python,
                    url=wheel.url, sha256=wheel.sha256, date=day, **_run_fields(s),
                    base_image=self.config.image(tag), overlay=s.overlay,
                    index_url=index_for(self.config, channel, tag))

    def _pinned(self, cell_id: str, channel: Channel, wheel: Wheel, python: str) -> Wheel:
        """The locked bytes for this cell when the lock has usable ones, else the index's."""
        b = self.lock.builds.get(cell_id)
        if b is None:
            return wheel
        locked = Wheel.parse(b.filename, b.url, sha256=b.sha256)
        if not compatible([locked], python=python, platform=self.platform):
            self.note(f"{cell_id}: the lock names a wheel for another platform; re-resolved")
            return wheel
        differs = bool(wheel.sha256 and b.sha256 and wheel.sha256 != b.sha256)
        if channel is Channel.TEST:
            if differs:
                self.note(f"{cell_id}: the index now serves other bytes than the lock (a re-spun "
                          "release candidate); the lock follows the index")
            same = b.url == wheel.url and not differs
            return dataclasses.replace(wheel, sha256=wheel.sha256 or (b.sha256 if same else None))
        if differs:
            self.note(f"{cell_id}: the index lists another sha256 than the lock; keeping the "
                      "locked bytes")
        if not locked.sha256 and b.url == wheel.url:
            locked = dataclasses.replace(locked, sha256=wheel.sha256)
        return locked

    def _tags(self, cuda: str) -> list[str]:
        if cuda != "auto":
            return [cuda]
        if self.driver is None and not self._assumed:
            self._assumed = True
            self.note("no NVIDIA driver found: `cuda: auto` assumed one new enough for every "
                      "CUDA tag (≥ 580); pass --driver VERSION to plan for another machine")
        return sorted(self.config.cuda_tags, key=_tag_order, reverse=True)

    def _where(self, channel: Channel, tags: list[str]) -> str:
        where = index_for(self.config, channel, tags[0]) if len(tags) == 1 else \
            f"the {channel.value} indexes for {', '.join(sorted(tags, key=_tag_order))}"
        return where + (" (offline: as far as the lock knows)" if self.offline else "")


def _run_fields(s: Settings) -> dict:
    return {"probe": s.probe, "cases": s.cases, "trials": s.trials, "timeout": s.timeout,
            "env": s.env}


def _python_of(wheel: Wheel) -> str | None:
    """"3.12" for a cp312-cp312 wheel, "3.13t" for cp313-cp313t; None for py3/abi3 wheels."""
    match = re.fullmatch(r"cp(\d)(\d+)", wheel.python_tag)
    if not match or wheel.abi_tag in ("abi3", "none"):
        return None
    return f"{match[1]}.{match[2]}" + ("t" if wheel.abi_tag.endswith("t") else "")


def _final(version: str) -> bool:
    v = Version(version)
    return not (v.is_prerelease or v.is_devrelease)


def _within(version: str, low: str | None, high: str | None) -> bool:
    release = Version(version).release
    if low and release < Version(low).release:
        return False
    if high:
        top = Version(high).release
        return release[:len(top)] <= top
    return True


def _distance(version: str, wanted: str) -> tuple[int, ...]:
    a, b = Version(version).release, Version(wanted).release
    width = max(len(a), len(b))
    a, b = a + (0,) * (width - len(a)), b + (0,) * (width - len(b))
    return tuple(abs(x - y) for x, y in zip(a, b, strict=True))
