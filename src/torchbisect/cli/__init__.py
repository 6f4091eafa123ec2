"""Command line: `python -m torchbisect <command>`; the nox sessions are thin wrappers around it.

Each command lives in its own module under torchbisect/commands/ with `configure(parser)` and
`run(args) -> int`, and declares what it needs as `NEEDS` (options.py's `Needs`: a GPU, the paths
it locks, a plan); only the chosen command's module is imported, so `plan` never pays for the
Docker SDK.  This package is the machinery they run in: the parser, the gates, the catcher.
`main` is the one place that turns a TorchbisectError into a one-sentence message and exit code,
and any other exception into `Exit.FAILED` with its traceback in a file (exits.py is the table of
statuses): a gate reading the status then never takes torchbisect's own failure for a verdict.

Before a command runs, main applies the gates every command shares, in this order: the paths it
writes are checked (exit 2); a run that needs a GPU and was told to require one finds one (exit
3); the store and workdir it writes are locked against a second run (exit 3, or `--wait`).
"""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import signal
import sys
import tempfile
import threading
import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING

from .. import defaults
from ..errors import ConfigError, IndexUnreachable, InfraError, TorchbisectError
from ..exits import Exit
from ..utils.words import visible

if TYPE_CHECKING:
    from .options import Needs

# command name (also its module under torchbisect.commands) -> one-line help
COMMANDS = {
    "plan": "Resolve matrix.yaml into cells (wheel URL + sha256) and update the lock file.",
    "matrix": "Install and probe every cell of the plan, store results, render the report.",
    "probe": "Run the probe for one cell, chosen by its identifier.",
    "report": "Render index.html, results.json, summary.md and affected.json from the store.",
    "merge": "Merge result stores (SQLite or JSON exports) from shards into one store.",
    "bisect": "Find the first bad (or first fixed) nightly and its upstream commit range.",
    "schema": "Write the JSON Schemas of matrix.yaml, results.json and a probe's document.",
    "bench": "Measure tool overhead and the workaround's cost; write reports/bench/.",
    "notify": "Open or update the status issue when a verdict or the fix status changed.",
    "preflight": "Check that the backend a GPU run will use gives its probes the GPUs.",
    "cache": "Show what a backend keeps between runs (the venv backend's venvs and uv cache, "
    "the docker backend's uv cache volume) and its size, or --prune it.",
    "init": "Write torchbisect's default matrix.yaml here, to edit: this folder becomes a project.",
    "completion": "Print the shell code that completes torchbisect's commands and flags.",
    "pages": "In a clone: redraw the pages committed under reports/ from their own data.",
}

# What to do about an index that does not answer, in the terms of the command that asked it.
_INDEX_ADVICE = {
    "bisect": "or pass --index-url with a mirror (a PEP 503 index URL, file:// URL or folder)",
}
_MATRIX_INDEX_ADVICE = "or point `indexes` in the matrix file (--matrix) at a mirror"


def _parser(chosen: str | None) -> tuple[argparse.ArgumentParser, argparse.ArgumentParser | None]:
    """The top-level parser, and the chosen command's own (the only one configured)."""
    from .usage import epilog

    parser = argparse.ArgumentParser(
        prog="torchbisect",
        allow_abbrev=False,
        epilog=epilog(None),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Test PyTorch builds for a GPU regression: which are affected, since when.",
    )
    parser.add_argument("--version", action="version", version=f"torchbisect {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    own = None
    for name, help_text in COMMANDS.items():
        cmd = sub.add_parser(
            name,
            help=help_text,
            description=help_text,
            allow_abbrev=False,
            epilog=epilog(name),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        if name == chosen:
            from .options import Needs

            module = importlib.import_module(f"torchbisect.commands.{name}")
            module.configure(cmd)
            needs = getattr(module, "NEEDS", Needs())
            _add_gates(cmd, needs)
            cmd.set_defaults(
                _run=module.run,
                _check=getattr(module, "check_args", None),
                _outputs=_outputs(cmd),
                _needs=needs,
            )
            own = cmd
    return parser, own


def _parse(argv: list[str], chosen: str | None) -> argparse.Namespace:
    """argparse, with the command's own usage and a "did you mean" for what it does not know."""
    from . import usage

    parser, own = _parser(chosen)
    if own is not None:
        _beside_the_matrix(own, argv)
    words = usage.completing()
    if words is not None:
        usage.complete(parser)  # answers the shell and exits
    if chosen is None and (wrong := usage.unknown_command(argv, COMMANDS)):
        parser.error(wrong)
    args, extras = parser.parse_known_args(argv)
    if extras:
        (own or parser).error(usage.unknown_flags(own or parser, extras))
    return args


def _beside_the_matrix(cmd: argparse.ArgumentParser, argv: list[str]) -> None:
    """Outside a project, the folder of a `--matrix FILE` is one (as `init` makes it): the
    store, page and work folder the command writes by default go beside the file, as its lock
    does, instead of into the per-user data folder.  Only the defaults change: a flag given
    wins, and a one-off `probe` still writes nothing it is not asked to."""
    matrix = _flag_value(argv, "--matrix")
    if matrix is None or defaults.in_project():
        return
    folder = Path(matrix).expanduser().parent
    needs = cmd.get_default("_needs")
    given = {word.split("=", 1)[0] for word in argv if word.startswith("--")}
    has = {o for action in cmd._actions for o in action.option_strings}
    for dest, path in (
        ("store", Path("reports/results.sqlite")),
        ("out", Path("reports")),
        ("workdir", Path(".torchbisect")),
    ):
        writes = cmd.get_default(dest) is not None or (
            dest == "workdir" and dest in needs.holds and needs.default_workdir
        )
        if writes and f"--{dest}" in has and f"--{dest}" not in given:
            cmd.set_defaults(**{dest: folder / path})


def _flag_value(argv: list[str], flag: str) -> str | None:
    for i, word in enumerate(argv):
        if word == flag and i + 1 < len(argv):
            return argv[i + 1]
        if word.startswith(f"{flag}="):
            return word.split("=", 1)[1]
    return None


def _add_gates(cmd: argparse.ArgumentParser, needs: Needs) -> None:
    from .options import add_gate_options

    has = {o for action in cmd._actions for o in action.option_strings}
    add_gate_options(
        cmd,
        gpu=needs.gpu is not None,
        lock=bool(needs.holds),
        allow_no_gpu="--allow-no-gpu" not in has,
    )


def _outputs(cmd: argparse.ArgumentParser) -> list[tuple[str, str, str]]:
    """(flag, dest, kind) of every argument that names something the command writes."""
    from .options import Output

    return [
        (a.option_strings[0] if a.option_strings else str(a.metavar or a.dest), a.dest, a.type.kind)
        for a in cmd._actions
        if isinstance(a.type, Output)
    ]


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("torchbisect")
    except PackageNotFoundError:  # run from a source tree that was never installed
        from .. import __version__

        return __version__


def main(argv: Sequence[str] | None = None) -> int:
    from ..utils.streams import OutputFailed, quiet_when_unread

    try:
        with quiet_when_unread():  # a closed stdout or a pipe nobody reads changes no status
            return _main(list(sys.argv[1:] if argv is None else argv))
    except OutputFailed as err:  # met by the last flush, once the command had ended
        with suppress(OSError):
            print(f"torchbisect: error: {err}", file=sys.stderr)
        return err.exit_code


def _main(argv: list[str]) -> int:
    from .usage import completing

    chosen = next((a for a in (completing() or argv) if a in COMMANDS), None)
    try:  # a command module that fails to import is torchbisect's failure too
        args = _parse(argv, chosen)
    except KeyboardInterrupt:  # Ctrl-C while the command's modules load: no traceback either
        print(f"torchbisect{f' {chosen}' if chosen else ''}: interrupted", file=sys.stderr)
        return Exit.INTERRUPTED
    except TorchbisectError as err:  # --help into a stream that cannot be written
        print(f"torchbisect{f' {chosen}' if chosen else ''}: error: {err}", file=sys.stderr)
        return err.exit_code
    except Exception as err:  # noqa: BLE001 - argparse's own exits are SystemExit, not this
        return _failed(chosen or "", argv, err)
    try:
        with _sigterm_as_ctrl_c():
            return _gated(args, argv)
    except TorchbisectError as err:
        print(
            f"torchbisect {args.command}: error: "  # a path may carry an ESC sequence
            f"{visible(_with_advice(err, args.command))}",
            file=sys.stderr,
        )
        return err.exit_code
    except KeyboardInterrupt:
        print(f"torchbisect {args.command}: interrupted", file=sys.stderr)
        return Exit.INTERRUPTED
    except Exception as err:  # noqa: BLE001 - the one place an unexpected error is caught
        said = _full_disk(err, args) or _unusable_path(err, argv)
        if said is not None:  # wherever it struck: one sentence naming the path, its status
            print(f"torchbisect {args.command}: error: {visible(str(said))}", file=sys.stderr)
            return said.exit_code
        return _failed(args.command, argv, err)


@contextmanager
def _sigterm_as_ctrl_c() -> Iterator[None]:
    """A cancelled CI job (or `kill`) sends SIGTERM: every command stops as on Ctrl-C, releasing
    what it holds, and says so with status 130, as its --help promises — never a death by the
    signal (-15) that a gate cannot tell from a crash."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _full_disk(err: BaseException, args: argparse.Namespace) -> TorchbisectError | None:
    """A full disk met where no narrower handler said so (files.DiskFull is the rule): named
    by the file that failed, else by the command's folders whose disk is full."""
    from ..utils.files import disk_full, is_full, nearly_full

    if not is_full(err):
        return None
    name = getattr(err, "filename", None)
    said = err if isinstance(err, OSError) else None  # sqlite3 says "database or disk is full"
    if name:
        return disk_full(os.path.dirname(os.path.abspath(name)), said)
    folders = [
        Path(p) if Path(p).is_dir() else Path(p).parent
        for p in (
            getattr(args, k, None)
            for k in ("out", "workdir", "store", "lock", "matrix", "json", "markdown")
        )
        if p is not None and str(p) != "-"
    ]
    full = [str(f) for f in folders if nearly_full(f)]
    return disk_full(
        " and ".join(dict.fromkeys(full))
        or "a folder torchbisect writes to (its report, logs, store, lock or work folder)",
        said,
    )


# A path no file system can hold or follow, whichever command met it: the user's to change.
_UNUSABLE = {
    errno.ENAMETOOLONG: "a name in it is too long for the file system",
    errno.ELOOP: "its symbolic links loop",
}


def _unusable_path(err: BaseException, argv: list[str]) -> ConfigError | None:
    """A path given on the command line with a name too long or links that loop, met where no
    narrower check said so: one sentence naming the flag that gave it (exit 2), not a crash."""
    if isinstance(err, OSError) and err.errno in _UNUSABLE and err.filename is not None:
        name, why = os.fsdecode(err.filename), _UNUSABLE[err.errno]
    elif isinstance(err, RuntimeError) and str(err).startswith("Symlink loop from "):
        # Path.resolve() on Python 3.11 and 3.12 raises this, the path quoted, instead of ELOOP
        name, why = str(err).removeprefix("Symlink loop from ").strip("'\""), _UNUSABLE[errno.ELOOP]
    else:
        return None
    where = os.path.abspath(name)
    for flag, given in _given(argv):
        inside = os.path.abspath(given) if given else None
        if inside and (where == inside or where.startswith(inside.rstrip(os.sep) + os.sep)):
            return ConfigError(f"{f'{flag} ' if flag else ''}{given}: {why}; give another path")
    return ConfigError(f"{name}: {why}; give another path")


def _given(argv: list[str]) -> Iterator[tuple[str, str]]:
    """Each argument with the flag it is the value of ("" for a positional one)."""
    for before, arg in zip(["", *argv], argv, strict=False):
        if arg.startswith("--") and "=" in arg:
            flag, _, value = arg.partition("=")
            yield flag, value
        else:
            yield (before if before.startswith("--") and "=" not in before else ""), arg


def _gated(args: argparse.Namespace, argv: list[str]) -> int:
    from ..probe.scripts import project_probes
    from ..utils import runlock
    from .options import check_interpreter, check_output

    for flag, dest, kind in args._outputs:
        check_output(getattr(args, dest), flag, kind)
    check_interpreter(getattr(args, "interpreter", None))
    _require_gpu(args)
    plans = args._needs.plans
    if plans is not None and plans(args) and defaults.refresh_default_matrix(args.matrix):
        print(
            f"torchbisect {args.command}: no matrix.yaml here, so torchbisect's default "
            f"matrix is planned; results go to {defaults.data_home()}/ (`torchbisect init` "
            "writes a matrix.yaml here to edit, and keeps them here)",
            file=sys.stderr,
        )
    # probes are found beside the matrix.yaml in use first (probe/scripts.py says the order)
    with project_probes(getattr(args, "matrix", None) or defaults.MATRIX):
        if args._check is not None:  # a flag's mistake is said at once, not after a held lock
            args._check(args)
        held = [path for dest in args._needs.holds if (path := _held(args, dest))]
        with runlock.hold(
            held,
            command=" ".join(["torchbisect", *argv]),
            wait=getattr(args, "wait", False),
            say=lambda text: print(
                f"torchbisect {args.command}: {text}", file=sys.stderr, flush=True
            ),
        ):
            if "store" in args._needs.holds and getattr(args, "store", None) is not None:
                from ..store.db import check_store

                check_store(args.store)  # damage said before an index is asked or a build run
            return int(args._run(args) or 0)


def _held(args: argparse.Namespace, dest: str) -> Path | None:
    """What a command holds: the paths it names; a workdir left out is the default one, but
    `probe` holds only what it is told to write (a one-off probe writes nothing of its own)."""
    value: Path | None = getattr(args, dest)
    if value is None and dest == "workdir" and args._needs.default_workdir:
        return defaults.WORKDIR
    return value


def _require_gpu(args: argparse.Namespace) -> None:
    """A GPU job that sees no GPU must not pass as a green day with nothing probed."""
    gpu_run = args._needs.gpu
    if gpu_run is None or not gpu_run(args) or args.allow_no_gpu:
        return
    if args.require_gpu:
        asked = "--require-gpu is given"
    elif os.environ.get("GITHUB_ACTIONS") == "true":
        asked = "GITHUB_ACTIONS=true implies --require-gpu"
    else:
        return
    from ..utils.gpus import list_gpus

    if not list_gpus():
        hidden = os.environ.get("CUDA_VISIBLE_DEVICES")
        seen = "nvidia-smi lists" if hidden is None else f"CUDA_VISIBLE_DEVICES={hidden!r} shows"
        raise InfraError(
            f"no GPU is visible ({seen} none) and {asked}: run this on a machine "
            "with a GPU, or pass --allow-no-gpu to run without one"
        )


def _failed(command: str, argv: list[str], err: Exception) -> int:
    """torchbisect's own failure: one sentence on stderr, the traceback in a file, Exit.FAILED."""
    text = f"{type(err).__name__}: {err}".splitlines()[0][:200]
    who = " ".join(["torchbisect", command] if command else ["torchbisect"])
    try:
        fd, name = tempfile.mkstemp(prefix=f"{who.replace(' ', '-')}-", suffix=".traceback.txt")
        # backslashreplace: an argument of bytes that are not UTF-8 (a path) is no second crash
        with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as fh:
            fh.write(f"torchbisect {_version()}: {' '.join(['torchbisect', *argv])}\n\n")
            traceback.print_exc(file=fh)
    except OSError:
        traceback.print_exc()
        name = "printed above (no file could be written)"
    from .. import home

    trace = f"the full traceback is in {name}"
    if home():
        trace = f"report it at {home()}/issues with {trace.replace(' is in', ', which is in')}"
    print(
        f"{who}: torchbisect itself failed ({text}), which is no verdict on any build; {trace}",
        file=sys.stderr,
    )
    return Exit.FAILED


def _with_advice(err: TorchbisectError, command: str) -> str:
    if isinstance(err, IndexUnreachable):
        return f"{err}, {_INDEX_ADVICE.get(command, _MATRIX_INDEX_ADVICE)}"
    return str(err)
