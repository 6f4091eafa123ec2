"""What the wheel indexes list for one resolution, read once each, and the rules for picking.

`IndexView` reads each index page at most once per run (several at once for `cuda: auto`), or,
offline, lists what the lock knows instead; it answers "which wheels of this channel and CUDA tag
install here", "which nightly builds does each date have", and, for a date without one, why.
`nightly_builds` is the bisection's list of one index's nightlies, picked by the same rules as
the matrix's (so both name a build alike).  The other module-level functions are the pure rules:
which CUDA tags a driver runs, where a channel's index is, how release versions are compared.
Which file of a version is the build is the chooser's (index/choose.py), one for every path.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import date

from packaging.version import Version

from ..cells import python_tag
from ..config.matrix import MatrixConfig
from ..index.choose import Builds, Chooser, Unsure
from ..index.fetch import default_index, fetch_wheels, reachable
from ..index.metadata import Found
from ..index.pages import PageMissing, Wheel
from ..index.tags import compatible
from ..model import Channel
from .lock import Lock

Note = Callable[[str], None]
Fetch = Callable[[str], list[Wheel]]
_DRIVER_MIN = {"cu11": 450, "cu12": 525, "cu13": 580}  # major driver version per CUDA major


class IndexView:
    """The index pages of one resolution, read on first use (see the module docstring)."""

    def __init__(
        self,
        config: MatrixConfig,
        lock: Lock,
        *,
        platform: str,
        driver: str | None,
        today: date,
        offline: bool,
        note: Note,
        fetch: Fetch,
    ):
        self.config, self.lock, self.platform = config, lock, platform
        self.driver, self.today, self.offline, self.note, self.fetch = (
            driver,
            today,
            offline,
            note,
            fetch,
        )
        self._pages: dict[str, tuple[Wheel, ...] | PageMissing] = {}  # by URL
        self._in_lock: dict[tuple[Channel, str], tuple[Wheel, ...]] = {}  # offline's pages
        self._dates: dict[str, tuple[str, ...]] = {}  # the nightly index's dates, by CUDA tag
        self._builds: dict[tuple[str, str, str], Builds] = {}
        self._picked: dict[tuple[str, str, str, str], Wheel | Unsure | str | None] = {}
        # offline, an unlabelled file's CUDA is what the lock says, never asked of an index
        known = {b.url: b.cuda for b in lock.builds.values()}
        self.chooser = Chooser(read=_offline if offline else None, known=known)
        self._nights: dict[tuple[str, str], dict[str, list[Wheel]]] = {}
        self._assumed = False

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
                self._pages[url] = reachable(
                    self.fetch(url), url, allow=self.config.allow_links_to, note=self.note
                )
            except PageMissing as err:
                self._pages[url] = err
        return self._pages[url]

    def _locked(self, channel: Channel, tag: str) -> tuple[Wheel, ...]:
        if (channel, tag) not in self._in_lock:
            self._in_lock[channel, tag] = tuple(
                Wheel.parse(b.filename, b.url, sha256=b.sha256, yanked=b.yanked)
                for b in self.lock.builds.values()
                if b.channel == channel.value and b.cuda == tag
            )
        return self._in_lock[channel, tag]

    def builds(self, channel: Channel, tag: str, python: str, *, required: bool) -> Builds:
        """The build of each version the (channel, tag) index lists, as pip would install it
        on this runner, and why the other versions have none (index/choose.py)."""
        key = (channel.value, tag, python)
        if key not in self._builds:
            self._builds[key] = self.chooser.builds(
                self.listing(channel, tag, required=required),
                cuda=tag,
                python=python,
                platform=self.platform,
            )
        return self._builds[key]

    def pick(
        self, channel: Channel, tag: str, python: str, version: str
    ) -> Wheel | Unsure | str | None:
        """The file of one release the (channel, tag) index lists that pip installs on this
        runner, `Unsure` when it does not say its CUDA, why none is, or None when the index does
        not list the version.  One version at a time: an unlabelled file's CUDA may cost a read
        of the wheel itself (index/metadata.py), never for a version the matrix does not name."""
        key = (channel.value, tag, python, version)
        if key not in self._picked:
            files = [
                w for w in self.listing(channel, tag, required=False) if w.public_version == version
            ]
            self._picked[key] = (
                self.chooser.pick(files, cuda=tag, python=python, platform=self.platform)
                if files
                else None
            )
        return self._picked[key]

    def by_date(self, tag: str, python: str, *, required: bool = True) -> dict[str, list[Wheel]]:
        if (tag, python) not in self._nights:
            days: dict[str, list[Wheel]] = {}
            chosen = self.builds(Channel.NIGHTLY, tag, python, required=required).chosen
            for w in chosen.values():
                if w.nightly_date:
                    days.setdefault(w.nightly_date, []).append(w)
            self._nights[tag, python] = {
                d: sorted(ws, key=lambda w: w.parsed_version) for d, ws in days.items()
            }
        return self._nights[tag, python]

    def locked_nightlies(self, tag: str, python: str) -> dict[str, list[Wheel]]:
        days: dict[str, list[Wheel]] = {}
        for b in self.lock.builds.values():
            if b.channel == Channel.NIGHTLY.value and b.cuda == tag and b.python == python:
                wheel = Wheel.parse(b.filename, b.url, sha256=b.sha256, yanked=b.yanked)
                if compatible([wheel], python=python, platform=self.platform) and b.date:
                    days.setdefault(b.date, []).append(wheel)
        return {d: sorted(ws, key=lambda w: w.parsed_version) for d, ws in days.items()}

    def why_missing(self, day: str, tag: str, python: str) -> str:
        """Why the nightly index has no build of `day` for this runner."""
        if self.offline:
            return "not in the lock (offline: run plan without --offline to resolve it)"
        if tag not in self._dates:
            self._dates[tag] = tuple(
                sorted(
                    {
                        w.nightly_date
                        for w in self.listing(Channel.NIGHTLY, tag, required=True)
                        if w.nightly_date
                    }
                )
            )
        listed = self._dates[tag]
        if day in listed:
            return f"no {python_tag(python)} wheel for {self.platform} on this date"
        if day >= self.today.isoformat() and (not listed or day > listed[-1]):
            return "not published yet (nightlies appear around 07:30 UTC)"
        if not listed:
            return "the index lists no nightlies"
        if day > listed[-1]:
            return f"newer than the newest nightly on the index ({listed[-1]})"
        if day < listed[0]:
            return (
                f"older than the oldest nightly the index still lists ({listed[0]}); it keeps "
                "only about 60, so plan while they are listed to lock them"
            )
        return "no nightly was published on this date"

    def tags(self, cuda: str) -> list[str]:
        if cuda != "auto":
            return [cuda]
        if self.driver is None and not self._assumed:
            self._assumed = True
            self.note(
                "no NVIDIA driver found: `cuda: auto` assumed one new enough for every "
                "CUDA tag (≥ 580); pass --driver VERSION to plan for another machine"
            )
        return sorted(self.config.cuda_tags, key=tag_order, reverse=True)

    def where(self, channel: Channel, tags: list[str]) -> str:
        where = (
            index_for(self.config, channel, tags[0])
            if len(tags) == 1
            else f"the {channel.value} indexes for {', '.join(sorted(tags, key=tag_order))}"
        )
        return where + (" (offline: as far as the lock knows)" if self.offline else "")


def _offline(_wheel: Wheel) -> Found:
    return Found(text=None, source="it was not read (offline: the lock does not say its CUDA)")


def nightly_builds(
    index_url: str, *, cuda: str, python: str, platform: str | None = None
) -> list[Wheel]:
    """Every nightly on `index_url` installable here, one file per version as pip would install
    it (index/choose.py), sorted by date then version."""
    listed = [w for w in reachable(fetch_wheels(index_url), index_url) if w.nightly_date]
    chosen = Chooser().builds(listed, cuda=cuda, python=python, platform=platform).chosen
    return sorted(chosen.values(), key=lambda w: (w.nightly_date, w.parsed_version))


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


def tag_order(tag: str) -> int:
    return int(tag[2:]) if tag.startswith("cu") else 0


def final(version: str) -> bool:
    v = Version(version)
    return not (v.is_prerelease or v.is_devrelease)


def within(version: str, low: str | None, high: str | None) -> bool:
    release = Version(version).release
    if low and release < Version(low).release:
        return False
    if high:
        top = Version(high).release
        return release[: len(top)] <= top
    return True


def distance(version: str, wanted: str) -> tuple[int, ...]:
    a, b = Version(version).release, Version(wanted).release
    width = max(len(a), len(b))
    a, b = a + (0,) * (width - len(a)), b + (0,) * (width - len(b))
    return tuple(abs(x - y) for x, y in zip(a, b, strict=True))
