"""`torchbisect report`: render index.html, results.json, summary.md and affected.json.

From the result store by default; `--probe-json` renders probe documents recorded by hand (this is
how reports/sample/ is made from the real H200 results in reports/evidence/hand/).  The page's
upstream and page links come from `references:` in the matrix file, when there is one; its link to
the repository it was built from comes from the Actions context in a workflow
(report/references.py).
With `--runners runners.yaml` the page also lists each declared runner kind and whether it
reported in the store's latest run (the matrix workflow passes it).

One regression per probe: a store (or documents) of one probe draws its page into `--out`; of
several (or a matrix that names several under `probes:`), each regression's page goes into
`--out/<probe>/` and `--out/index.html` lists them (report/site.py)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..cli import options as flags
from ..errors import ConfigError
from ..utils.words import visible

if TYPE_CHECKING:
    from ..config.matrix import MatrixConfig
    from ..config.runners import Runners


def configure(parser: argparse.ArgumentParser) -> None:
    flags.add_store_option(parser, "result store to read")
    flags.add_out_option(
        parser,
        "folder to write the four files into (with several "
        "regressions: a folder each, and the index page)",
    )
    parser.add_argument(
        "--probe-json",
        type=Path,
        nargs="+",
        metavar="FILE",
        help="render these probe JSON documents instead of the store",
    )
    parser.add_argument(
        "--bisection",
        type=Path,
        action="append",
        default=[],
        metavar="FILE",
        help="with --probe-json: a bisection result JSON to draw (repeatable)",
    )
    flags.add_matrix_option(
        parser, "matrix file whose `references:` the page links, when it exists"
    )
    parser.add_argument(
        "--runners",
        type=Path,
        metavar="YAML",
        help="runners.yaml: say on the page which declared runner kinds reported "
        "in the store's latest run and which did not",
    )


@dataclass(frozen=True, kw_only=True)
class ReportOptions:
    """What `report` is asked to draw, built once from the flags: matrix.yaml loaded (None when
    there is no file), runners.yaml loaded with `--runners`."""

    store: Path
    out: Path
    probe_json: tuple[Path, ...] = ()  # probe documents drawn instead of the store
    bisections: tuple[Path, ...] = ()  # with probe_json: bisection results drawn beside them
    matrix: Path  # where matrix.yaml is: its folder's repository is the page's
    config: MatrixConfig | None  # matrix.yaml, loaded once (None: no file there)
    runners: Runners | None = None


def report_options(args: argparse.Namespace) -> ReportOptions:
    """The flags as `report`'s options, each input read once, its mistakes said in one sentence."""
    runners = None
    if args.runners is not None:
        if args.probe_json:
            raise ConfigError(
                "--runners needs the result store (its attendance says which kinds "
                "reported); probe documents hold none: drop --runners or "
                "--probe-json"
            )
        from ..config.runners import load_runners

        runners = load_runners(args.runners)
    return ReportOptions(
        store=args.store,
        out=args.out,
        probe_json=tuple(args.probe_json or ()),
        bisections=tuple(args.bisection),
        matrix=args.matrix,
        config=flags.matrix_if_there(args.matrix),
        runners=runners,
    )


def run(args: argparse.Namespace) -> int:
    from ..report import render
    from ..report.probe_files import DocumentSource

    options = report_options(args)
    page = flags.page_inputs(options.config, options.matrix, options.runners)
    if options.probe_json:
        paths = render(
            DocumentSource(list(options.probe_json), list(options.bisections)),
            options.out,
            links=page.links,
        )
    elif options.bisections:
        raise ConfigError("--bisection needs --probe-json; stored bisections are drawn already")
    elif not flags.store_to_read(options.store):
        raise ConfigError(
            f"no result store at {options.store}: run `torchbisect matrix` first, "
            "or pass --store PATH (or --probe-json FILE …)"
        )
    else:
        from ..store.db import Store

        # Not read_only: a read-only connection leaves -wal and -shm files beside the store
        # (published with it in CI); opening one never changes it (store/db.py).
        with Store(options.store) as store:
            paths = render(
                store, options.out, links=page.links, runners=page.runners, probes=page.probes
            )
    for path in paths:
        print(visible(f"wrote {path}"))  # as `matrix` says it, a path's ESC as ␛
    return 0
