"""`torchbisect plan`: resolve matrix.yaml into cells, update the lock, print and export it.

With `--runners runners.yaml` it plans every declared runner kind for the kind's own platform and
driver (nothing is read from this machine, so it runs on any host: CI plans on ubuntu-latest),
one lock per kind (`<lock-dir>/<name>.lock.json`: cell ids carry no platform, so two kinds cannot
share a lock), and lists each kind's shards for a job matrix (`probes=[{kind, labels, shard}]`).
`--kinds-only` writes the declared kinds without planning (a workflow needs their names and
labels before it can fetch their previous locks or pick a runner).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from ..cli import options as flags
from ..errors import ConfigError
from ..plan.cost import describe, estimate
from .plan_options import PlanOptions
from .plan_table import plan_one, stored_cells, stored_runs

if TYPE_CHECKING:
    from ..config.runners import Kind, Runners


NEEDS = flags.Needs(plans=flags.ALWAYS)  # it plans from --matrix


def configure(parser: argparse.ArgumentParser) -> None:
    flags.add_matrix_option(parser, "the matrix file")
    parser.add_argument(
        "--json",
        type=flags.Output("file", stdout=True),
        metavar="OUT",
        help="also write the plan as JSON (`-`: to stdout, the rest of the output to stderr)",
    )
    flags.add_lock_options(parser, writes=True)
    flags.add_store_option(parser, "result store, to show which cells already have a result")
    parser.add_argument(
        "--hash",
        action="store_true",
        help="download wheels whose index publishes no sha256 and lock their hash",
    )
    parser.add_argument(
        "--python",
        type=flags.python_version,
        metavar="X.Y",
        help="Python for entries that name none (default: this interpreter's)",
    )
    parser.add_argument(
        "--platform",
        type=flags.platform_tag,
        metavar="TAG",
        help="wheel platform, e.g. manylinux_2_17_x86_64 (a runner with glibc "
        "2.17) or linux_aarch64 (any glibc) (default: this machine's, its "
        "glibc included)",
    )
    parser.add_argument(
        "--previous-lock",
        type=Path,
        metavar="PATH",
        help="an older lock (e.g. from the last CI run) whose pins are kept for "
        "cells the current lock lacks; a missing file is ignored",
    )
    parser.add_argument(
        "--shards",
        type=flags.positive,
        metavar="N",
        help="with --github-output: list shards 1/N … N/N for a job matrix",
    )
    parser.add_argument(
        "--github-output",
        type=flags.Output("append"),
        metavar="FILE",
        help="append `shards=[…]` and `cells=N` to this file ($GITHUB_OUTPUT); "
        "with --runners `probes=[{kind, labels, shard}, …]` for a job "
        "matrix's include",
    )
    kinds = parser.add_argument_group("runner kinds (runners.yaml)")
    kinds.add_argument(
        "--runners",
        type=Path,
        metavar="PATH",
        help="plan every kind declared there for its own platform and driver, one lock each",
    )
    kinds.add_argument(
        "--lock-dir",
        type=flags.Output("dir"),
        metavar="DIR",
        help="with --runners: the kinds' locks, DIR/<name>.lock.json (default: "
        "<matrix>.locks/ next to the matrix file)",
    )
    kinds.add_argument(
        "--previous-lock-dir",
        type=Path,
        metavar="DIR",
        help="with --runners: older locks, DIR/<name>.lock.json, as "
        "--previous-lock per kind; a missing file is that kind's first run",
    )
    kinds.add_argument(
        "--json-dir",
        type=flags.Output("dir"),
        metavar="DIR",
        help="with --runners: also write each kind's plan as DIR/<name>.plan.json",
    )
    kinds.add_argument(
        "--kind", metavar="NAME", help="with --runners: only this kind (empty: the first declared)"
    )
    kinds.add_argument(
        "--kinds-only",
        action="store_true",
        help="with --runners and --github-output: plan nothing, write "
        "`kinds=` (the names), `kind=` and `labels=` (--kind's, else the "
        "first's)",
    )
    kinds.add_argument(
        "--online-runners",
        action="append",
        metavar="SCOPE",
        help="with --runners: ask GitHub ($RUNNERS_TOKEN) for the self-hosted "
        "runners of SCOPE (repos/OWNER/REPO, orgs/ORG; repeatable) and "
        "queue no shard of a kind none of whose runners is online; without "
        "the token, or when GitHub does not answer, every kind is queued",
    )


def plan_options(args: argparse.Namespace) -> PlanOptions:
    """The flags as `plan`'s options: their mistakes said first, then runners.yaml and
    matrix.yaml read, each once."""
    _check_flags(args)
    runners: Runners | None = None
    kinds: tuple[Kind, ...] = ()
    if args.runners is not None:
        from ..config.runners import load_runners
        from .plan_kinds import chosen

        runners = load_runners(args.runners)
        kinds = chosen(runners, args.kind)
    config = None if args.kinds_only else flags.load_matrix_file(args.matrix)
    return PlanOptions(
        matrix=args.matrix,
        config=config,
        json=args.json,
        lock=args.lock,
        offline=args.offline,
        driver=args.driver,
        store=args.store,
        hash=args.hash,
        python=args.python,
        platform=args.platform,
        previous_lock=args.previous_lock,
        shards=args.shards,
        github_output=args.github_output,
        runners=runners,
        kinds=kinds,
        lock_dir=args.lock_dir,
        previous_lock_dir=args.previous_lock_dir,
        json_dir=args.json_dir,
        kinds_only=args.kinds_only,
        online_runners=tuple(args.online_runners or ()),
    )


def run(args: argparse.Namespace) -> int:
    options = plan_options(args)
    if options.json == "-":  # the document alone on stdout: every line of the plan to stderr
        out = sys.stdout
        with contextlib.redirect_stdout(sys.stderr):
            return _run(options, json_to=out)
    return _run(options, json_to=None)


def _run(options: PlanOptions, *, json_to: TextIO | None) -> int:
    if options.runners is not None:
        from .plan_kinds import run_kinds

        return run_kinds(options)
    previous = (
        options.previous_lock if options.previous_lock and options.previous_lock.is_file() else None
    )
    locked = plan_one(
        options,
        lock=options.lock,
        previous=previous,
        driver=options.driver,
        platform=options.platform,
    )
    plan = locked.plan
    stored = stored_cells(options.store, plan)
    cost = estimate(
        plan.cells,
        stored=[c for c, s in stored.items() if s == "yes"],
        lock=locked.lock,
        runs=stored_runs(options.store),
        gpus=_gpu_count(),
    )
    print(describe(cost))
    doc = {**plan.to_json(), "cost": cost.to_json()}  # the figures the lines above say
    if json_to is not None:
        json_to.write(json.dumps(doc, indent=2) + "\n")
    elif options.json:
        flags.write_text(options.json, json.dumps(doc, indent=2) + "\n")
    if options.github_output:
        # never more shards than cells: a GPU runner with nothing to probe is a wasted job
        total = min(options.shards or 1, max(len(plan.cells), 1))
        shards = [f"{i}/{total}" for i in range(1, total + 1)]
        with options.github_output.open("a", encoding="utf-8") as out:
            out.write(f"shards={json.dumps(shards)}\ncells={len(plan.cells)}\n")
    return 0


_ONE_KIND = ("--lock", "--previous-lock", "--json", "--platform", "--driver", "--shards")
_KINDS = (
    "--lock-dir",
    "--previous-lock-dir",
    "--json-dir",
    "--kind",
    "--kinds-only",
    "--online-runners",
)


def _check_flags(args: argparse.Namespace) -> None:
    """One sentence, exit 2, for flags that do not go together."""
    given = {
        flag
        for flag in (*_ONE_KIND, *_KINDS)
        if getattr(args, flag[2:].replace("-", "_")) not in (None, False)
    }
    if args.runners is None:
        for flag in _KINDS:
            if flag in given:
                raise ConfigError(
                    f"{flag} is for runner kinds: add --runners runners.yaml, or leave {flag} out"
                )
    else:
        for flag in _ONE_KIND:
            if flag in given:
                raise ConfigError(
                    f"{flag} plans one machine, but --runners plans every kind "
                    "as runners.yaml declares it (platform, driver, shards): leave "
                    f"{flag} out{_instead(flag)}"
                )
        if args.kinds_only:
            planning = [
                f
                for f in ("--lock-dir", "--previous-lock-dir", "--json-dir", "--online-runners")
                if f in given
            ] + (["--hash"] if args.hash else [])
            if planning:
                raise ConfigError(
                    f"--kinds-only plans nothing, so {planning[0]} has nothing to "
                    "do: leave one of them out"
                )
            if args.github_output is None:
                raise ConfigError(
                    "--kinds-only writes the declared kinds to --github-output: "
                    "add --github-output FILE"
                )


def _instead(flag: str) -> str:
    other = {
        "--lock": "--lock-dir",
        "--previous-lock": "--previous-lock-dir",
        "--json": "--json-dir",
        "--shards": "`shards:` in runners.yaml",
        "--driver": "`driver:` in runners.yaml",
        "--platform": "`platform:` in runners.yaml",
    }[flag]
    return f" (use {other})"


def _gpu_count() -> int:
    from ..utils.gpus import list_gpus

    return len(list_gpus()) or 1
