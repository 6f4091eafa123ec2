"""Command line: `python -m torchbisect <command>`; the nox sessions are thin wrappers around it.

Each command lives in its own module here with `configure(parser)` and `run(args) -> int`; only the
chosen command's module is imported, so `plan` never pays for the Docker SDK.
`main` is the one place that turns a TorchbisectError into a one-sentence message and exit code.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from ..errors import IndexUnreachable, TorchbisectError

# command name (also its module under torchbisect.cli) -> one-line help
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
}

# What to do about an index that does not answer, in the terms of the command that asked it.
_INDEX_ADVICE = {
    "bisect": "or pass --index-url with a mirror (a PEP 503 index URL, file:// URL or folder)",
}
_MATRIX_INDEX_ADVICE = "or point `indexes` in the matrix file (--matrix) at a mirror"


def _parser(chosen: str | None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="torchbisect",
        description="Test PyTorch builds for the lazy-clone / CUDA Graph stale-data bug.",
    )
    parser.add_argument("--version", action="version", version=f"torchbisect {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, help_text in COMMANDS.items():
        cmd = sub.add_parser(name, help=help_text, description=help_text)
        if name == chosen:
            module = importlib.import_module(f"{__name__}.{name}")
            module.configure(cmd)
            cmd.set_defaults(_run=module.run)
    return parser


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("torchbisect")
    except PackageNotFoundError:  # run from a source tree that was never installed
        from .. import __version__

        return __version__


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    chosen = next((a for a in argv if a in COMMANDS), None)
    args = _parser(chosen).parse_args(argv)
    try:
        return int(args._run(args) or 0)
    except TorchbisectError as err:
        print(f"torchbisect {args.command}: error: {_with_advice(err, args.command)}",
              file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        print(f"torchbisect {args.command}: interrupted", file=sys.stderr)
        return 130


def _with_advice(err: TorchbisectError, command: str) -> str:
    if isinstance(err, IndexUnreachable):
        return f"{err}, {_INDEX_ADVICE.get(command, _MATRIX_INDEX_ADVICE)}"
    return str(err)
