"""Every exit status torchbisect gives: one constant per meaning, and what each means.

This table is the one source.  The error classes (errors.py) carry one of these constants, the
CLI's catcher (`torchbisect.cli.main`) returns them, every `--help` lists the rows its command
can give (`epilog_lines`), and the tables of README.md and docs/running.md are checked against
`markdown` by a test.  A new status is a new row here, with the commands that can give it.

The numbers are a contract with gates (a release checklist, `git bisect run`, a CI step): a
status is a verdict only where its meaning says so, and no two meanings share one.  1 is
"affected" and nothing else, as `git bisect run` reads it ("bad").  0, 1 and 125 are also the
probe scripts' own statuses (probes/README.md).
"""

from __future__ import annotations

import enum
import textwrap
from dataclasses import dataclass


class Exit(enum.IntEnum):
    OK = 0
    AFFECTED = 1
    MISTAKE = 2
    NO_VERDICT = 3
    INDEX_UNREACHABLE = 4
    BACKEND_UNAVAILABLE = 5
    OUT_OF_DATE = 6
    FLAKY = 7
    NOT_EXACT = 8
    ABORTED = 9
    END_UNJUDGED = 10
    CANNOT_TELL = 125
    INTERRUPTED = 130
    # torchbisect itself failed (a bug).  Above 127 on purpose: `torchbisect probe` speaks `git
    # bisect run`'s language (0 good, 125 skip, the rest of 1-127 bad), in which sysexits'
    # EX_SOFTWARE (70) would read as "bad"; 128-255 makes a bisection stop instead.  128+N is a
    # shell's "killed by signal N" (N <= 64), and 255 is what exit(-1) gives: 250 is clear of both.
    FAILED = 250


@dataclass(frozen=True, kw_only=True)
class Meaning:
    brief: str  # --help and the README's table
    detail: str = ""  # docs/running.md's table adds it after the brief
    commands: frozenset[str] | None = None  # the commands that can give it; None: every one
    plain: str = ""  # the brief in the --help of a command that gives no verdict, when it differs


def _only(*commands: str) -> frozenset[str]:
    return frozenset(commands)


# Commands that run or write, and so can meet an infrastructure failure (a full disk is one, exit 3,
# wherever it strikes) or be interrupted in the middle of something.
_WORKING = _only(
    "plan",
    "matrix",
    "probe",
    "report",
    "merge",
    "bisect",
    "bench",
    "notify",
    "preflight",
    "cache",
    "init",
    "schema",
    "pages",
)
_PLANNING = _only("plan", "matrix", "probe", "bisect", "bench")

# A bisection that stops without an answer still writes its --json and --markdown.
_STOPPED = (
    "`--json` holds `stopped` (this status and the sentence), the builds judged before the stop "
    "and the range they pin (no `exact`), and `--markdown` says the same"
)

MEANINGS: dict[Exit, Meaning] = {
    Exit.OK: Meaning(brief="done; `probe`: not affected", plain="done"),
    Exit.AFFECTED: Meaning(
        brief="affected: `probe` found the bug, or `matrix --fail-on affected` found an affected "
        "cell",
        commands=_only("probe", "matrix"),
    ),
    Exit.MISTAKE: Meaning(
        brief="a mistake to fix: a flag, `matrix.yaml`, a lock or an output path (the sentence "
        "names it), refused before any work or network",
        detail="for a file, the sentence names its line and key; an output path that cannot be "
        "written (`--json DIR`, `--out FILE`, a folder that is a file or not writable); a "
        "`merge` input that is missing or unreadable; a `bisect` end with the wrong "
        "verdict (good where bad is expected)",
    ),
    Exit.NO_VERDICT: Meaning(
        brief="infrastructure, no verdict: a cell not installed or probed; no GPU under "
        "`--require-gpu`; the store or workdir held by another run; a full disk",
        detail="`preflight`: a container given the GPUs lists none; `cache`: what a backend keeps "
        "could not be measured or pruned",
        commands=_WORKING,
    ),
    Exit.INDEX_UNREACHABLE: Meaning(brief="a wheel index that does not answer", commands=_PLANNING),
    Exit.BACKEND_UNAVAILABLE: Meaning(
        brief="a backend that cannot run here (no Docker engine, no uv, no NVIDIA Container "
        "Toolkit)",
        commands=_only("matrix", "probe", "bisect", "bench", "preflight", "cache"),
    ),
    Exit.OUT_OF_DATE: Meaning(
        brief="`schema --check`, `pages --check`: a generated file is out of date (the sentence "
        "names it and the command that rewrites it)",
        commands=_only("schema", "pages"),
    ),
    Exit.FLAKY: Meaning(
        brief="`bisect --script`: the script gave different answers for one build, so no range "
        "can be trusted",
        detail=_STOPPED,
        commands=_only("bisect"),
    ),
    Exit.NOT_EXACT: Meaning(
        brief="`bisect`: the answer is a range of builds, not one",
        detail="unknown builds sit next to the change, and the first bad one is one of several "
        "(JSON `exact: false`, the list in `candidates`); with `--pytorch-repo`, the commit "
        "answer is (`narrowed.exact: false`)",
        commands=_only("bisect"),
    ),
    Exit.ABORTED: Meaning(
        brief="`bisect --script`: the script stopped the bisection (it exited above 127, or a "
        "signal killed it)",
        detail="the range found so far is printed; " + _STOPPED,
        commands=_only("bisect"),
    ),
    Exit.END_UNJUDGED: Meaning(
        brief="`bisect`: an end of the range could not be judged (it hung, crashed or was "
        "skipped there), so there was no search",
        detail=_STOPPED,
        commands=_only("bisect"),
    ),
    Exit.CANNOT_TELL: Meaning(
        brief="`probe`: cannot tell (no GPU, a control misbehaved); "
        "`probe`, `matrix`: the interpreter whose torch is to be "
        "probed has none",
        commands=_only("probe", "matrix"),
    ),
    Exit.INTERRUPTED: Meaning(brief="interrupted (Ctrl-C, or SIGTERM from a cancelled job)"),
    Exit.FAILED: Meaning(
        brief="torchbisect itself failed (a bug): the sentence names the file that holds the "
        "traceback"
    ),
}


def statuses(command: str | None = None) -> list[Exit]:
    """The statuses `command` can give, in order; every status for None."""
    return [
        s
        for s, m in MEANINGS.items()
        if command is None or m.commands is None or command in m.commands
    ]


def epilog_lines(command: str | None = None, width: int = 79) -> str:
    """The "exit statuses:" block of a `--help`: the rows the command can give."""
    lines = ["exit statuses:"]
    verdicts = MEANINGS[Exit.AFFECTED].commands or frozenset()
    for status in statuses(command):
        meaning = MEANINGS[status]
        plain = command is not None and command not in verdicts and meaning.plain
        text = (meaning.plain if plain else meaning.brief).replace("`", "")
        lines += textwrap.wrap(
            text, width, initial_indent=f"  {status.value:<5}", subsequent_indent=" " * 7
        )
    return "\n".join(lines)


def markdown(*, detail: bool = False) -> str:
    """The Markdown table of every status: the README's (briefs), docs/running.md's (`detail`)."""
    rows = ["| status | meaning |", "|---|---|"]
    for status, meaning in MEANINGS.items():
        text = meaning.brief
        if detail and meaning.detail:
            text = f"{text}; {meaning.detail}"
        rows.append(f"| **{status.value}** | {text} |")
    return "\n".join(rows)
