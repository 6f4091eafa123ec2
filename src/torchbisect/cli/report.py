"""`torchbisect report`: render index.html, results.json, summary.md and affected.json.

From the result store by default; `--probe-json` renders probe documents recorded by hand (this is
how reports/sample/ is made from the real H200 results in tests/data/probe/).  The page's upstream
and page links come from `references:` in the matrix file, when there is one; its link to the
repository it was built from comes from the Actions context in a workflow (`repository_url`).
With `--runners runners.yaml` the page also lists each declared runner kind and whether it
reported in the store's latest run (the matrix workflow passes it)."""

from __future__ import annotations

import argparse
import os
import re
import shutil
from pathlib import Path

from ..errors import ConfigError
from . import options as flags


def configure(parser: argparse.ArgumentParser) -> None:
    flags.add_store_option(parser, "result store to read")
    flags.add_out_option(parser, "folder to write the four files into")
    parser.add_argument("--probe-json", type=Path, nargs="+", metavar="FILE",
                        help="render these probe JSON documents instead of the store")
    parser.add_argument("--bisection", type=Path, action="append", default=[], metavar="FILE",
                        help="with --probe-json: a bisection result JSON to draw (repeatable)")
    flags.add_matrix_option(parser, "matrix file whose `references:` the page links, when it "
                                    "exists")
    parser.add_argument("--runners", type=Path, metavar="YAML",
                        help="runners.yaml: say on the page which declared runner kinds reported "
                             "in the store's latest run and which did not")


def links_from(matrix: Path):
    """The report's links from `references:` in `matrix` (the defaults when there is no file),
    and the repository the page is built from (`repository_url`)."""
    from ..report import Links

    if not matrix.is_file():
        return Links(repository=repository_url(matrix, None))
    from ..config.matrix import load_matrix

    refs = load_matrix(matrix).references
    given = {k: v for k, v in (("upstream", refs.upstream), ("page", refs.page)) if v}
    return Links(**given, repository=repository_url(matrix, refs))


def repository_url(matrix: Path, refs) -> str:
    """In a workflow, the repository it runs in (GitHub's Actions context); elsewhere
    `references: repository:` when the matrix names one, else the `origin` of the git checkout
    that holds the matrix file; https URLs only, "" when none is known."""
    if os.environ.get("GITHUB_ACTIONS") == "true" and os.environ.get("GITHUB_REPOSITORY"):
        server = os.environ.get("GITHUB_SERVER_URL", "https://github.com").rstrip("/")
        return _https(f"{server}/{os.environ['GITHUB_REPOSITORY']}")
    named = getattr(refs, "repository", None) if refs is not None else None
    if named:
        return _https(str(named))
    if shutil.which("git") is None:
        return ""
    from ..utils import proc

    folder = Path(matrix).absolute().parent
    found = proc.run(["git", "-C", str(folder), "config", "--get", "remote.origin.url"],
                     timeout=30, check=False)
    return _https(found.output.strip()) if found.returncode == 0 else ""


def _https(url: str) -> str:
    """`git@github.com:o/r.git` and `https://github.com/o/r.git` → `https://github.com/o/r`;
    anything that is not then an https URL without credentials → ""."""
    ssh = re.fullmatch(r"git@([\w.-]+):(\S+?)(?:\.git)?/?", url)
    if ssh:
        url = f"https://{ssh[1]}/{ssh[2]}"
    url = re.sub(r"\.git/?$", "", url)
    return url if re.fullmatch(r"https://[\w.-]+(:\d+)?/[^\s@\"<>]+", url) else ""


def run(args: argparse.Namespace) -> int:
    from ..report import render
    from ..report.probe_files import DocumentSource

    runners = None
    if args.runners is not None:
        if args.probe_json:
            raise ConfigError("--runners needs the result store (its attendance says which kinds "
                              "reported); probe documents hold none: drop --runners or "
                              "--probe-json")
        from ..config.runners import load_runners

        runners = load_runners(args.runners)
    if args.probe_json:
        paths = render(DocumentSource(args.probe_json, args.bisection), args.out,
                       links=links_from(args.matrix))
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
            paths = render(store, args.out, links=links_from(args.matrix), runners=runners)
    for path in paths:
        print(path)
    return 0
