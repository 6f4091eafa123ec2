"""`torchbisect merge OUT INPUT…`: join result stores from shards into one.

Inputs are SQLite stores or JSON exports (`Store.export_json`), told apart by their content.  A run
already in OUT is not added again, so merging the same shard twice changes nothing.  An input that
does not exist is reported and skipped: a first scheduled run has no previous store to merge.
OUT ending in `.json` writes a JSON export instead of a SQLite store.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("out", type=Path, metavar="OUT",
                        help="store to merge into (created if missing; .json: write an export)")
    parser.add_argument("inputs", type=Path, nargs="+", metavar="INPUT",
                        help="SQLite stores or JSON exports to merge")


def run(args: argparse.Namespace) -> int:
    from ..store import Store

    if args.out.suffix == ".json":
        with tempfile.TemporaryDirectory() as tmp, Store(Path(tmp) / "merge.sqlite") as store:
            sources = [args.out, *args.inputs] if args.out.is_file() else args.inputs
            _merge(store, sources, out=args.out)
            store.export_json(args.out)
            total = len(store.runs())
    else:
        with Store(args.out) as store:
            _merge(store, args.inputs, out=args.out)
            total = len(store.runs())
    print(f"{args.out}: {total} runs")
    return 0


def _merge(store, inputs: list[Path], *, out: Path) -> None:
    for path in inputs:
        if not path.is_file():
            print(f"{path}: does not exist, skipped")
            continue
        if path.resolve() == out.resolve() and out.suffix != ".json":
            print(f"{path}: is the output itself, skipped")
            continue
        added, present = store.merge_from(path)
        print(f"{path}: {added} runs added, {present} already present")
