"""`torchbisect bisect`: find the first bad (or, with --find-fix, first fixed) nightly.

Flags become `BisectOptions`; progress goes to stderr as it happens; the result is printed as a
short report and written as JSON (`--json`) and Markdown (`--markdown`, e.g. a CI job summary),
both drawn by `report.bisection_text`.
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .. import defaults
from ..bisect.candidates import Candidate, CandidateList, parse_end, release_of
from ..bisect.driver import Progress
from ..bisect.forget import Forgotten, describe
from ..bisect.run import BisectOptions, bisect, take_back
from ..bisect.verdicts import StoppedSearch
from ..bisect.walk import DEFAULT_LIMIT
from ..cli import options as flags
from ..cli.options import add_backend_option
from ..config.fields import MAX_TRIALS
from ..errors import ConfigError
from ..exits import Exit
from ..outcome import Direction, NightlyPoint
from ..probe.info import ProbeOutput
from ..probe.scripts import default_probe, probe_info, probe_path
from ..report.writers.bisection_text import (
    render_markdown,
    render_stopped_markdown,
    render_text,
)
from ..utils.words import count

MAX_REPEAT = 1_000  # --repeat: runs of a whole script per verdict; more is a run that never ends

REPEAT_DEFAULT = (
    "--repeat 2, the default with --script: every nightly or commit judged now runs "
    "the script twice (and the two that decide the range once more), about twice "
    "the runs of --repeat 1, so that a flaky script is said to be flaky instead "
    "of giving a wrong exact answer"
)


def _probes_on_a_gpu(args: argparse.Namespace) -> bool:
    """`bisect --script` decides without the probe, and `--forget` alone probes nothing."""
    return args.script is None and args.bad is not None


NEEDS = flags.Needs(gpu=_probes_on_a_gpu, holds=("store", "workdir"))


def configure(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add(
        "--good",
        default=None,
        metavar="DATE|VERSION",
        help="a nightly without the bug: 2025-08-01, 20250801, '3 days ago' or 2.10.0.dev20250801; "
        "or a release such as 2.9.0 when --bad is one too, to bisect releases (none: walk "
        "from --bad, back or, with --find-fix, forward, to find one)",
    )
    add(
        "--bad",
        default=None,
        metavar="DATE|VERSION",
        help="a nightly (or, with a release --good, a release such as 2.15.0) with the bug "
        "(needed unless --forget is all you ask)",
    )
    add(
        "--find-fix",
        action="store_true",
        help="find the first good nightly after a bad one (--bad is then the older end)",
    )
    add(
        "--cuda",
        type=flags.cuda_tag,
        default="cu130",
        metavar="TAG",
        help="CUDA tag of the wheels (default cu130); for releases, `auto`: each release's own "
        "build, of the newest CUDA this driver runs (on a PyPI-shaped index the one file "
        "pip installs, named by the CUDA its metadata pins)",
    )
    add(
        "--python",
        type=flags.python_version,
        default=f"{sys.version_info.major}.{sys.version_info.minor}",
        help="Python of the wheels and venvs (default: this interpreter's)",
    )
    add(
        "--platform",
        type=flags.platform_tag,
        default=None,
        help="wheel platform, e.g. manylinux_2_17_x86_64 for a "
        "runner with glibc 2.17 (default: this machine's, its glibc included)",
    )
    add(
        "--probe",
        type=flags.nonempty,
        default=None,
        metavar="NAME",
        help="the probe that decides: NAME.py found in probes/ beside matrix.yaml, in the "
        "folders TORCHBISECT_PROBES names, or among the shipped ones; a JSON-document probe "
        "or a plain `git bisect run` script (default: stale_replay)",
    )
    add(
        "--case",
        default=None,
        help="probe case that decides (default: the one the probe's file declares, BISECT_CASE; "
        "an exit-status probe's one case; else the first of the probe's CASE_LABELS)",
    )
    add(
        "--trials",
        type=int,
        default=None,
        metavar="N",
        help="trials per nightly for the cases a probe judges over trials (its TRIAL_CASES: "
        "a race that shows now and then)",
    )
    add(
        "--min-affected",
        type=int,
        default=None,
        metavar="K",
        help="a case judged over trials is bad when affected on at least K of N trials "
        "(default: the probe's TRIAL_CASES rule, else 1; --min-stale K, its old name, "
        "still works)",
    )
    add("--min-stale", dest="min_affected", type=int, metavar="K", help=argparse.SUPPRESS)
    add(
        "--script",
        default=None,
        metavar="CMD",
        help="decide with CMD instead of the probe: exit 0 good, 125 skip, 1-127 bad, >127 abort",
    )
    add(
        "--index-url",
        type=flags.nonempty,
        default=None,
        metavar="URL",
        help="wheel index, file:// URL or folder (default: pytorch's nightly index, or its "
        "release index when both ends are release versions)",
    )
    add_backend_option(
        parser, "where nightlies are installed (default: chosen for this host)", default=None
    )
    add(
        "--overlay",
        action="store_true",
        help="install only the torch wheel (--no-deps) over this interpreter's packages, as "
        "`matrix --overlay` does (runners without network, NGC images)",
    )
    flags.add_store_option(
        parser, "SQLite store shared with the matrix; reruns reuse its verdicts", writes=True
    )
    add(
        "--workdir",
        type=flags.Output("dir"),
        default=defaults.WORKDIR,
        metavar="DIR",
        help="where the venv backend keeps its venvs and downloads (default %(default)s)",
    )
    add(
        "--repo",
        type=Path,
        default=None,
        metavar="PATH",
        help="a pytorch clone with the nightly branch, for main shas and `git log`",
    )
    add(
        "--pytorch-repo",
        type=Path,
        default=None,
        metavar="PATH",
        help="a pytorch clone (`git clone --filter=blob:none` is enough): after the nightlies, "
        "bisect the main-branch commits of the pair, running Python-only commits on a "
        "nightly's binary (implies --repo PATH; needs the venv backend)",
    )
    add("--no-github", action="store_true", help="do not ask the GitHub API for main shas")
    add(
        "--timeout",
        type=float,
        default=defaults.TIMEOUT,
        metavar="SECONDS",
        help="per nightly (default %(default).0f)",
    )
    add(
        "--repeat",
        type=int,
        default=None,
        metavar="N",
        help="with --script: ask it N times of every nightly (and, with --pytorch-repo, "
        "commit) it judges now, and N-1 more at the two that decide the range; a script "
        "whose answers differ is reported as flaky, exit 7 (default 2)",
    )
    add(
        "--forget",
        action="append",
        default=[],
        metavar="DATE|VERSION|COMMIT",
        help="first drop the stored verdict of this build that the bisection would reuse (a "
        "mistaken answer), so it is asked again; names each dropped row; repeatable",
    )
    add(
        "--walk-limit",
        type=int,
        default=None,
        metavar="DAYS",
        help=f"without --good: how many days from --bad the walk to a good nightly may go "
        f"(default {DEFAULT_LIMIT})",
    )
    add(
        "--json",
        type=flags.Output("file", stdout=True),
        default=None,
        metavar="OUT",
        help="write the result as JSON (`-`: to stdout, the report to stderr)",
    )
    add(
        "--markdown",
        type=flags.Output("append"),
        default=None,
        metavar="OUT",
        help="append the result as Markdown",
    )


def check_args(args: argparse.Namespace) -> None:
    """The flags' own checks (cli/__init__ calls them before it waits for or holds the run lock
    on the store and workdir): a mistake in one is one sentence at once, whoever holds them."""
    _options(args)


def run(args: argparse.Namespace) -> int:
    options = _options(args)
    for what in args.forget:
        _say_forgotten(what, take_back(options, what), options)
    if args.bad is None:
        return 0
    try:
        done = bisect(
            options,
            _Console(
                repeat=options.repeat, default=args.script is not None and args.repeat is None
            ),
        )
    except StoppedSearch as err:  # a gate reading --json or --markdown learns why, and how far
        if err.so_far is not None:
            _write_stopped(args, err, err.so_far)
        raise
    print(
        render_text(done.result, new_runs=done.new_runs, commit_runs=done.commit_runs),
        file=sys.stderr if args.json == "-" else sys.stdout,
    )
    if args.json:
        flags.write_text(args.json, json.dumps(done.result.to_json(), indent=2) + "\n")
    if args.markdown:
        with args.markdown.open("a", encoding="utf-8") as fh:
            fh.write(render_markdown(done.result) + "\n")
    final = done.result.narrowed or done.result
    # a caller tells "one of N" from "this one" by the status alone
    return Exit.OK if final.exact else Exit.NOT_EXACT


def _write_stopped(args: argparse.Namespace, err: StoppedSearch, so_far: dict[str, Any]) -> None:
    """--json and --markdown of a bisection that stopped (exit 7, 9, 10): `stopped` says the exit
    status and the sentence, beside the builds judged before and the range they pin (no
    `exact`: there is no answer)."""
    status = int(err.exit_code)
    if args.json:
        doc = {"stopped": {"status": status, "message": str(err)}, **so_far}
        flags.write_text(args.json, json.dumps(doc, indent=2) + "\n")
    if args.markdown:
        with args.markdown.open("a", encoding="utf-8") as fh:
            fh.write(render_stopped_markdown(so_far, str(err), status) + "\n")


def _say_forgotten(what: str, gone: Forgotten, options: BisectOptions) -> None:
    print(f"forgot {len(gone.runs)} stored verdict(s) of {what}; the next bisection asks again:")
    for run in gone.runs:
        print(f"  {describe(run, options.rule)}")
    for b in gone.bisections:
        ends = " → ".join(p.key for p in (b.before, b.after) if p)
        print(
            f"  the stored bisection finished {b.finished} ({ends}) used it; it stays as it "
            "was, and a new bisection is stored beside it"
        )


def _check_end(text: str | None, flag: str) -> None:
    """A date end is checked before any index is asked: its form, and that it is not to come."""
    if text is None or release_of(text) is not None:
        return
    day = parse_end(text, flag)
    today = datetime.now(timezone.utc).date().isoformat()
    if day > today:
        raise ConfigError(
            f"{flag} {text!r} is {day}, after today ({today}, UTC): no nightly "
            "exists yet for it; name a date up to today"
        )


def _in_calendar(flag: str, text: str | None) -> None:
    """`--good '99999999 days ago'` is before year 1: one sentence, not an OverflowError."""
    try:
        if text is not None:
            parse_end(text, flag)
    except OverflowError:
        raise ConfigError(
            f"{flag} {str(text)[:40]!r} is before the first day of the calendar; "
            "give a date such as 2025-08-01 or a few days ago"
        ) from None
    except ConfigError:
        pass  # said later, where a release or a version is told from a date


def _plain_script_flags(args: argparse.Namespace, probe: str, case: str) -> None:
    """An exit-status probe has one case, its own name, and its exit status decides: another
    --case would judge nothing (every build unknown, after installing it), and --trials or
    --min-affected would be printed as a rule that does not apply."""
    if args.case and args.case != case:
        raise ConfigError(
            f"--case {args.case}: the probe {probe} is an exit-status script, whose one case is "
            f"{case}; drop --case"
        )
    if args.trials is not None or args.min_affected is not None:
        raise ConfigError(
            f"--trials and --min-affected are for a document probe's racy cases; the probe "
            f"{probe} is an exit-status script and decides alone: to ask it several times, "
            f"run it as --script {shlex.quote('python ' + shlex.quote(str(probe_path(probe))))} "
            "--repeat N"
        )


def _options(args: argparse.Namespace) -> BisectOptions:
    for flag, end in (("--good", args.good), ("--bad", args.bad)):
        _in_calendar(flag, end)  # before _check_end, which parses the date itself
        _check_end(end, flag)
    if args.bad is None and not args.forget:
        raise ConfigError(
            "--bad is needed: the nightly with the bug (or --forget alone, to "
            "drop a stored verdict)"
        )
    if args.bad is None and (args.good is not None or args.walk_limit is not None):
        raise ConfigError("--good and --walk-limit need --bad too")
    if args.script is not None and (args.case or args.trials or args.probe):
        raise ConfigError("--script decides on its own: drop --probe, --case and --trials")
    if args.trials is not None and not 1 <= args.trials <= MAX_TRIALS:
        raise ConfigError(f"--trials must be between 1 and {MAX_TRIALS:,}, as matrix.yaml's")
    if args.min_affected is not None and (
        args.min_affected < 1 or (args.trials and args.min_affected > args.trials)
    ):
        raise ConfigError("--min-affected must be between 1 and --trials")
    if not args.timeout > 0 or math.isinf(args.timeout):  # `not >`: NaN is refused too
        raise ConfigError(f"--timeout must be a positive number of seconds, got {args.timeout:g}")
    if args.walk_limit is not None and (args.good is not None or args.walk_limit < 1):
        raise ConfigError(
            "--walk-limit is for a bisection without --good, and a whole number of "
            "days of at least 1"
        )
    if (
        args.pytorch_repo is not None
        and args.repo is not None
        and args.repo.resolve() != args.pytorch_repo.resolve()
    ):
        raise ConfigError("--repo and --pytorch-repo name two clones: give --pytorch-repo alone")
    if args.pytorch_repo is not None and args.bad is None:
        raise ConfigError("--pytorch-repo needs --bad (and the rest of a bisection)")
    probe = args.probe or default_probe()
    if args.script is None:
        info = probe_info(probe)  # not there, or does not read: one sentence
        if info.output is ProbeOutput.EXIT_STATUS:
            _plain_script_flags(args, probe, info.name)
        known = info.declared_cases
        if args.case and known and args.case not in known:  # a typo would decide nothing
            raise ConfigError(
                f"--case {args.case}: not a case of the probe {probe}; choose from "
                f"{', '.join(known)}"
            )
    if args.repeat is not None and (args.script is None or args.repeat < 1):
        raise ConfigError(
            "--repeat needs --script and a whole number of at least 1; racy "
            "probe cases take --trials and --min-affected instead"
        )
    if args.repeat is not None and args.repeat > MAX_REPEAT:
        raise ConfigError(
            f"--repeat {args.repeat}: at most {MAX_REPEAT:,} (each is a whole run of the script "
            "on each build judged); count a racy bug's trials inside the script instead"
        )
    return BisectOptions(
        good=args.good,
        bad=args.bad or "",
        direction=Direction.FIX if args.find_fix else Direction.REGRESSION,
        cuda=args.cuda,
        python=args.python,
        platform=args.platform,
        probe=probe,
        script=args.script,
        trials=args.trials,
        case=args.case or ("" if args.script is not None else _default_case(probe)),
        min_affected=args.min_affected,
        index_url=args.index_url,
        backend=args.backend,
        store=args.store,
        workdir=args.workdir,
        repo=args.pytorch_repo or args.repo,
        narrow=args.pytorch_repo is not None,
        github=not args.no_github,
        timeout=args.timeout,
        overlay=args.overlay,
        repeat=args.repeat or (2 if args.script is not None else 1),
        walk_limit=args.walk_limit or DEFAULT_LIMIT,
    )


def _default_case(probe: str) -> str:
    """The case that decides when --case is not given, as the probe's file says it
    (ProbeInfo.deciding_case: BISECT_CASE, an exit-status probe's one case, else the first of
    CASE_LABELS)."""
    info = probe_info(probe)
    if not info.deciding_case:
        raise ConfigError(
            f"--probe {probe}: its file {info.path} names no case (BISECT_CASE or "
            "CASE_LABELS), so name the case that decides with --case"
        )
    return info.deciding_case


class _Console(Progress):
    def __init__(self, *, repeat: int = 1, default: bool = False) -> None:
        self.repeat = repeat  # --repeat: runs of the script per verdict judged now
        self.say_default = default  # said once, when the first search starts

    def _say(self, text: str) -> None:
        print(f"bisect: {text}", file=sys.stderr, flush=True)

    def note(self, text: str) -> None:
        self._say(text)

    def start(self, cands: CandidateList, *, rule: str, stored: int) -> None:
        if self.say_default:
            self._say(REPEAT_DEFAULT)
            self.say_default = False
        first, last = cands.candidates[0], cands.candidates[-1]
        bound = math.ceil(math.log2(len(cands.candidates))) + 2
        again = (
            ""
            if self.repeat < 2
            else f" (--repeat {self.repeat}: each judged now runs "
            f"{self.repeat} times, the two that decide the range {self.repeat - 1} more)"
        )
        none = len(cands.missing)
        gaps = (
            f" ({none} {'date has' if none == 1 else 'dates have'} none)"
            if first.date and not first.commit
            else ""
        )
        self._say(
            f"{len(cands.candidates)} {_kind(first)} from {first.key} to {last.key}{gaps}; "
            f"at most {bound} probes while none is unknown{again}; {stored} already "
            "judged in the store"
        )
        self._say(f"rule: {rule}")

    def probing(self, cand: Candidate, *, left: int) -> None:
        self._say(f"judging {cand.label}; {count(left, *_unit(cand))} still open")

    def judged(self, cand: Candidate, point: NightlyPoint, *, reused: bool) -> None:
        how = "from the store" if reused else "probed"
        why = f" — {point.reason}" if point.reason else ""
        self._say(f"{cand.key} is {point.verdict.value.upper()} ({how}){why}")


def _kind(cand: Candidate) -> str:
    return "commits" if cand.commit else "nightlies" if cand.date else "releases"


def _unit(cand: Candidate) -> tuple[str, str]:
    """(one, several) of what the candidates are, for `count`."""
    return (
        ("commit", "commits")
        if cand.commit
        else ("nightly", "nightlies")
        if cand.date
        else (
            "release",
            "releases",
        )
    )
