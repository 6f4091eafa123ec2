"""`torchbisect notify`: say what changed, in the job summary and in each regression's status issue.

After a matrix run: each build's verdict per GPU model from the store, for each probe in it (one
regression, one issue, titled by the probe's title), the issue's body from `--summary`: the
folder `report` drew (each regression's summary.md in it, where `report` put it) or, for a store of
one regression (or with `--probe`), that summary.md itself.
With `--fix`, after the weekly fix search: "no fix yet: newest nightly … still affected" or the
fix found, from that search's own store; a search that could tell neither exits 3 after saying
so, so the job is red instead of silently green.  The issue is opened or updated through the
REST API with `$GITHUB_TOKEN` only when something changed (see torchbisect.report.notify).
With `--runners runners.yaml` a declared runner kind that stops (or starts again) reporting in
the store's latest run is such a change, said as the page says it (page/kinds.py).
"""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from .. import defaults
from ..cli import options as flags
from ..errors import ConfigError, InfraError

if TYPE_CHECKING:
    from ..config.runners import Runners
    from ..model import Attendance, CellRun
    from ..net.github import GitHub
    from ..outcome import BisectResult
    from ..report.notify import FixStatus


def configure(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    flags.add_store_option(parser, "result store to read")
    add(
        "--summary",
        type=Path,
        metavar="MD",
        help="the folder `report` wrote (each regression's summary.md in it), or one summary.md "
        "(a store of one regression, or with --probe); required without --fix",
    )
    add(
        "--fix",
        action="store_true",
        help="report the fix status of a `bisect --find-fix` store instead of the verdicts",
    )
    add(
        "--probe",
        type=flags.nonempty,
        metavar="NAME",
        help="tell only this regression (a probe of the store); default: each one in it",
    )
    add(
        "--runners",
        type=Path,
        metavar="YAML",
        help="runners.yaml: also tell when a declared runner kind stops (or starts) reporting "
        "in the store's latest run (not with --fix)",
    )
    add(
        "--summary-out",
        type=flags.Output("append"),
        metavar="FILE",
        help="append what was found and told here (e.g. $GITHUB_STEP_SUMMARY)",
    )
    add(
        "--repo",
        default=os.environ.get("GITHUB_REPOSITORY"),
        metavar="OWNER/NAME",
        help="repository of the issue (default: $GITHUB_REPOSITORY)",
    )
    add(
        "--api-url",
        default=os.environ.get("GITHUB_API_URL") or "https://api.github.com",
        metavar="URL",
        help="GitHub REST API (default: $GITHUB_API_URL or api.github.com)",
    )


def run(args: argparse.Namespace) -> int:
    from ..report.site import by_probe
    from ..store.db import Store

    if not args.fix and args.summary is None:
        raise ConfigError(
            "--summary MD is required (the summary.md that `report` wrote), or pass --fix"
        )
    if args.fix and args.runners is not None:
        raise ConfigError(
            "--runners is for the matrix's notification; the fix check "
            "(--fix) reads no runner kinds: drop one of them"
        )
    runners = _runners(args.runners)
    if not flags.store_to_read(args.store):
        raise ConfigError(f"no result store at {args.store}: pass --store PATH")
    with Store(args.store) as store:
        runs, bisections = store.latest_counted(), store.bisections()
        attendance = store.attendance() if runners else []
    groups = _regressions(runs, args.probe, args.fix)
    site = list(by_probe(runs)) or [defaults.PROBE]  # the regressions `report` drew
    api = _api(args)
    undecided: list[str] = []
    for probe, mine in groups.items():
        fix = _tell_one(
            args, api, probe, mine, bisections, site, len(groups) > 1, runners, attendance
        )
        if fix is not None and not fix.decided:
            undecided.append(fix.text)
    if undecided:
        raise InfraError(undecided[0])
    return 0


def _regressions(runs: list[CellRun], probe: str | None, fix: bool) -> dict[str, list[CellRun]]:
    """Each regression's runs: the probe asked for, else every probe in the store (the fix
    check's store is one search's: its one probe, the default one when it holds none)."""
    from ..report.site import by_probe

    groups = by_probe(runs)
    if probe is not None:
        return {probe: groups.get(probe, [])}
    if fix and len(groups) != 1:
        return {defaults.PROBE: groups.get(defaults.PROBE, [])}
    return groups or {defaults.PROBE: []}


def _tell_one(
    args: argparse.Namespace,
    api: GitHub | None,
    probe: str,
    runs: list[CellRun],
    bisections: list[BisectResult],
    site: list[str],
    named: bool,
    runners: Runners | None,
    attendance: list[Attendance],
) -> FixStatus | None:
    """Say one regression's news (named, among several), print it and append it to
    --summary-out; its fix status.  `site`: every regression the report drew."""
    from ..page.regression import regression_for
    from ..report.notify import fix_status, tell, verdicts_of

    regression = regression_for(probe)
    if args.fix:
        fix = fix_status(runs, bisections)
        markdown, verdicts = f"### Fix check\n\n{fix.text}\n", None
    else:
        fix, verdicts = None, verdicts_of(runs)
        markdown = _read(_summary_of(args.summary, probe, site, args.probe is not None))
    said = fix.text if fix else _measured(verdicts or {})
    if api is None:
        told = "not told: no GITHUB_TOKEN or --repo, so no issue was opened or updated"
    elif fix is not None and not fix.decided:
        told = "the status issue is left as it is"
    else:
        done = tell(
            api,
            args.repo,
            section="fix" if args.fix else "matrix",
            markdown=markdown,
            verdicts=verdicts,
            fix=fix,
            kinds=_kinds(runners, attendance, verdicts) if runners else None,
            probe=probe,
            title=regression.title,
        )
        told = (
            "".join(f"note: {n}\n" for n in done.notes)
            + f"status issue #{done.number}: {done.action}"
            + "".join(f"\n- {c}" for c in done.changes)
        )
    head = f"{regression.title} ({probe}): " if named else ""
    print(f"{head}{said}\n{told}")
    if args.summary_out:
        with args.summary_out.open("a", encoding="utf-8") as out:
            out.write(f"{markdown if args.fix else ''}\n{head}{told}\n")
    return fix


def _summary_of(summary: Path, probe: str, probes: list[str], chosen: bool) -> Path:
    """A regression's summary.md: in the folder `report` drew, where it drew it (site.py); a
    file given as --summary is the one regression's (the store's only one, or --probe's)."""
    from ..report.site import folder_of

    if not summary.is_dir():
        if len(probes) > 1 and not chosen:
            raise ConfigError(
                f"the store holds {len(probes)} regressions ({', '.join(probes)}); "
                f"--summary {summary} is one summary.md: pass the folder `report` "
                "wrote, or --probe NAME"
            )
        return summary
    return summary / folder_of(probe) / "summary.md" if len(probes) > 1 else summary / "summary.md"


def _measured(verdicts: dict[str, dict[str, str]]) -> str:
    """ "70 builds with a verdict on 2 GPU models: NVIDIA GB300 (34), NVIDIA H200 (36)"."""
    from ..utils.words import count

    total = count(sum(len(v) for v in verdicts.values()), "build")
    if not verdicts:
        return f"{total} with a verdict"
    return f"{total} with a verdict on {count(len(verdicts), 'GPU model')}: " + ", ".join(
        f"{m} ({len(v)})" for m, v in sorted(verdicts.items())
    )


def _runners(path: Path | None) -> Runners | None:
    if path is None:
        return None
    from ..config.runners import load_runners

    return load_runners(path)


def _kinds(
    runners: Runners, attendance: list[Attendance], verdicts: dict[str, dict[str, str]] | None
) -> dict[str, tuple[str, str]]:
    """Each runner kind's attendance state and sentence, as the page says it (page/kinds.py),
    the sentence escaped for a comment."""
    from ..page.kinds import kind_views
    from ..report.writers.markdown import md_text

    return {
        k.name: (k.state, md_text(k.text))
        for k in kind_views(runners.kinds, attendance, sorted(verdicts or {}))
    }


def _api(args: argparse.Namespace) -> GitHub | None:
    from ..net.github import GitHub

    token = os.environ.get("GITHUB_TOKEN", "")
    if args.repo and not re.fullmatch(r"[\w.-]+/[\w.-]+", args.repo):
        raise ConfigError(f"--repo {args.repo!r} is not OWNER/NAME")
    if token and args.repo:
        return GitHub(base_url=args.api_url, token=token)
    if os.environ.get("GITHUB_ACTIONS") == "true":
        raise ConfigError(
            "GITHUB_TOKEN is not set: give the step "
            "`env: GITHUB_TOKEN: ${{ github.token }}` and the job "
            "`permissions: issues: write`"
        )
    return None


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(f"cannot read --summary {path}: {err.strerror}") from None
