"""Flags that several commands share, so each has one name and one meaning everywhere.

`--backend` takes the same choices wherever a build is installed or probed; `--interpreter PATH` is
an interpreter in `matrix`, `probe` and `bench` (`--python` there is its old name, kept with a
note: in `plan` and `bisect`, `--python X.Y` is a Python version); `--json OUT` writes runs shaped
like the page's results.json; `--fail-on` chooses which outcomes make `matrix` exit non-zero;
`--cells` and `--skip` take glob patterns; `--matrix`, `--store`, `--out` and `--workdir` default to
the same paths (defaults.py) in every command that has them.

A flag that names something a command writes has `type=Output(...)`: the CLI checks all of them
(defaults included) before the command does any work, so `--json DIR` or `--out FILE` is refused
at once instead of after an hour of probing.  `--require-gpu`, `--allow-no-gpu` and `--wait` are
the gates the CLI itself applies (cli/__init__.py).
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import stat
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import defaults
from ..cells import may_match
from ..errors import ConfigError
from ..exits import Exit
from ..model import CellRun, RunStatus, Verdict
from ..utils import files

if TYPE_CHECKING:
    from ..config.matrix import MatrixConfig, References
    from ..config.runners import Runners
    from ..outcome import BisectResult


class Output:
    """The `type=` of a flag naming a file (`kind="file"`) or folder (`"dir"`) that the command
    writes, a report folder (`"pages"`: a folder whose pages and logs/ are never written through
    a symbolic link), or a file it appends to (`"append"`: $GITHUB_OUTPUT, $GITHUB_STEP_SUMMARY);
    `stdout=True`: `-` means standard output."""

    def __init__(self, kind: str, *, stdout: bool = False):
        self.kind, self.stdout = kind, stdout

    def __call__(self, text: str) -> str | Path:
        if self.stdout and text == "-":
            return text
        return Path(nonempty(text))


def nonempty(text: str) -> str:
    """The `type=` of a flag whose empty value would mean something else without a word: `--out
    ""` the current folder, `--index-url ""` the default index (`--out "$DIR"` with DIR unset)."""
    if not text:
        raise argparse.ArgumentTypeError(
            "is empty (an unset variable?); give a value or leave it out"
        )
    return text


def patterns(text: str) -> str:
    """The `type=` of `--cells` and `--skip`: at least one pattern.  Empty (`--cells "$UNSET"`),
    or commas and spaces alone, would select every cell (or skip none) without a word."""
    if not any(part.strip() for part in text.split(",")):
        raise argparse.ArgumentTypeError(
            f"names no pattern ({text!r}: an unset variable?); give one such as 'stable-*', "
            "or leave the flag out"
        )
    return text


def check_output(value: str | Path | None, flag: str, kind: str) -> None:
    """Refuse, in one sentence, an output path the command could not write: a folder where a
    file is meant, a file where a folder is meant or on the way to it, a place not writable."""
    if value is None or value == "-":
        return
    if kind == "pages":  # a report folder, its pages and its logs/: never written through a link
        for folder in (Path(value), Path(value) / "logs"):
            if os.path.islink(folder):
                raise ConfigError(
                    f"{flag} {value}: {folder} is a symbolic link (to {os.readlink(folder)}), and "
                    f"torchbisect writes no page or log through a link; remove it, or choose "
                    f"another {flag}"
                )
        kind = "dir"
    path = Path(os.path.abspath(value))
    if kind == "append" and path.is_file() and os.access(path, os.W_OK):
        # appended in place: the runner's folder around it may well be read-only (act's is)
        return
    if kind in ("file", "append") and path.is_dir():
        raise ConfigError(f"{flag} {value}: is a folder; name a file to write")
    if kind == "dir" and path.exists() and not path.is_dir():
        raise ConfigError(f"{flag} {value}: is a file; name a folder (it is made if missing)")
    if kind == "file" and path.exists() and not path.is_file():
        raise ConfigError(
            f"{flag} {value}: is not a regular file (a FIFO, a device or a "
            "socket); name a file to write"
        )
    if path.exists() and not os.access(path, os.W_OK):
        raise ConfigError(f"{flag} {value}: is not writable by this user")
    where = next(p for p in (path if kind == "dir" else path.parent, *path.parents) if p.exists())
    if not where.is_dir():
        raise ConfigError(f"{flag} {value}: {where} is a file, not a folder")
    if not os.access(where, os.W_OK | os.X_OK):
        raise ConfigError(f"{flag} {value}: the folder {where} is not writable by this user")
    _can_create(where, flag, value)


def _can_create(where: Path, flag: str, value: str | Path) -> None:
    """Refuse a folder where no file can be made although the mode bits allow it (/proc, /sys:
    root passes os.access there)."""
    try:
        fd, name = tempfile.mkstemp(dir=where, prefix=".torchbisect-")
    except OSError as err:
        if files.is_full(err):
            return  # a full disk is said, with what was kept, where the write fails
        raise ConfigError(
            f"{flag} {value}: no file can be made in {where} ({err.strerror}); "
            "name a folder on an ordinary disk"
        ) from None
    os.close(fd)
    os.unlink(name)


def shown(path: Path) -> str:
    """A default path as --help shows it: under the home folder as `~/…`."""
    try:
        return f"~/{Path(path).relative_to(Path.home()).as_posix()}"
    except ValueError:
        return str(path)


def add_matrix_option(parser: argparse.ArgumentParser, help_text: str = "matrix file") -> None:
    parser.add_argument(
        "--matrix", type=Path, default=defaults.MATRIX, help=f"{help_text} (default: %(default)s)"
    )


def add_lock_options(parser: argparse.ArgumentParser, *, writes: bool = False) -> None:
    """`--lock`, `--offline` and `--driver`: how a command that plans finds its wheels;
    `writes`: the command may write new pins into the lock."""
    parser.add_argument(
        "--lock",
        type=Output("file") if writes else Path,
        metavar="PATH",
        help="lock file (default: <matrix>.lock.json next to the matrix file)",
    )
    parser.add_argument(
        "--offline", action="store_true", help="plan from the lock alone; no index is contacted"
    )
    parser.add_argument(
        "--driver",
        type=driver_version,
        metavar="VERSION",
        help="NVIDIA driver that `cuda: auto` plans for (default: nvidia-smi's)",
    )


def store_to_read(path: Path) -> bool:
    """Whether the --store a command only reads is there (False: no such file); ConfigError when
    something is there that cannot hold runs: a folder, a FIFO or device, or an empty file (SQLite
    would make that a new database, writing into a file named to be read).  A file with something
    in it is the store's to judge when it is opened (store/check.py)."""
    if not path.exists():
        return False
    if path.is_file():
        if path.stat().st_size:
            return True
        what = "an empty file"
    else:
        what = "a folder" if path.is_dir() else "not a regular file (a FIFO, a device or a socket)"
    raise ConfigError(
        f"--store {path}: is {what}, not a result store; pass --store with the store's file"
    )


def add_store_option(
    parser: argparse.ArgumentParser, help_text: str = "result store", *, writes: bool = False
) -> None:
    parser.add_argument(
        "--store",
        type=Output("file") if writes else lambda text: Path(nonempty(text)),
        default=defaults.STORE,
        metavar="PATH",
        help=f"{help_text} (default: %(default)s)",
    )


def add_out_option(parser: argparse.ArgumentParser, help_text: str) -> None:
    parser.add_argument(
        "--out",
        type=Output("pages"),
        default=defaults.OUT,
        help=f"{help_text} (default: %(default)s/)",
    )


def add_workdir_option(parser: argparse.ArgumentParser, help_text: str) -> None:
    """No default value: a backend given no workdir uses defaults.WORKDIR itself."""
    parser.add_argument(
        "--workdir",
        type=Output("dir"),
        metavar="DIR",
        help=f"{help_text} (default: {defaults.WORKDIR}/)",
    )


def add_backend_option(parser: argparse.ArgumentParser, help_text: str, **kwargs: Any) -> None:
    from ..backends import BACKENDS

    parser.add_argument("--backend", choices=tuple(BACKENDS), help=help_text, **kwargs)


class _Deprecated(argparse.Action):
    """`--python PATH`, the interpreter flag's old name: still works, and says so."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        print(
            f"note: {option_string} PATH is now --interpreter PATH ({option_string} X.Y means a "
            "Python version in plan and bisect)",
            file=sys.stderr,
        )
        setattr(namespace, self.dest, values)


def add_interpreter_option(parser: argparse.ArgumentParser, help_text: str, **kwargs: Any) -> None:
    parser.add_argument("--interpreter", metavar="PATH", help=help_text, **kwargs)
    parser.add_argument(
        "--python", dest="interpreter", metavar="PATH", action=_Deprecated, help=argparse.SUPPRESS
    )


def check_interpreter(text: str | None) -> None:
    """`--interpreter` (checked by the CLI before the command runs): a path that is not there,
    or a name not on PATH, is a mistake in the flag (exit 2), not an interpreter without torch."""
    import shutil

    if text is None:
        return
    what = "give the path of a python (or a name on PATH)"
    if os.sep not in text and not (os.altsep and os.altsep in text):
        if shutil.which(text) is None:
            raise ConfigError(f"--interpreter {text}: no such command on PATH; {what}")
        return
    path = Path(text).expanduser()
    if not path.exists():
        raise ConfigError(f"--interpreter {text}: no such file; {what}")
    if path.is_dir() or not os.access(path, os.X_OK):
        raise ConfigError(f"--interpreter {text}: not an executable file; {what}")


def add_json_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--json",
        metavar="OUT",
        type=Output("file", stdout=True),
        help="also write the runs as JSON, shaped like the page's results.json "
        "(`-`: to stdout, the rest of the output to stderr)",
    )


def write_json(
    target: str | Path | None, runs: list[CellRun], bisections: Sequence[BisectResult] = ()
) -> None:
    if not target:
        return
    from ..report import results_json

    write_text(target, results_json(runs, list(bisections)))


def write_text(target: str | Path, text: str) -> None:
    """The document of a `--json OUT` flag: `-` is standard output; a pipe or a device named as
    a path (`/dev/stdout`, a shell's `>(…)`, `/dev/null`) is written into as it is; else the file
    is written whole (its folder made): a reader sees the old file or the new one, and a
    symbolic link at that name is replaced, its target left alone (utils/files.py)."""
    if target == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    path = Path(target)
    try:
        kind = path.stat().st_mode
    except OSError:
        kind = None
    special = kind is not None and not stat.S_ISREG(kind) and not stat.S_ISDIR(kind)
    if special or _a_stream(path):
        with path.open("w", encoding="utf-8") as out:
            out.write(text)
    else:
        files.write_text(path, text)


def _a_stream(path: Path) -> bool:
    """`/dev/stdout`, `/dev/fd/3`, `/proc/self/fd/1`: a name of an open stream, whatever it is
    redirected to (a file, then it stats as one), never a file to replace."""
    hop = os.path.abspath(path)
    for _ in range(40):  # the links' chain, hop by hop: realpath would name the file behind fd 1
        if hop.startswith(("/dev/", "/proc/")):
            return True
        if not os.path.islink(hop):
            return False
        hop = os.path.join(os.path.dirname(hop), os.readlink(hop))
    return False


def driver_version(text: str) -> str:
    """The `type=` of `--driver`: numbers between dots, as nvidia-smi prints it and runners.yaml's
    `driver:` takes (anything else made `cuda: auto` find no CUDA tag the driver supports)."""
    if not all(part.isascii() and part.isdigit() for part in text.split(".")):
        raise argparse.ArgumentTypeError(
            f"expected a driver version such as 580.95.05 (nvidia-smi prints it), got {text!r}"
        )
    return text


def python_version(text: str) -> str:
    """The `type=` of a wheel's `--python` (plan, bisect): what matrix.yaml's `python:` takes, so
    `--python 2.x` is this sentence, not an index that has no build "for Python 2.x"."""
    if not re.fullmatch(r"3\.\d{1,2}t?", text):
        raise argparse.ArgumentTypeError(
            f"expected a Python version such as 3.12 or 3.13t, got {text!r}"
        )
    return text


def cuda_tag(text: str) -> str:
    """The `type=` of `bisect --cuda`: what matrix.yaml's `cuda:` takes."""
    if not re.fullmatch(r"cu\d{3}|cpu|auto", text):
        raise argparse.ArgumentTypeError(
            f"expected a CUDA tag such as cu130, cpu or auto, got {text!r}"
        )
    return text


def platform_tag(text: str) -> str:
    """The `type=` of `--platform` (plan, bisect): a typo would match no wheel, and every build
    would be planned as missing for a platform that does not exist."""
    from ..index.tags import is_platform_tag

    if not is_platform_tag(text):
        raise argparse.ArgumentTypeError(
            "expected a wheel platform tag such as manylinux_2_28_x86_64, linux_aarch64, "
            f"macosx_11_0_arm64 or win_amd64, got {text!r}"
        )
    return text


def positive(text: str) -> int:
    """The `type=` of a count that must be at least 1 (`--jobs`, `--shards`)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a whole number of at least 1, got {text!r}"
        ) from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {value}")
    return value


def shard_spec(text: str) -> str:
    """The `type=` of `--shard I/N`: checked before anything is planned."""
    from ..run.selection import parse_shard

    try:
        parse_shard(text)
    except ConfigError:
        raise argparse.ArgumentTypeError(
            f"expected I/N with 1 <= I <= N, e.g. 2/3; got {text!r}"
        ) from None
    return text


Gate = Callable[[argparse.Namespace], bool]


def _always(args: argparse.Namespace) -> bool:
    return True


ALWAYS: Gate = _always


@dataclass(frozen=True, kw_only=True)
class Needs:
    """What a command needs before it runs, declared by its own module as `NEEDS` (main applies
    the gates: cli/__init__.py); a module that declares none needs none of them."""

    gpu: Gate | None = None  # when it probes on a GPU (given its flags): --require-gpu applies
    holds: tuple[str, ...] = ()  # the flags (dests) naming what it writes, locked in this order
    default_workdir: bool = True  # a --workdir left out is the default one, and held
    plans: Gate | None = None  # when it plans from --matrix: outside a project its default is
    # the package's own matrix, copied into the data folder first (defaults.py)


def add_gate_options(
    parser: argparse.ArgumentParser, *, gpu: bool, lock: bool, allow_no_gpu: bool
) -> None:
    """The flags of the gates main applies before a command runs (see cli/__init__.py)."""
    if gpu:
        parser.add_argument(
            "--require-gpu",
            action="store_true",
            help="exit 3 when no GPU is visible instead of running without one "
            "(implied by GITHUB_ACTIONS=true)",
        )
    if gpu and allow_no_gpu:
        parser.add_argument(
            "--allow-no-gpu",
            action="store_true",
            help="run without a GPU even under --require-gpu or GITHUB_ACTIONS",
        )
    if lock:
        parser.add_argument(
            "--wait",
            action="store_true",
            help="when another run holds the store or workdir, wait for it to "
            "end instead of exiting 3",
        )


def add_fail_on_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--fail-on",
        default="infra",
        metavar="WHAT,…",
        type=_fail_on,
        help="exit non-zero when some cell is `affected` (1) or an `infra` failure (3); "
        "`none`: always 0 (default: %(default)s)",
    )


def _fail_on(text: str) -> frozenset[str]:
    kinds = {k.strip() for k in text.split(",") if k.strip()}
    if not kinds or not kinds <= {"affected", "infra", "none"}:
        raise argparse.ArgumentTypeError("expected affected, infra, both (affected,infra) or none")
    return frozenset(kinds - {"none"})


def exit_status(runs: list[CellRun], fail_on: frozenset[str]) -> Exit:
    """AFFECTED when asked to fail on an affected build and one is (a definite answer, so it
    wins), NO_VERDICT when asked to fail on infrastructure failures and one happened, else OK."""
    if "affected" in fail_on and any(r.verdict is Verdict.AFFECTED for r in runs):
        return Exit.AFFECTED
    infra = any(r.status is RunStatus.INFRA_FAILURE for r in runs)
    return Exit.NO_VERDICT if "infra" in fail_on and infra else Exit.OK


def load_matrix_file(matrix: Path) -> MatrixConfig:
    """matrix.yaml, read and checked once by the command that needs it (every layer below takes
    the loaded `MatrixConfig`); a missing or wrong file is one sentence."""
    from ..config.matrix import load_matrix

    return load_matrix(matrix)


def matrix_if_there(matrix: Path) -> MatrixConfig | None:
    """matrix.yaml for a command that only reads it when it is there (`report`)."""
    return load_matrix_file(matrix) if Path(matrix).is_file() else None


@dataclass(frozen=True, kw_only=True)
class PageInputs:
    """What a page is drawn with besides its runs, the same for `matrix` and `report`: the
    links (`references:` of the matrix, the repository it is built from), the probes the matrix
    names (each drawn, runs or not) and the declared runner kinds (their attendance)."""

    links: References
    probes: tuple[str, ...] = ()
    runners: Runners | None = None


def page_inputs(
    config: MatrixConfig | None, matrix: Path, runners: Runners | None = None
) -> PageInputs:
    """The one builder of a page's inputs: from the loaded matrix file (None: there is none)."""
    from ..report.references import links_from

    return PageInputs(
        links=links_from(config, matrix),
        probes=tuple(config.named_probes()) if config is not None else (),
        runners=runners,
    )


def check_patterns(config: MatrixConfig, matrix: Path, **flags_given: str | None) -> None:
    """`--cells`/`--skip` patterns (or probe's cell id) that no cell of the matrix's entries can
    match, refused before
    any index is asked: their channel, listed versions and nightly dates are known without one
    (a release range's versions are not, so `stable-9*` under `all from 2.3` waits for the plan).
    `config` is the loaded `matrix` file."""
    if not any(flags_given.values()):
        return
    from ..run.selection import globs

    shapes = _shapes(config)
    for flag, text in flags_given.items():
        wrong = [p for p in globs(text) if not any(may_match([p], s) for s in shapes)]
        if wrong:
            like = {s.split("-")[0].rstrip("*"): s for s in reversed(shapes)}  # one per channel
            close = difflib.get_close_matches(wrong[0], shapes, n=3)
            hint = f"did you mean {', '.join(close)}?" if close else "`torchbisect plan` lists them"
            said = "the cell asked for" if flag == "cell" else f"--{flag}"
            raise ConfigError(
                f"{said}: no cell of {matrix} can match {', '.join(wrong)} (its "
                f"entries give ids like {', '.join(like.values())}); {hint}"
            )
        _check_tags(
            config,
            matrix,
            globs(text),
            shapes,
            "the cell asked for" if flag == "cell" else f"--{flag}",
        )


_CUDA_PART = re.compile(r"cu\d+|cpu")
_PYTHON_PART = re.compile(r"cp\d+t?")


def _check_tags(
    config: MatrixConfig, matrix: Path, patterns: Sequence[str], shapes: list[str], said: str
) -> None:
    """A pattern naming a CUDA tag (`cu999`) or a Python (`cp27`) that no release, candidate
    or nightly entry builds for, refused before any index is asked (a `dev` or preinstalled
    cell it may match is left to the plan)."""
    from ..cells import python_tag

    entries = [*config.stable, *config.test, *config.nightly]
    chosen = [config.settings(e) for e in entries]
    cudas = {t for c in chosen for t in (config.cuda_tags if c.cuda == "auto" else [c.cuda])}
    given = {python_tag(c.python) for c in chosen if c.python is not None}
    pythons = None if any(c.python is None for c in chosen) else given
    others = [s for s in shapes if not s.startswith(("stable-", "test-", "nightly-"))]
    for pattern in patterns:
        if any(may_match([pattern], s) for s in others):
            continue
        for part in pattern.split("-"):
            if _CUDA_PART.fullmatch(part) and part not in cudas:
                raise ConfigError(
                    f"{said}: {pattern} names the CUDA tag {part}, which no entry "
                    f"of {matrix} builds for (its tags: {', '.join(sorted(cudas))})"
                )
            if _PYTHON_PART.fullmatch(part) and pythons is not None and part not in pythons:
                raise ConfigError(
                    f"{said}: {pattern} names the Python {part}, which no entry "
                    f"of {matrix} builds for (its Pythons: "
                    f"{', '.join(sorted(pythons))})"
                )


def _shapes(config: MatrixConfig) -> list[str]:
    """Globs of the ids each entry of the matrix can produce, known without an index."""
    from datetime import datetime, timezone

    from .. import cells as ids

    today = datetime.now(timezone.utc).date()
    shapes = []
    for channel, entries in (("stable", config.stable), ("test", config.test)):
        for entry in entries:  # a list names its versions; a range or `current` does not
            listed = entry.versions if isinstance(entry.versions, list) else ["*"]
            shapes += [f"{channel}-{v}-*" for v in listed]
    shapes += [f"nightly-{d:%Y%m%d}-*" for entry in config.nightly for d in entry.days(today)]
    shapes += [ids.dev(entry.cell_name) for entry in config.dev]
    if config.preinstalled is not None:
        shapes.append(f"{ids.PREINSTALLED}*")
    return shapes
