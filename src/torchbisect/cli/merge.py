"""`torchbisect merge OUT INPUT…`: join result stores from shards into one.

Inputs are SQLite stores or JSON exports (`Store.export_json`), told apart by their content.  A run
already in OUT is not added again, so merging the same shard twice changes nothing.  An input that
does not exist is reported and skipped: a first scheduled run has no previous store to merge.
OUT ending in `.json` writes a JSON export instead of a SQLite store.  `--json FILE` (or `-`)
writes the merged store's newest runs shaped like the page's results.json.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("out", type=Path, metavar="OUT",
                        help="store to merge into (created if missing; .json: write an export)")
    parser.add_argument("inputs", type=Path, nargs="+", metavar="INPUT",
                        help="SQLite stores or JSON exports to merge")
    from .options import add_json_option

    add_json_option(parser)


def run(args: argparse.Namespace) -> int:
    from ..store.db import Store
    from .options import write_json

    say = _say(to_stderr=args.json == "-")
    if args.out.suffix == ".json":
        with tempfile.TemporaryDirectory() as tmp, Store(Path(tmp) / "merge.sqlite") as store:
            sources = [args.out, *args.inputs] if args.out.is_file() else args.inputs
            _merge(store, sources, out=args.out, say=say)
            store.export_json(args.out)
            total = len(store.runs())
            write_json(args.json, store.latest(), store.bisections())
    else:
        with Store(args.out) as store:
            _merge(store, args.inputs, out=args.out, say=say)
            total = len(store.runs())
            write_json(args.json, store.latest(), store.bisections())
    say(f"{args.out}: {total} runs")
    return 0


def _say(*, to_stderr: bool):
    return lambda text: print(text, file=sys.stderr if to_stderr else sys.stdout)


def _merge(store, inputs: list[Path], *, out: Path, say=print) -> None:
    for path in inputs:
        if not path.is_file():
            say(f"{path}: does not exist, skipped")
            continue
        if path.resolve() == out.resolve() and out.suffix != ".json":
            say(f"{path}: is the output itself, skipped")
            continue
        added, present = store.merge_from(path)
        say(f"{path}: {added} runs added, {present} already present")
