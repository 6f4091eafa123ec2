"""What a torch wheel pulls in beside itself: the CUDA libraries and triton its metadata pins, and
the size of each, so that `plan` can say what a first run downloads.

A torch wheel declares its CUDA libraries as pinned requirements (`nvidia-cublas-cu12==12.8.4.1;
platform_system == "Linux" and platform_machine == "x86_64"`) in its core metadata, which an index
serves at `<wheel URL>.metadata` (PEP 658/714; PyPI serves it even where its page leaves the mark
out, so the file is asked for; on a 404 index/metadata.py reads the wheel's own METADATA with
range requests, never by downloading the wheel whole, and a local wheel's in place). The
requirements are read with the stdlib's email parser and `packaging`, their markers evaluated
for the cell's Python and the plan's platform; the `nvidia-*` ones and triton
(`triton`, `pytorch-triton`) are kept. Each pin's file is the one the torch wheel's own index lists
for that Python and platform (read through index/fetch.py like any index), its size the page's PEP
691 `size`, else a HEAD's, else the local file's. Anything not found — no metadata, a requirement
without an exact pin, a page that does not answer — stays unknown, never guessed: the cost is
advice, never a reason to stop. What is learned goes into the lock (`LockedBuild.deps`), so a
re-plan asks nothing.
"""

from __future__ import annotations

import dataclasses
import email.parser
import email.policy
from collections.abc import Collection, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import cast

from packaging.markers import default_environment
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from ..errors import ResolveError
from ..index.cuda import read_metadata
from ..index.fetch import fetch_wheels, local_path, reachable
from ..index.tags import compatible, platform_family
from ..net import HEAD, Deadlines, NetError, request
from .lock import Lock, LockedBuild, LockedDep

TRITON = ("triton", "pytorch-triton")
_WORKERS = 8
# platform family → (platform_system, platform_machine, sys_platform, os_name) for markers
_SYSTEMS = {
    "linux": ("Linux", "linux", "posix"),
    "musllinux": ("Linux", "linux", "posix"),
    "macosx": ("Darwin", "darwin", "posix"),
    "win": ("Windows", "win32", "nt"),
}
_MACHINES = {"amd64": "AMD64", "arm64": "ARM64"}  # what Windows' platform.machine() says


def is_cuda_library(name: str) -> bool:
    return canonicalize_name(name).startswith("nvidia-")


def counted(name: str) -> bool:
    """Whether a requirement is one a first run's cost names: a CUDA library or triton."""
    return is_cuda_library(name) or canonicalize_name(name) in TRITON


def environment(python: str, platform: str) -> dict[str, str]:
    """The marker environment of `python` ("3.12", "3.13t") on `platform` ("linux_x86_64")."""
    family = platform_family(platform)
    kind, _, machine = family.partition("_")
    if family.startswith("win_"):
        kind, machine = "win", family[4:]
    system, sys_platform, os_name = _SYSTEMS.get(kind, ("", kind, ""))
    version = python.rstrip("t")
    env = cast(dict[str, str], dict(default_environment()))  # each of its values is a str
    env.update(
        python_version=version,
        python_full_version=f"{version}.0",
        implementation_name="cpython",
        platform_python_implementation="CPython",
        platform_system=system,
        sys_platform=sys_platform,
        os_name=os_name,
        platform_machine=_MACHINES.get(machine, machine) if kind == "win" else machine,
        extra="",
    )
    return env


def pins(metadata: str, *, python: str, platform: str) -> tuple[LockedDep, ...] | None:
    """The CUDA libraries and triton a METADATA text requires on `python` and `platform`, each
    with its `==` version (None without one); None when the text is no core metadata."""
    message = email.parser.Parser(policy=email.policy.compat32).parsestr(metadata)
    if not message.get("Metadata-Version") or not message.get("Name"):
        return None
    env = environment(python, platform)
    found = []
    for line in message.get_all("Requires-Dist") or ():
        try:
            req = Requirement(line)
        except InvalidRequirement:
            return None  # a broken line may be a CUDA library: the whole list is unknown
        if counted(req.name) and (req.marker is None or req.marker.evaluate(env)):
            found.append(LockedDep(name=canonicalize_name(req.name), version=_exact(req)))
    return tuple(found)


def _exact(req: Requirement) -> str | None:
    specs = list(req.specifier)
    if len(specs) == 1 and specs[0].operator in ("==", "===") and "*" not in specs[0].version:
        return specs[0].version
    return None


def with_deps(
    lock: Lock,
    *,
    known: Lock,
    platform: str,
    offline: bool = False,
    allow: Collection[str] = (),
    skip: Collection[str] = (),
) -> Lock:
    """`lock` with each wheel's `deps`: from `known` (the lock as it was) for the same URL, else
    read from its metadata and its index (nothing asked when `offline`).  The cells in `skip`
    (installed `--no-deps` over an image) are not asked about."""
    learned = {b.url: b.deps for b in known.builds.values() if b.deps is not None}
    builds = {
        cid: b
        if b.deps is not None or b.url not in learned
        else dataclasses.replace(b, deps=learned[b.url])
        for cid, b in lock.builds.items()
    }
    if offline:
        return Lock(builds=builds)
    ask = [cid for cid, b in builds.items() if b.deps is None and cid not in skip]
    with ThreadPoolExecutor(_WORKERS) as pool:
        texts = dict(
            zip(ask, pool.map(lambda cid: read_metadata(builds[cid].url), ask), strict=True)
        )
        for cid, text in texts.items():
            b = builds[cid]
            deps = pins(text, python=b.python, platform=platform) if text is not None else None
            builds[cid] = dataclasses.replace(b, deps=deps)
        located = _locate(
            [b for b in builds.values() if b.deps], platform=platform, allow=allow, pool=pool
        )
    return Lock(
        builds={
            cid: dataclasses.replace(
                b,
                deps=tuple(located.get((b.index, b.python, d.name, d.version), d) for d in b.deps),
            )
            if b.deps
            else b
            for cid, b in builds.items()
        }
    )


Key = tuple[str | None, str, str, str | None]  # index, Python, name, version


def _locate(
    builds: Iterable[LockedBuild],
    *,
    platform: str,
    allow: Collection[str],
    pool: ThreadPoolExecutor,
) -> dict[Key, LockedDep]:
    """Each pin whose size is not known yet, found on its build's index (a page read once)."""
    wanted: dict[tuple[str, str, str], set[str]] = {}
    for b in builds:
        for d in b.deps or ():
            if b.index and d.version and d.size is None:
                wanted.setdefault((b.index, b.python, d.name), set()).add(d.version)
    found: dict[Key, LockedDep] = {}
    for part in pool.map(lambda k: _on_page(k, wanted[k], platform, allow), list(wanted)):
        found.update(part)
    return found


def _on_page(
    key: tuple[str, str, str], versions: set[str], platform: str, allow: Collection[str]
) -> dict[Key, LockedDep]:
    index, python, name = key
    try:
        listed = reachable(fetch_wheels(index, name, retries=1, allow=allow), index, allow=allow)
    except ResolveError:  # PageMissing and IndexUnreachable: sizes unknown
        return {}
    fit = sorted(
        compatible(list(listed), python=python, platform=platform), key=lambda w: w.filename
    )
    out: dict[Key, LockedDep] = {}
    for version in versions:
        wheel = next((w for w in fit if _same(w.version, version)), None)
        if wheel is not None:
            out[index, python, name, version] = LockedDep(
                name=name,
                version=version,
                url=wheel.url,
                size=wheel.size if wheel.size is not None else _size(wheel.url),
            )
    return out


def _same(a: str, b: str) -> bool:
    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a == b


def _size(url: str) -> int | None:
    path = local_path(url)
    return head_size(url) if path is None else file_size(path)


def file_size(path: Path) -> int | None:
    """Bytes of a local file; None when it cannot be read (the size is advice)."""
    try:
        return path.stat().st_size
    except OSError:
        return None


def head_size(url: str, *, deadlines: Deadlines = HEAD) -> int | None:
    """The Content-Length a HEAD request for `url` answers; None when it does not tell (asked
    once: the size is advice, not worth a wait)."""
    try:
        with request(
            "HEAD",
            url.split("#", 1)[0],
            headers={"Accept-Encoding": "identity"},
            deadlines=deadlines,
        ) as answer:
            length = answer.headers.get("content-length", "")
    except NetError:
        return None
    return int(length) if length.isdigit() else None
