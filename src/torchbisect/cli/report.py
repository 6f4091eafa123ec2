"""`torchbisect report`: render index.html, results.json, summary.md and affected.json.

From the result store by default; `--probe-json` renders probe documents recorded by hand (this is
how reports/sample/ is made from the real H200 results in tests/data/probe/).  The page's upstream
and page links come from `references:` in the matrix file, when there is one; its link to the
repository it was built from comes from the Actions context in a workflow (report/references.py).
With `--runners runners.yaml` the page also lists each declared runner kind and whether it
reported in the store's latest run (the matrix workflow passes it).

One regression per probe: a store (or documents) of one probe draws its page into `--out`; of
several (or a matrix that names several under `probes:`), each regression's page goes into
`--out/<probe>/` and `--out/index.html` lists them (report/site.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import ConfigError
from ..utils.words import visible
from . import options as flags


def configure(parser: argparse.ArgumentParser) -> None:
    flags.add_store_option(parser, "result store to read")
    flags.add_out_option(parser, "folder to write the four files into (with several "
                                 "regressions: a folder each, and the index page)")
    parser.add_argument("--probe-json", type=Path, nargs="+", metavar="FILE",
                        help="render these probe JSON documents instead of the store")
    parser.add_argument("--bisection", type=Path, action="append", default=[], metavar="FILE",
                        help="with --probe-json: a bisection result JSON to draw (repeatable)")
    flags.add_matrix_option(parser, "matrix file whose `references:` the page links, when it "
                                    "exists")
    parser.add_argument("--runners", type=Path, metavar="YAML",
                        help="runners.yaml: say on the page which declared runner kinds reported "
                             "in the store's latest run and which did not")


def run(args: argparse.Namespace) -> int:
    from ..report import render
    from ..report.probe_files import DocumentSource
    from ..report.references import links_from

    runners = None
    if args.runners is not None:
        if args.probe_json:
            raise ConfigError("--runners needs the result store (its attendance says which kinds "
                              "reported); probe documents hold none: drop --runners or "
                              "--probe-json")
        from ..config.runners import load_runners

        runners = load_runners(args.runners)
    links = links_from(args.matrix)
    probes = matrix_probes(args.matrix)
    if args.probe_json:
        paths = render(DocumentSource(args.probe_json, args.bisection), args.out, links=links)
    elif args.bisection:
        raise ConfigError("--bisection needs --probe-json; stored bisections are drawn already")
    elif not args.store.is_file():
        raise ConfigError(f"no result store at {args.store}: run `torchbisect matrix` first, "
                          "or pass --store PATH (or --probe-json FILE …)")
    else:
        from ..store.db import Store

        # Not read_only: a read-only connection leaves -wal and -shm files beside the store
        # (published with it in CI); opening one never changes it (store/db.py).
        with Store(args.store) as store:
            paths = render(store, args.out, links=links, runners=runners, probes=probes)
    for path in paths:
        print(visible(f"wrote {path}"))  # as `matrix` says it, a path's ESC as ␛
    return 0


def matrix_probes(matrix: Path) -> list[str]:
    """The probes the matrix names under `probes:` (each drawn, runs or not); none without the
    file or the key."""
    if not Path(matrix).is_file():
        return []
    from ..config.matrix import load_matrix

    return list(getattr(load_matrix(matrix), "probes", None) or ())
