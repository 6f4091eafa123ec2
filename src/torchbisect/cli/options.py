"""Flags that several commands share, so each has one name and one meaning everywhere.

`--backend` takes the same choices wherever a build is installed or probed; `--interpreter PATH` is
an interpreter in `matrix`, `probe` and `bench` (`--python` there is its old name, kept with a
note: in `plan` and `bisect`, `--python X.Y` is a Python version); `--json OUT` writes runs shaped
like the page's results.json; `--fail-on` chooses which outcomes make `matrix` exit non-zero;
`--cells` and `--skip` take glob patterns; `--matrix`, `--store`, `--out` and `--workdir` default to
the same paths (defaults.py) in every command that has them.
"""

from __future__ import annotations

import argparse
import fnmatch
import sys
from pathlib import Path

from .. import defaults
from ..errors import ConfigError, InfraError
from ..model import Cell, CellRun, RunStatus, Verdict


def add_matrix_option(parser: argparse.ArgumentParser, help_text: str = "matrix file") -> None:
    parser.add_argument("--matrix", type=Path, default=defaults.MATRIX,
                        help=f"{help_text} (default: %(default)s)")


def add_lock_options(parser: argparse.ArgumentParser) -> None:
    """`--lock`, `--offline` and `--driver`: how a command that plans finds its wheels."""
    parser.add_argument("--lock", type=Path, metavar="PATH",
                        help="lock file (default: <matrix>.lock.json next to the matrix file)")
    parser.add_argument("--offline", action="store_true",
                        help="plan from the lock alone; no index is contacted")
    parser.add_argument("--driver", metavar="VERSION",
                        help="NVIDIA driver that `cuda: auto` plans for (default: nvidia-smi's)")


def add_store_option(parser: argparse.ArgumentParser, help_text: str = "result store") -> None:
    parser.add_argument("--store", type=Path, default=defaults.STORE, metavar="PATH",
                        help=f"{help_text} (default: %(default)s)")


def add_out_option(parser: argparse.ArgumentParser, help_text: str) -> None:
    parser.add_argument("--out", type=Path, default=defaults.OUT,
                        help=f"{help_text} (default: %(default)s/)")


def add_workdir_option(parser: argparse.ArgumentParser, help_text: str) -> None:
    """No default value: a backend given no workdir uses defaults.WORKDIR itself."""
    parser.add_argument("--workdir", type=Path, metavar="DIR",
                        help=f"{help_text} (default: {defaults.WORKDIR}/)")


def add_backend_option(parser: argparse.ArgumentParser, help_text: str, **kwargs) -> None:
    from ..backends import BACKENDS

    parser.add_argument("--backend", choices=tuple(BACKENDS), help=help_text, **kwargs)


class _Deprecated(argparse.Action):
    """`--python PATH`, the interpreter flag's old name: still works, and says so."""

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"note: {option_string} PATH is now --interpreter PATH ({option_string} X.Y means a "
              "Python version in plan and bisect)", file=sys.stderr)
        setattr(namespace, self.dest, values)


def add_interpreter_option(parser: argparse.ArgumentParser, help_text: str, **kwargs) -> None:
    parser.add_argument("--interpreter", metavar="PATH", help=help_text, **kwargs)
    parser.add_argument("--python", dest="interpreter", metavar="PATH", action=_Deprecated,
                        help=argparse.SUPPRESS)


def add_json_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", metavar="OUT",
                        help="also write the runs as JSON, shaped like the page's results.json "
                             "(`-`: to stdout, the rest of the output to stderr)")


def write_json(target: str | None, runs: list[CellRun], bisections=()) -> None:
    if not target:
        return
    from ..report import results_json

    text = results_json(runs, list(bisections))
    if target == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        Path(target).parent.mkdir(parents=True, exist_ok=True)
        Path(target).write_text(text, encoding="utf-8")


def add_fail_on_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--fail-on", default="infra", metavar="WHAT,…", type=_fail_on,
        help="exit non-zero when some cell is `affected` (1) or an `infra` failure (3); "
             "`none`: always 0 (default: %(default)s)")


def _fail_on(text: str) -> frozenset[str]:
    kinds = {k.strip() for k in text.split(",") if k.strip()}
    if not kinds or not kinds <= {"affected", "infra", "none"}:
        raise argparse.ArgumentTypeError("expected affected, infra, both (affected,infra) or none")
    return frozenset(kinds - {"none"})


def exit_status(runs: list[CellRun], fail_on: frozenset[str]) -> int:
    """1 when asked to fail on an affected build and one is (a definite answer, so it wins), 3
    when asked to fail on infrastructure failures and one happened, else 0."""
    if "affected" in fail_on and any(r.verdict is Verdict.AFFECTED for r in runs):
        return 1
    infra = any(r.status is RunStatus.INFRA_FAILURE for r in runs)
    return InfraError.exit_code if "infra" in fail_on and infra else 0


def by_patterns(cells: tuple[Cell, ...], *, keep: str, skip: str, matrix: Path) -> tuple[Cell, ...]:
    """`--cells` and `--skip`: comma lists of glob patterns over cell ids."""
    if keep:
        cells = tuple(c for c in cells if _matches(c.id, _patterns(cells, keep, "cells", matrix)))
    if skip:
        cells = tuple(c for c in cells if not _matches(c.id, _patterns(cells, skip, "skip",
                                                                       matrix)))
    return cells


def _patterns(cells: tuple[Cell, ...], text: str, flag: str, matrix: Path) -> list[str]:
    """The patterns of one flag; one that matches no cell is a mistake, said as such."""
    patterns = [p.strip() for p in text.split(",") if p.strip()]
    unknown = [p for p in patterns if not any(_matches(c.id, [p]) for c in cells)]
    if unknown:
        raise ConfigError(f"--{flag}: no cell matches {', '.join(unknown)} in the plan of "
                          f"{matrix}; `torchbisect plan` lists them")
    return patterns


def _matches(cell_id: str, patterns: list[str]) -> bool:
    return any(fnmatch.fnmatchcase(cell_id, p) for p in patterns)
