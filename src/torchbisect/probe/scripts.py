"""Where the probe scripts live, which version of them a result came from, and how a build runs one.

The scripts in the repository's `probes/` folder are standalone (they run in containers that do not
have this package), so the package only locates them, reads what they say they are (info.py, the
one reader: a stored result is reused only while the script that produced it is byte-for-byte the
same) and says how to run them (`snapshot`).  A wheel carries them as `torchbisect/_probes/`
(setup.py copies them in); a checkout's editable install reads `probes/`.

Two kinds of probe run the same way for every backend: a document probe is run by the build's
interpreter and writes its JSON document itself; an exit-status probe (a plain `git bisect run`
script) is run by torchbisect's own adapter, `probes/script.py`, which turns its exit status and
last line into a document of one case named after the probe, as it does for `bisect --script`.

A cell reads its probe's file once (`snapshot`): the bytes are copied into the cell's own work
folder before the build starts, the copy is what the build runs, and the copy's hash is the
fingerprint stored with the run, so a file edited, deleted or replaced while a run goes on changes
neither what that run executes nor what its verdict is stored under.
"""

from __future__ import annotations

import contextlib
import enum
import hashlib
import os
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from ..defaults import PROBE as DEFAULT_PROBE
from ..errors import ConfigError, InfraError, TorchbisectError
from ..utils import files
from .info import ProbeInfo, ProbeOutput, read_info

SCRIPT_PROBE = "script"  # runs `bisect --script CMD`; torchbisect's own, never a user's folder
ADAPTER = f"{SCRIPT_PROBE}.py"  # torchbisect's own: runs a command or an exit-status probe


def _own() -> Path:
    """The installed copy beside the package's modules, else the checkout's `probes/`."""
    package = Path(__file__).resolve().parents[1]
    installed = package / "_probes"
    return installed if installed.is_dir() else package.parents[1] / "probes"


_OWN = _own()
ENV = "TORCHBISECT_PROBES"
# A probe's name is a file's stem, never a path: letters, digits, '_' and '-', dots only between
# them (`a.` and `a` would be one folder on a site, `..` a way out of the folder).
_PLAIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*(?:\.[A-Za-z0-9_-]+)*")
_PLAIN_MAX = 64
HOW_TO_ADD = (
    f"put NAME.py in a `probes/` folder beside matrix.yaml, or name a folder of them in "
    f"{ENV} (several separated by '{os.pathsep}')"
)
_project: Path | None = None  # `probes/` beside the matrix.yaml in use; set by `project_probes`


class Origin(enum.Enum):
    """Where a probes folder comes from, in the order they are searched."""

    PROJECT = "beside matrix.yaml"
    ENV = ENV
    SHIPPED = "shipped with torchbisect"


@dataclass(frozen=True, kw_only=True)
class Folder:
    path: Path
    origin: Origin

    def __str__(self) -> str:
        return f"{self.path} ({self.origin.value})"


def is_plain(name: str) -> bool:
    """Whether `name` is a probe's name: a plain file stem, never a path."""
    return len(name) <= _PLAIN_MAX and _PLAIN.fullmatch(name) is not None


@contextlib.contextmanager
def project_probes(matrix: Path | None) -> Iterator[None]:
    """While the block runs, the `probes/` folder beside `matrix` (the matrix.yaml in use) is
    searched first; the CLI wraps each command in it."""
    global _project
    before = _project
    _project = None if matrix is None else Path(os.path.abspath(matrix)).parent / "probes"
    try:
        yield
    finally:
        _project = before


def folders() -> list[Folder]:
    """The probes folders, in the order they are searched: `probes/` beside the matrix.yaml in use
    (when there is one), each folder TORCHBISECT_PROBES names, then torchbisect's own.  A folder
    TORCHBISECT_PROBES names that is missing, or is a file, is one sentence."""
    found = [Folder(path=_project, origin=Origin.PROJECT)] if _project and _project.is_dir() else []
    for entry in os.environ.get(ENV, "").split(os.pathsep):
        if not entry:
            continue
        path = Path(entry).expanduser()
        if not path.is_dir():
            what = "is a file, not a folder" if path.exists() else "does not exist"
            raise ConfigError(
                f"{ENV} names {entry}, which {what}: name a folder that holds "
                f"probe scripts (NAME.py), or unset {ENV}"
            )
        found.append(Folder(path=path, origin=Origin.ENV))
    # a folder named twice is searched once; the checkout's `probes/` (beside its matrix.yaml)
    # is torchbisect's own, searched last as the shipped folder
    own = _OWN.resolve()
    kept: dict[Path, Folder] = {}
    for folder in found:
        kept.setdefault(folder.path.resolve(), folder)
    kept.pop(own, None)
    return [*kept.values(), Folder(path=_OWN, origin=Origin.SHIPPED)]


def _searched() -> str:
    return "; ".join(str(f) for f in folders())


def probe_path(name: str = DEFAULT_PROBE) -> Path:
    """The file of the probe `name`, found in `folders()` in their order; a name `file:variant`
    (a --script's `script:<sha12>`) runs `file.py` (the variant tells the runs apart in the
    store, not the script that makes them).  A name is looked up, never joined into a path: one
    that is not plain, missing, or found twice in the user's folders is one sentence."""
    stem = name.partition(":")[0]
    if stem == SCRIPT_PROBE:
        return _OWN / ADAPTER
    if not is_plain(stem):
        raise ConfigError(
            f"probe {_shown(name)} is not a probe's name: a name is a file's stem "
            "(letters, digits, '_' and '-', dots only between them), never a path"
        )
    hits = _hits(stem)
    odd = [f.path / f"{stem}.py" for f in folders() if (f.path / f"{stem}.py").exists()]
    if not hits and odd:  # a folder, a FIFO or a device of that name: no file to run
        raise ConfigError(
            f"probe {name!r}: {odd[0]} is not a regular file (a folder, a FIFO or a device); "
            f"a probe is a Python file: put {stem}.py there as a file"
        )
    if not hits:
        raise ConfigError(
            f"probe {name!r} not found: no {stem}.py in the probes folders searched "
            f"({_searched()}); {HOW_TO_ADD}; the probes found: "
            f"{', '.join(available()) or 'none'}"
        )
    return hits[0]


def _hits(stem: str) -> list[Path]:
    """`stem.py` in each folder, in order; the user's own file of a shipped probe's name stands
    in for it, but two different files of the user's folders are one sentence naming both."""
    hits: list[Path] = []
    for folder in folders():
        path = folder.path / f"{stem}.py"
        if not path.is_file():
            continue
        if folder.origin is Origin.SHIPPED and hits:
            break  # the user's file stands in for the shipped one
        if hits and not _same_file(hits[0], path):
            raise ConfigError(
                f"probe {stem!r} is found twice, {hits[0]} and {path}: rename or "
                "remove one, so the name means one file"
            )
        hits.append(path)
    return hits


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.samefile(b) or a.read_bytes() == b.read_bytes()
    except OSError:
        return False


def _shown(name: str) -> str:
    return repr(name[:80] + ("…" if len(name) > 80 else ""))


def available(folder: Path | None = None) -> list[str]:
    """The probes found (in one folder, or in every folder searched), by name: the .py files
    whose stems are plain names, but the adapter and `_private` ones."""
    names: set[str] = set()
    for path in [folder] if folder is not None else [f.path for f in folders()]:
        try:
            names.update(p.stem for p in path.glob("*.py") if p.is_file())
        except OSError:
            continue
    return sorted(n for n in names if n != SCRIPT_PROBE and not n.startswith("_") and is_plain(n))


def own_probes() -> list[str]:
    """The probes of the user's folders (beside matrix.yaml, TORCHBISECT_PROBES), by name."""
    return sorted(
        {n for f in folders() if f.origin is not Origin.SHIPPED for n in available(f.path)}
    )


def stand_ins() -> list[tuple[Path, Path]]:
    """(the user's file, the shipped file) for each shipped probe a file of the user's folders
    stands in for: the name is found twice, and the command says so (`plan.unnamed_probes`)."""
    pairs = []
    for name in available(_OWN):
        mine, shipped = _hits(name)[0], _OWN / f"{name}.py"
        if not _same_file(mine, shipped):
            pairs.append((mine, shipped))
    return pairs


def default_probe() -> str:
    """The probe a command runs when none is named (neither `--probe` nor matrix.yaml's `probe:`
    or `probes:`): the shipped `stale_replay`, whatever the user's folders hold beside it; a
    user's `stale_replay.py` stands in for it (`probe_path`)."""
    return DEFAULT_PROBE


def probe_info(name: str = DEFAULT_PROBE) -> ProbeInfo:
    """What the probe's file says it is (info.py), read again when the file changes."""
    path = probe_path(name)
    stat = path.stat()
    return _read(str(path), stat.st_mtime_ns, stat.st_size, name.partition(":")[0])


@cache
def _read(path: str, _mtime: int, _size: int, name: str) -> ProbeInfo:
    return read_info(Path(path), name=name)


def probe_version(name: str = DEFAULT_PROBE) -> str:
    """`<declared PROBE_VERSION>+<first 12 hex of the script's sha256>` (ProbeInfo.version)."""
    return probe_info(name).version


@dataclass(frozen=True, kw_only=True)
class Launch:
    """How a build's interpreter runs a probe: `script` is the file it runs; for an exit-status
    probe that is the adapter, which runs `probe` and names its one case `case`."""

    script: Path
    probe: Path | None = None
    case: str = ""
    requires_api: str = ""

    @property
    def files(self) -> tuple[Path, ...]:
        """Every file the run needs where the build is (a container mounts each)."""
        return (self.script,) if self.probe is None else (self.script, self.probe)

    def argv(
        self,
        python: str,
        probe_args: Sequence[str],
        doc: str,
        *,
        where: Callable[[Path], str] = str,
    ) -> list[str]:
        """The command; `where` says what a file's path is where the build runs."""
        argv = [python, where(self.script)]
        if self.probe is not None:
            argv += ["--probe", where(self.probe), "--case", self.case]
            if self.requires_api:
                argv += ["--requires-api", self.requires_api]
        return [*argv, *probe_args, "--json", doc]


def is_exit_status(name: str) -> bool:
    """Whether `name` is a plain `git bisect run` script (its one case is its own name)."""
    return probe_info(name).output is ProbeOutput.EXIT_STATUS


def runs_through_adapter(name: str) -> bool:
    """Whether the adapter (probes/script.py) runs the probe `name`: a `--script` command or an
    exit-status probe.  False where the file cannot be read now (its run fails on its own)."""
    if name.partition(":")[0] == SCRIPT_PROBE:
        return True
    try:
        return is_exit_status(name)
    except (TorchbisectError, OSError):
        return False


@dataclass(frozen=True, kw_only=True)
class Snapshot:
    """A probe as one cell runs it: `launch` runs copies made for this run alone, and `version`
    (`probe_version`'s form) is the fingerprint of the bytes copied, the one its run is stored
    under."""

    launch: Launch
    version: str


def snapshot(name: str, into: Path) -> Snapshot:
    """Copy the probe `name` (and the adapter that runs an exit-status probe) into `into`, a
    folder of this run's own, each file read once, and say how to run the copies.

    InfraError, naming the file and the reason, when a file cannot be read or no longer parses:
    that cell's run fails, never with a verdict and never the whole run (the plan read the file
    before any work; what became of it since is this cell's)."""
    try:
        copy, sha256 = _copy(probe_path(name), into)
        info = read_info(copy, name=name.partition(":")[0])
    except ConfigError as err:
        raise InfraError(f"the probe {name!r} cannot be run: {err}") from None
    if info.sha256 != sha256:  # nothing but this run writes in `into`
        raise InfraError(f"the copy of the probe {name!r} in {into} changed as it was read")
    if info.output is ProbeOutput.DOCUMENT:
        return Snapshot(launch=Launch(script=copy), version=info.version)
    adapter, _ = _copy(_OWN / ADAPTER, into)  # a probe is never named `script` (SCRIPT_PROBE)
    return Snapshot(
        launch=Launch(script=adapter, probe=copy, case=info.name, requires_api=info.requires_api),
        version=info.version,
    )


def _copy(path: Path, into: Path) -> tuple[Path, str]:
    """`path` read once and written read-only as `into/<its name>`; (the copy, its sha256)."""
    try:
        data = path.read_bytes()
    except OSError as err:
        raise InfraError(
            f"the probe file {path} cannot be read ({err.strerror or err}); "
            "check that it is there and readable"
        ) from None
    into.mkdir(parents=True, exist_ok=True)
    copy = files.write_bytes(into / path.name, data)
    copy.chmod(0o444)  # what the build runs: a probe does not rewrite the copy it runs
    return copy, hashlib.sha256(data).hexdigest()


def shipped(path: Path) -> bool:
    """Whether `path` is one of torchbisect's own probes (installed with it, or the checkout's
    `probes/`), which `torchbisect probe --probe NAME` finds with no folder named."""
    try:
        return path.resolve().parent == _OWN.resolve()
    except OSError:
        return False
