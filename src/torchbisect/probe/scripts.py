"""Where the probe scripts live, which version of them a result came from, and how a build runs one.

The scripts in the repository's `probes/` folder are standalone (they run in containers that do not
have this package), so the package only locates them, reads what they say they are (info.py, the
one reader: a stored result is reused only while the script that produced it is byte-for-byte the
same) and says how to run them (`launch`).  A wheel carries them as `torchbisect/_probes/`
(setup.py copies them in); a checkout's editable install reads `probes/`.

Two kinds of probe run the same way for every backend: a document probe is run by the build's
interpreter and writes its JSON document itself; an exit-status probe (a plain `git bisect run`
script) is run by torchbisect's own adapter, `probes/script.py`, which turns its exit status and
last line into a document of one case named after the probe, as it does for `bisect --script`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from ..defaults import PROBE as DEFAULT_PROBE
from ..errors import ConfigError
from .info import ProbeInfo, ProbeOutput, read_info

SCRIPT_PROBE = "script"  # runs `bisect --script CMD`; torchbisect's own, never a user's folder
ADAPTER = f"{SCRIPT_PROBE}.py"  # torchbisect's own: runs a command or an exit-status probe


def _own() -> Path:
    """The installed copy beside the package's modules, else the checkout's `probes/`."""
    package = Path(__file__).resolve().parents[1]
    installed = package / "_probes"
    return installed if installed.is_dir() else package.parents[1] / "probes"


_OWN = _own()


def probes_dir() -> Path:
    """`$TORCHBISECT_PROBES`, else torchbisect's own probes (installed, or the checkout's)."""
    env = os.environ.get("TORCHBISECT_PROBES")
    return Path(env) if env else _OWN


def probe_path(name: str = DEFAULT_PROBE) -> Path:
    """`<folder>/<name>.py`; a name `file:variant` (a --script's `script:<sha12>`) runs `file.py`
    (the variant tells the runs apart in the store, not the script that makes them)."""
    stem = name.partition(":")[0]
    folder = _OWN if stem == SCRIPT_PROBE else probes_dir()
    path = folder / f"{stem}.py"
    if not path.is_file():
        where = " (TORCHBISECT_PROBES)" if folder != _OWN else ""
        raise ConfigError(f"probe {name!r} not found: expected {path} in the probes folder "
                          f"{folder}{where}; name a probe that is there ({_listed(folder)})")
    return path


def available(folder: Path | None = None) -> list[str]:
    """The probes a folder holds (its .py files but the adapter), by name."""
    folder = folder or probes_dir()
    try:
        names = sorted(p.stem for p in folder.glob("*.py") if p.is_file())
    except OSError:
        return []
    return [n for n in names if n != SCRIPT_PROBE and not n.startswith("_")]


def default_probe() -> str:
    """The probe a command runs when none is named: `stale_replay`, or, when the probes folder
    does not hold it, the one probe it holds (a TORCHBISECT_PROBES folder with only the user's
    script).  A folder of several without `stale_replay` keeps the name, and `probe_path`
    says which it holds."""
    folder = probes_dir()
    if (folder / f"{DEFAULT_PROBE}.py").is_file():
        return DEFAULT_PROBE
    names = available(folder)
    return names[0] if len(names) == 1 else DEFAULT_PROBE


def _listed(folder: Path) -> str:
    names = available(folder)
    return "it holds " + ", ".join(names) if names else "it holds no .py file"


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

    def argv(self, python: str, probe_args: Sequence[str], doc: str, *,
             where: Callable[[Path], str] = str) -> list[str]:
        """The command; `where` says what a file's path is where the build runs."""
        argv = [python, where(self.script)]
        if self.probe is not None:
            argv += ["--probe", where(self.probe), "--case", self.case]
            if self.requires_api:
                argv += ["--requires-api", self.requires_api]
        return [*argv, *probe_args, "--json", doc]


def launch(name: str) -> Launch:
    """How to run the probe `name` (a ConfigError when it is missing or unreadable)."""
    info = probe_info(name)
    if info.output is ProbeOutput.DOCUMENT:
        return Launch(script=info.path)
    return Launch(script=_OWN / ADAPTER, probe=info.path, case=info.name,
                  requires_api=info.requires_api)


def is_exit_status(name: str) -> bool:
    """Whether `name` is a plain `git bisect run` script (its one case is its own name)."""
    return probe_info(name).output is ProbeOutput.EXIT_STATUS


def shipped(path: Path) -> bool:
    """Whether `path` is one of torchbisect's own probes (installed with it, or the checkout's
    `probes/`), which `torchbisect probe --probe NAME` finds with no folder named."""
    try:
        return path.resolve().parent == _OWN.resolve()
    except OSError:
        return False
