"""`torchbisect merge OUT INPUT…`: join result stores from shards into one.

Inputs are SQLite stores or JSON exports (`Store.export_json`), told apart by their content.  A run
already in OUT is not added again, so merging the same shard twice changes nothing.  Every input is
read into a scratch store first, and OUT is written only once all of them were read: an input that
is missing, unreadable or damaged is one sentence (exit 2) and OUT stays as it was, or is not made.
An input that may rightly be absent (the previous store, on the first run ever) is named with
`--allow-missing PATH`.  OUT ending in `.json` writes a JSON export instead of a SQLite store.
`--json FILE` (or `-`) writes the merged store's newest runs shaped like the page's results.json.
`--shards DIR` adds every `DIR/*/shard.sqlite` (the probe jobs' `store-shard-*` artifacts, one
folder each): none there is said, not an error, since the page then says which runner kinds did
not report.  `--roll-call` (the scheduled build) also records this CI run ($GITHUB_RUN_ID and
attempt) as merged, so the page reads it as the latest run even when no shard of any kind
reported in it.

Inputs are data, never code (`store/foreign.py`): each is read from a private copy taken with its
`-wal`, so a shard killed mid-run merges every run it committed; an entry dated more than
`CLOCK_SKEW` after the merge is refused and said.  OUT is left as one file (its `-wal`
checkpointed into it): the probe job's upload step copies the live shard store this way.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from ..cli.options import Needs, Output
from ..errors import ConfigError

if TYPE_CHECKING:
    from ..store.db import Store

# How far a runner's clock may run ahead of the merge's before its entries are refused.
CLOCK_SKEW = timedelta(minutes=10)


NEEDS = Needs(holds=("out",))  # the store it writes, locked against a second run


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "out",
        type=Output("file"),
        metavar="OUT",
        help="store to merge into (created if missing; .json: write an export)",
    )
    parser.add_argument(
        "inputs",
        type=Path,
        nargs="+",
        metavar="INPUT",
        help="SQLite stores or JSON exports to merge",
    )
    parser.add_argument(
        "--shards",
        type=Path,
        metavar="DIR",
        help="also every DIR/*/shard.sqlite (the probe jobs' store-shard-* "
        "artifacts); none there is said, and is no error",
    )
    parser.add_argument(
        "--allow-missing",
        type=Path,
        action="append",
        default=[],
        metavar="PATH",
        help="an INPUT that may not exist yet, e.g. the previous store on a first "
        "run (repeatable); any other missing input is an error",
    )
    parser.add_argument(
        "--roll-call",
        action="store_true",
        help="record this CI run ($GITHUB_RUN_ID) as merged: the page then takes "
        "it as the latest run, and says which runner kinds did not report "
        "in it, even if none did",
    )
    from ..cli.options import add_json_option

    add_json_option(parser)


def run(args: argparse.Namespace) -> int:
    from ..store.db import Store

    say = _say(to_stderr=args.json == "-")
    inputs = _present(
        args.inputs + _shards(args.shards, say), allowed=args.allow_missing, out=args.out, say=say
    )
    with tempfile.TemporaryDirectory(prefix="torchbisect-merge-") as tmp:
        scratch = Path(tmp) / "merge.sqlite"
        with Store(scratch) as work:
            if args.out.is_file():
                work.merge_from(args.out)  # what OUT holds: the counts below are against it
            not_after = datetime.now(timezone.utc) + CLOCK_SKEW
            for path in inputs:
                added, present = work.merge_from(path, not_after=not_after, say=say)
                say(f"{path}: {added} runs added, {present} already present")
            if args.roll_call:
                say(f"roll call: run {_roll_call(work)} merged")
            # Every input was read: only now is OUT written (an export, or one transaction).
            if args.out.suffix == ".json":
                work.export_json(args.out)
                total = _written(work, args.json)
            else:
                with Store(args.out) as store:
                    store.merge_from(scratch)
                    total = _written(store, args.json)
                    store.checkpoint()  # OUT alone holds every run: an upload takes only it
    say(f"{args.out}: {total} runs")
    return 0


def _shards(folder: Path | None, say: Callable[[str], None]) -> list[Path]:
    if folder is None:
        return []
    found = sorted(folder.glob("*/shard.sqlite")) if folder.is_dir() else []
    if not found:
        say(
            f"{folder}: no shard store (*/shard.sqlite) there: no shard of any runner kind "
            "reported, so none is merged"
        )
    return found


def _roll_call(store: Store) -> str:
    """Record this CI run as merged; its id, as the shards' attendance names it."""
    import socket

    from ..model import Attendance
    from ..run.kind import run_id
    from ..utils.clock import now

    at = now()
    run = run_id(at)
    store.add_attendance(Attendance.roll_call(run, at, socket.gethostname()))
    return run


def _written(store: Store, json_target: str | None) -> int:
    from ..cli.options import write_json

    if json_target:  # the newest runs only when asked: a merged store may be huge
        write_json(json_target, store.latest(), store.bisections())
    return store.count()  # not every run in memory


def _say(*, to_stderr: bool) -> Callable[[str], None]:
    """A line about the stores, their paths' control codes shown as pictures (words.visible)."""
    from ..utils.words import visible

    return lambda text: print(visible(text), file=sys.stderr if to_stderr else sys.stdout)


def _present(
    inputs: list[Path], *, allowed: list[Path], out: Path, say: Callable[[str], None]
) -> list[Path]:
    """The inputs to read, after refusing (before anything is written) any that is missing and
    not allowed to be, or that cannot be read."""
    stray = [str(p) for p in allowed if p not in inputs]
    if stray:
        raise ConfigError(
            f"--allow-missing {', '.join(stray)}: not among the inputs; name the "
            "same path as the INPUT it excuses"
        )
    kept = []
    for path in inputs:
        # realpath, not Path.resolve(): a link loop is an input to refuse, and resolve() raises
        # RuntimeError on one (Python 3.11, 3.12)
        if os.path.realpath(path) == os.path.realpath(out) and out.suffix != ".json":
            say(f"{path}: is the output itself, skipped")
        elif not path.exists() and path in allowed:
            say(f"{path}: does not exist, which --allow-missing allows (nothing to merge yet)")
        else:
            _readable(path)
            kept.append(path)
    return kept


def _readable(path: Path) -> None:
    if path.is_symlink() and not path.exists():
        raise ConfigError(
            f"{path}: is a link to nothing (its target is missing, or the links loop), so "
            "nothing was merged; give a results .sqlite file or a JSON export"
        )
    if not path.exists():
        raise ConfigError(
            f"{path}: no such file, so nothing was merged; check the path, or pass "
            f"--allow-missing {path} when it rightly does not exist yet"
        )
    if not path.is_file():
        raise ConfigError(
            f"{path}: is not a file, so nothing was merged; give a results .sqlite "
            "file or a JSON export"
        )
    try:
        with path.open("rb") as fh:
            fh.read(1)
    except OSError as err:
        raise ConfigError(
            f"{path}: cannot be read ({err.strerror}), so nothing was merged"
        ) from None
