"""`torchbisect schema`: write the JSON Schemas torchbisect publishes, from the types they describe.

matrix.schema.json and runners.schema.json (editors validate the two YAML files against them) come
from the config models;
results.schema.json and probe.schema.json (a page's results.json, a probe's document) from
report/documents.py (the probe's types from probe/shape.py).  They sit side by side, and
`report` copies the last two into every site.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..cli.options import Output
from ..config.schema import runners_schema_text
from ..config.schema import schema_text as matrix_schema_text
from ..exits import Exit
from ..report.documents import SCHEMA_FILES, schema_text
from ..utils import files


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--out",
        type=Output("file"),
        default=Path("matrix.schema.json"),
        help="where to write matrix.yaml's schema (default: matrix.schema.json); "
        "runners.schema.json, results.schema.json and probe.schema.json go "
        "beside it",
    )
    parser.add_argument(
        "--check", action="store_true", help="write nothing; exit 6 when a file is out of date"
    )


def run(args: argparse.Namespace) -> int:
    folder = args.out.parent
    texts = {
        args.out: matrix_schema_text(),
        folder / "runners.schema.json": runners_schema_text(),
        **{folder / file: schema_text(name) for name, file in SCHEMA_FILES.items()},
    }
    stale = [path for path, text in texts.items() if _read(path) != text]
    if args.check:
        if stale:
            print(f"{', '.join(map(str, stale))} out of date: run `nox -s schema`")
            return Exit.OUT_OF_DATE
        print(f"{', '.join(map(str, texts))} up to date")
        return 0
    folder.mkdir(parents=True, exist_ok=True)  # the output gate checked it can be made
    for path in stale:
        files.write_text(path, texts[path])
    print(f"wrote {', '.join(map(str, stale))}" if stale else "every schema was up to date")
    return 0


def _read(path: Path) -> str | None:
    return path.read_text(encoding="utf-8") if path.is_file() else None
