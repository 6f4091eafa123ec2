"""`torchbisect init [PATH]`: write the default matrix.yaml (and its schema) for editing.

The folder that holds it becomes a project: run there, torchbisect plans from that file and keeps
its store, page and work folder there (defaults.py).  An existing file is never overwritten
without `--force`.  Exit 0, or 2 when the file exists.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from .. import defaults
from ..cli.options import Output
from ..errors import ConfigError
from ..utils import files


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "path",
        nargs="?",
        type=Output("file"),
        default=Path(defaults.PROJECT_FILE),
        help="the matrix file to write (default: %(default)s); its schema, "
        "matrix.schema.json, goes beside it for editors",
    )
    parser.add_argument("--force", action="store_true", help="overwrite an existing file")


def run(args: argparse.Namespace) -> int:
    from ..config.schema import schema_text

    path: Path = args.path
    if path.exists() and not args.force:
        raise ConfigError(
            f"{path} exists already: edit it, or pass --force to replace it with "
            "torchbisect's default"
        )
    files.write_text(path, defaults.packaged_matrix().read_text(encoding="utf-8"))
    files.write_text(path.parent / "matrix.schema.json", schema_text())
    print(
        f"wrote {path} (and matrix.schema.json beside it, for editors): edit it, then "
        f"`torchbisect plan{_matrix_flag(path)}` lists its builds and what they cost, and "
        f"`torchbisect matrix{_matrix_flag(path)}` probes them"
    )
    return 0


def _matrix_flag(path: Path) -> str:
    return "" if path == Path(defaults.PROJECT_FILE) else f" --matrix {path}"
