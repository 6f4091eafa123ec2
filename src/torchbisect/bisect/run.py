"""`torchbisect bisect` end to end: options → candidates → search → result → store.

This is the wiring: it reads the nightly index, picks the backend, opens the store, turns an end
with the wrong verdict into one sentence, and hands the finished result to the store.  The parts it
wires (candidates, driver, search, result, commits) are each usable and tested on their own.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from packaging.version import Version

from .. import defaults
from ..backends.base import Backend
from ..config.matrix import DEFAULT_CUDA_TAGS
from ..errors import ConfigError, InfraError
from ..index.choose import Builds
from ..model import Cell, Channel
from ..outcome import BisectResult, Direction, NightlyPoint
from ..plan.indexes import driver_supports, tag_order
from ..store.db import Store
from ..utils.gpus import Gpu, driver_version, list_gpus
from .candidates import (
    CandidateList,
    build_candidates,
    build_release_candidates,
    check_order,
    parse_end,
    release_of,
)
from .commits import CommitLookup
from .driver import Bisector, Progress
from .forget import Forgotten, Settings, forget
from .narrow import narrow
from .result import Context, build_result
from .search import EndsError
from .telling import check_script, ends_error, so_far
from .verdicts import FlakyScript, Rule, ScriptAborted, StoppedSearch
from .walk import DEFAULT_LIMIT, walk

AUTO = "auto"  # --cuda auto: each release's own build (release bisection only)

_OVERLAYS_ONLY = (
    "--pytorch-repo runs commits as hard-linked copies of a nightly's venv on "
    "this host, which the {} backend cannot: use --backend {}"
)


@dataclass(frozen=True, kw_only=True)
class BisectOptions:
    good: str | None  # None: walk from --bad to find it (`walk`)
    bad: str
    direction: Direction = Direction.REGRESSION
    cuda: str = "cu130"
    python: str = "3.12"
    platform: str | None = None
    case: str = ""  # --case; "": the one the probe's file declares (Rule.case_name)
    script: str | None = None
    probe: str = defaults.PROBE  # --probe: the probe that judges (without --script)
    trials: int | None = None
    min_affected: int | None = None  # --min-affected; None: the probe's rule (Rule)
    index_url: str | None = None
    backend: str | None = None
    store: Path = defaults.STORE
    logs: Path | None = None  # default: logs/ beside the store, one file per cell id
    workdir: Path = defaults.WORKDIR  # venvs and downloads of the venv backend
    repo: Path | None = None
    github: bool = True
    timeout: float = defaults.TIMEOUT
    overlay: bool = False
    repeat: int = 1  # answers of --script asked of each verdict run now (driver.py)
    walk_limit: int = DEFAULT_LIMIT  # days from --bad the walk to a good nightly may go
    narrow: bool = False  # --pytorch-repo: then down to the commit, with `repo`'s history

    @property
    def rule(self) -> Rule:
        return Rule(
            case=self.case,
            trials=self.trials,
            min_affected=self.min_affected,
            script=self.script,
            probe=self.probe,
        )


@dataclass(frozen=True, kw_only=True)
class Bisection:
    result: BisectResult
    new_runs: int  # probe (or script) runs made now; the rest came from the store
    notes: tuple[str, ...] = ()
    commit_runs: int = 0  # of --pytorch-repo's commit bisection (`result.narrowed`), made now


def bisect(options: BisectOptions, progress: Progress | None = None) -> Bisection:
    progress = progress or Progress()
    lookup = CommitLookup(
        options.repo,
        github=options.github,  # checks the clone before any work
        flag="--pytorch-repo" if options.narrow else "--repo",
    )
    from ..backends import Purpose, capabilities, choose_backend, default_backend, overlaying

    # A script usually reads files of this host (Purpose.SCRIPT says where it runs unless told
    # otherwise; with --backend docker it runs inside the build's container, as the probe does).
    purpose = Purpose.SCRIPT if options.script is not None else Purpose.BUILDS
    name = options.backend
    if options.narrow and name is not None and not capabilities(name).commit_overlays:
        raise ConfigError(_OVERLAYS_ONLY.format(name, overlaying()))
    if options.script is not None:
        where = name or default_backend(purpose).name
        check_script(options.script, on_host=not capabilities(where).containers)
    cands = candidates(options)
    for note in cands.notes:
        progress.note(note)
    from ..backends.base import BackendOptions, finishing

    backend = choose_backend(
        name,
        BackendOptions(workdir=options.workdir, overlay=options.overlay),
        purpose=purpose,
        say=progress.note,
    )
    if options.narrow and not backend.can.commit_overlays:
        raise ConfigError(_OVERLAYS_ONLY.format(backend.name, overlaying()))
    gpu = _first_gpu()
    # finishing: docker prunes uv's cache volume, also after a search that stopped at its ends
    with Store(options.store) as store, finishing(backend, progress.note):

        def bisector_on(on: Backend) -> Bisector:
            return Bisector(
                backend=on,
                store=store,
                rule=options.rule,
                direction=options.direction,
                logs=options.logs or options.store.parent / "logs",
                gpu=gpu,
                progress=progress,
                repeat=options.repeat if options.script is not None else 1,
            )

        bisector = bisector_on(backend)
        walked = None
        try:
            if options.good is None:
                walked = walk(
                    cands,
                    direction=options.direction,
                    judge=bisector.judge,
                    say=progress.note,
                    limit=options.walk_limit,
                )
                cands = walked.range(cands)
            search = bisector.search(cands)
            if options.script is not None and options.repeat > 1:
                bisector.check_repeats(search, options.repeat)
        except EndsError as err:
            told = ends_error(
                err, cands, bisector.points, direction=options.direction, script=options.script
            )
            if isinstance(told, StoppedSearch):
                told.so_far = _so_far(options, bisector.points, cands)
            raise told from None
        except StoppedSearch as err:  # a script that stopped it, or answered two ways
            flaky = err.build if isinstance(err, FlakyScript) else ""
            # the build that answered both ways pins nothing
            kept = {i: p for i, p in bisector.points.items() if p.key != flaky}
            err.so_far = _so_far(options, kept, cands)
            if isinstance(err, ScriptAborted):
                progress.note(err.so_far["range_so_far"])
            raise
        walk_points = walked.points if walked else ()
        result, notes = build_result(
            search,
            bisector.points,
            cands,
            _context(options),
            lookup,
            extra_probes=bisector.reasked + len(walk_points),
            extra_points=walk_points,
        )
        for note in notes:
            progress.note(note)
        commit_runs = 0
        if options.narrow and options.repo is not None:
            try:
                done = narrow(
                    result,
                    cands,
                    backend=backend,
                    bisector=bisector_on,
                    repo=options.repo,
                    workdir=options.workdir,
                    repeat=options.repeat if options.script is not None else 1,
                )
            except (ConfigError, InfraError, StoppedSearch) as err:
                store.add_bisection(result)  # the nightlies' answer stands: a rerun reuses it
                progress.note(_stands(result))
                if isinstance(err, StoppedSearch):  # the commits' search: the nightlies' answer
                    err.so_far = {
                        **_so_far(options, bisector.points, cands),
                        "range_so_far": _stands(result),
                        "nightlies": result.to_json(),
                    }
                raise
            for note in done.notes:
                progress.note(note)
            notes = [*notes, *done.notes]
            commit_runs = done.new_runs
            result = replace(result, narrowed=done.result)
        store.add_bisection(result)
    return Bisection(
        result=result,
        new_runs=bisector.new_runs,
        notes=(*cands.notes, *notes),
        commit_runs=commit_runs,
    )


def _so_far(
    options: BisectOptions, points: dict[int, NightlyPoint], cands: CandidateList
) -> dict[str, Any]:
    """What a stopped search knew: its settings, the builds judged (in order) and the range
    they pin, as `--json` writes it beside the reason for the stop."""
    return {
        "direction": options.direction.value,
        "case": options.rule.case_name,
        "cuda": options.cuda,
        "python": options.python,
        "points": [points[i].to_json() for i in sorted(points)],
        "range_so_far": so_far(points, cands, options.direction),
    }


def take_back(options: BisectOptions, what: str) -> Forgotten:
    """`--forget WHAT`: drop the stored verdicts of WHAT this bisection would reuse."""
    from ..probe.scripts import probe_version
    from ..run import execute

    if not options.store.is_file():
        raise ConfigError(
            f"{options.store} does not exist, so it holds no verdict to forget; check --store"
        )
    gpu, rule = _first_gpu(), options.rule
    settings = Settings(
        rule=rule,
        cuda=options.cuda,
        python=options.python,
        timeout=options.timeout,
        probe_version=probe_version(rule.probe_name),
        gpu=execute.gpu_name(gpu),
        driver=gpu.driver if gpu else "",
    )
    with Store(options.store) as store:
        return forget(store, what, settings)


def candidates(options: BisectOptions) -> CandidateList:
    from ..plan import indexes

    if options.good is None:
        return _one_end(options)
    good_release, bad_release = release_of(options.good), release_of(options.bad)
    if good_release is not None and bad_release is not None:
        channel, good, bad = Channel.STABLE, good_release, bad_release
    else:
        channel = Channel.NIGHTLY
        good, bad = parse_end(options.good, "--good"), parse_end(options.bad, "--bad")
    ends = ((good, "--good"), (bad, "--bad"))
    (older, older_flag), (newer, newer_flag) = (
        ends if options.direction is Direction.REGRESSION else ends[::-1]
    )
    order = Version if channel is Channel.STABLE else str
    check_order(
        order(older),
        order(newer),
        shown=(older, newer),  # before reading the index
        older_flag=older_flag,
        unit="release" if order is Version else "nightly",
    )
    if options.cuda == AUTO and channel is not Channel.STABLE:
        raise ConfigError(
            f"--cuda {AUTO} chooses each release's build; nightlies are bisected "
            "within one CUDA tag: give one, such as --cuda cu130"
        )
    index_url = _index_url(options, channel, options.cuda)
    if channel is Channel.STABLE:  # the file pip installs of each release (index/choose.py)
        builds, origin = _release_builds(options, span=(Version(older), Version(newer)))
        return build_release_candidates(
            builds,
            older=older,
            newer=newer,
            older_flag=older_flag,
            newer_flag=newer_flag,
            cell_template=_template(options, index_url),
            origin=origin,
        )
    wheels = indexes.nightly_builds(
        index_url, cuda=options.cuda, python=options.python, platform=options.platform
    )
    return build_candidates(
        wheels,
        older=older,
        newer=newer,
        older_flag=older_flag,
        newer_flag=newer_flag,
        cell_template=_template(options, index_url),
    )


def _index_url(options: BisectOptions, channel: Channel, cuda: str) -> str:
    from ..index import fetch

    if options.index_url:
        return options.index_url.replace("{cuda}", cuda)
    return fetch.default_index(channel.value, cuda)


def _release_builds(
    options: BisectOptions, *, span: tuple[Version, Version]
) -> tuple[Builds, dict[str, tuple[str, str]]]:
    """The file of each release from `span[0]` to `span[1]` that pip installs
    (index/choose.py), for --cuda TAG; for --cuda auto, per release the newest CUDA tag this
    driver runs that has a build of it, named by what the build says it is (a PyPI-shaped index
    holds one build a release, of whatever CUDA).  Also, per release, the CUDA tag and index it
    was taken for.  Only the span's releases are chosen: an unlabelled file's CUDA may cost a
    read of the wheel itself (index/metadata.py)."""
    from ..index import fetch
    from ..index.choose import Chooser, Unsure
    from ..index.pages import PageMissing

    tags = [options.cuda]
    if options.cuda == AUTO:
        driver = driver_version()
        tags = [
            t
            for t in sorted(DEFAULT_CUDA_TAGS, key=tag_order, reverse=True)
            if driver_supports(t, driver)
        ]
        if not tags:
            raise ConfigError(
                "--cuda auto found no CUDA tag this driver runs; name one with --cuda"
            )
    chooser, listings = Chooser(), {}
    chosen, origin = {}, {}
    skipped: dict[str, str] = {}
    unsure: dict[str, Unsure] = {}
    told: dict[str, str] = {}
    for tag in tags:
        url = _index_url(options, Channel.STABLE, tag)
        if url not in listings:
            try:
                listed = fetch.reachable(fetch.fetch_wheels(url), url)
            except PageMissing:
                if len(tags) == 1:
                    raise
                listed = ()  # no index for this tag: its builds are elsewhere
            listings[url] = [
                w
                for w in listed
                if release_of(w.version) and span[0] <= Version(w.public_version) <= span[1]
            ]
        found = chooser.builds(
            listings[url], cuda=tag, python=options.python, platform=options.platform
        )
        for version, wheel in found.chosen.items():
            if version not in chosen:
                chosen[version], origin[version] = wheel, (tag, url)
        for version, why in found.skipped.items():
            skipped.setdefault(version, why if len(tags) == 1 else f"{tag}: {why}")
        for version, doubt in found.unsure.items():
            unsure.setdefault(version, doubt)
        told |= {v: t for v, t in found.told.items() if origin[v] == (tag, url)}
    # a release some tag has a build of is that build; one whose file's CUDA is not known is a
    # candidate that cannot be judged, never missing (index/choose.py)
    unsure = {v: doubt for v, doubt in unsure.items() if v not in chosen}
    skipped = {v: why for v, why in skipped.items() if v not in chosen and v not in unsure}
    return Builds(
        chosen=dict(sorted(chosen.items(), key=lambda i: Version(i[0]))),
        skipped=skipped,
        unsure=unsure,
        told=told,
    ), origin


def _one_end(options: BisectOptions) -> CandidateList:
    """Without --good: every listed nightly on the walk's side of --bad (older for a
    regression, newer with --find-fix), for `walk` to pick from."""
    from ..plan import indexes

    if release_of(options.bad):
        raise ConfigError(
            f"--bad {options.bad} is a release: the walk to a good end steps over "
            "nightly dates; give --good too (a release or a nightly)"
        )
    bad = parse_end(options.bad, "--bad")
    index_url = _index_url(options, Channel.NIGHTLY, options.cuda)
    wheels = list(
        indexes.nightly_builds(
            index_url, cuda=options.cuda, python=options.python, platform=options.platform
        )
    )
    days = sorted(w.nightly_date for w in wheels if w.nightly_date)
    back = options.direction is Direction.REGRESSION
    side = [d for d in days if (d < bad if back else d > bad)]
    if not side:
        raise ConfigError(
            f"the index lists no nightly {'before' if back else 'after'} --bad "
            f"{bad}, so there is nothing to walk to; give --good"
        )
    older, newer = (side[0], bad) if back else (bad, side[-1])
    flags = ("--good", "--bad") if back else ("--bad", "--good")
    return build_candidates(
        wheels,
        older=older,
        newer=newer,
        older_flag=flags[0],
        newer_flag=flags[1],
        cell_template=_template(options, index_url),
    )


def _template(options: BisectOptions, index_url: str) -> Cell:
    return Cell(
        id="",
        channel=Channel.NIGHTLY,
        version="",
        cuda=options.cuda,
        python=options.python,
        probe=options.rule.probe_name,
        cases=(options.rule.case_name,) if options.script is None else (),
        trials=options.trials,
        timeout=options.timeout,
        index_url=index_url,
    )


def _stands(result: BisectResult) -> str:
    """The nightlies' pair, stored before a commit bisection that could not finish."""
    pair = zip(result.pair_names, (result.before, result.after), strict=True)
    ends = ", ".join(f"{name} {p.key}" for name, p in pair if p)
    return f"the nightly bisection is stored and stands ({ends}); only the commits have no answer"


def _first_gpu() -> Gpu | None:
    """Bisection probes run one at a time, on the first visible GPU (none: CPU-only checks)."""
    gpus = list_gpus()
    return gpus[0] if gpus else None


def _context(options: BisectOptions) -> Context:
    flags = ["--cuda", options.cuda, "--python", options.python]
    if options.script is not None:
        flags += ["--script", options.script]
    else:
        if options.probe != defaults.PROBE:
            flags += ["--probe", options.probe]
        flags += ["--case", options.rule.case_name]
        if options.trials:
            flags += ["--trials", str(options.trials)]
        if options.min_affected is not None:
            flags += ["--min-affected", str(options.min_affected)]
    if options.index_url:
        flags += ["--index-url", options.index_url]
    if options.backend:
        flags += ["--backend", options.backend]
    if options.overlay:
        flags.append("--overlay")
    if options.narrow and options.repo is not None:
        flags += ["--pytorch-repo", str(options.repo)]
    return Context(
        direction=options.direction,
        case=options.rule.case_name,
        cuda=options.cuda,
        python=options.python,
        rule=options.rule.describe(),
        rerun_flags=tuple(flags),
    )
