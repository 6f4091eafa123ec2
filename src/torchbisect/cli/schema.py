"""`torchbisect schema`: write the JSON Schema of matrix.yaml that editors validate against."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..config.schema import schema_text


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, default=Path("matrix.schema.json"),
                        help="where to write it (default: matrix.schema.json)")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 when the file is out of date")


def run(args: argparse.Namespace) -> int:
    text = schema_text()
    current = args.out.read_text(encoding="utf-8") if args.out.is_file() else None
    if args.check:
        if current != text:
            print(f"{args.out} is out of date: run `nox -s schema`")
            return 1
        print(f"{args.out} is up to date")
        return 0
    if current != text:
        args.out.write_text(text, encoding="utf-8")
    print(f"wrote {args.out}")
    return 0
