"""`torchbisect pages [--check]`: redraw the pages committed under reports/ from their own data.

In a clone of torchbisect's repository (what `nox -s pages` runs); pages/committed.py holds what
is drawn from what.  `--check` changes nothing and exits 6 when a page is stale.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import ConfigError
from ..exits import Exit


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--repo",
        type=Path,
        default=Path.cwd(),
        help="the repository's root (default: the current folder)",
    )
    parser.add_argument(
        "--check", action="store_true", help="change nothing; exit 6 when a committed page is stale"
    )


def run(args: argparse.Namespace) -> int:
    from ..pages.committed import regenerate

    repo = args.repo.resolve()
    if not (repo / "reports").is_dir():
        raise ConfigError(
            f"{repo} has no reports/ folder: run this from the root of a clone of "
            "torchbisect's repository, or pass --repo"
        )
    changed = regenerate(repo, check=args.check)
    return Exit.OUT_OF_DATE if args.check and changed else Exit.OK
