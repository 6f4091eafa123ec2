"""What `--help` shows beyond the flags, and what a mistyped command line is told.

Each command's help ends with examples and the exit statuses it can give (exits.py); a flag or
command that does not exist is answered by the command's own usage and the closest real names
("did you mean"), exit 2.  `torchbisect completion SHELL` prints the shell code of argcomplete,
which completes commands, flags and their choices by asking torchbisect itself.
"""

from __future__ import annotations

import argparse
import difflib
import os
import shlex
import textwrap
from collections.abc import Collection

from ..exits import epilog_lines

EXAMPLES = {
    "plan": ["torchbisect plan", "torchbisect plan --offline --json -"],
    "matrix": [
        "torchbisect matrix --cells 'stable-2.15*'",
        "torchbisect matrix --backend venv --shard 1/2 --fail-on affected",
        "torchbisect matrix   # your own probe: probes/check.py beside matrix.yaml, "
        "and `probe: check` under its `defaults:`",
    ],
    "probe": [
        "torchbisect probe",
        "torchbisect probe --interpreter ~/venv/bin/python",
        "torchbisect probe stable-2.15.0-cu132-cp312 --json -",
        "torchbisect probe --probe check   # your own: probes/check.py beside matrix.yaml",
        "torchbisect probe stable-2.15.0-cu132-cp312.check   # CELL.PROBE, as in plan",
    ],
    "report": ["torchbisect report", "torchbisect report --store shard.sqlite --out site/"],
    "merge": ["torchbisect merge all.sqlite a.sqlite b.sqlite"],
    "bisect": [
        "torchbisect bisect --good 2025-08-01 --bad 2025-09-15",
        "torchbisect bisect --good 2.9.0 --bad 2.15.0   # releases",
        "torchbisect bisect --bad '3 days ago' --find-fix --json -",
        "torchbisect bisect --probe check --good 2.9.0 --bad 2.11.0 --cuda auto",
        "torchbisect bisect --script 'python check.py' --good 2.9.0 --bad 2.11.0 --cuda auto",
    ],
    "schema": ["torchbisect schema --check"],
    "bench": ["torchbisect bench"],
    "notify": ["torchbisect notify --summary reports/summary.md"],
    "preflight": ["torchbisect preflight --backend docker"],
    "cache": ["torchbisect cache", "torchbisect cache --prune"],
    "init": ["torchbisect init", "torchbisect init ci/matrix.yaml"],
    "completion": ['eval "$(torchbisect completion bash)"   # in ~/.bashrc'],
    "pages": ["torchbisect pages --check"],
}

TOP_EXAMPLES = [
    "torchbisect probe                 # is this interpreter's torch affected?",
    "torchbisect init                  # write matrix.yaml to edit",
    "torchbisect matrix                # probe every build it lists, draw the page",
    "torchbisect bisect --bad 2025-09-15",
]


# Where a probe's name is looked up (probe/scripts.py), said by the commands that take one.
PROBES = (
    "probes: NAME.py in probes/ beside matrix.yaml, then in the folders TORCHBISECT_PROBES "
    "names, then the shipped ones (stale_replay, cumsum_64bit); probes/README.md says how "
    "to write one"
)
_TAKE_PROBES = ("matrix", "probe", "bisect", "plan")


def epilog(command: str | None) -> str:
    lines = TOP_EXAMPLES if command is None else EXAMPLES.get(command, [])
    shown = "\n".join(f"  {line}" for line in lines)
    statuses = epilog_lines(command)
    if command in _TAKE_PROBES:
        statuses = "\n".join(textwrap.wrap(PROBES, 79)) + "\n\n" + statuses
    return f"examples:\n{shown}\n\n{statuses}" if shown else statuses


def unknown_command(argv: list[str], commands: Collection[str]) -> str | None:
    """The error for a first word that is no command, with the nearest ones; None if it is."""
    word = next((a for a in argv if not a.startswith("-")), None)
    if word is None or word in commands:
        return None
    close = difflib.get_close_matches(word, list(commands), n=2)
    hint = f"; did you mean {' or '.join(close)}?" if close else "; `torchbisect --help` lists them"
    return f"no command {word!r}{hint}"


def unknown_flags(parser: argparse.ArgumentParser, extras: list[str]) -> str:
    """'unrecognized arguments' in one sentence, with the nearest real flag of each."""
    known = [
        o
        for action in parser._actions
        for o in action.option_strings
        if action.help is not argparse.SUPPRESS and o.startswith("--") and o != "--help"
    ]
    hints = []
    for extra in extras:
        flag = extra.split("=", 1)[0]
        close = (
            difflib.get_close_matches(flag, known, n=1, cutoff=0.7) if flag.startswith("-") else []
        )
        if close:
            hints.append(f"{flag}: did you mean {close[0]}?")
    said = " ".join(shlex.quote(e) for e in extras)
    return f"unrecognized arguments: {said}" + (f" ({'; '.join(hints)})" if hints else "")


def completing() -> list[str] | None:
    """The words typed so far when argcomplete asks for completions, else None."""
    if "_ARGCOMPLETE" not in os.environ:
        return None
    line = os.environ.get("COMP_LINE", "")[: int(os.environ.get("COMP_POINT", 0) or 0)]
    try:
        return shlex.split(line)[1:]
    except ValueError:  # an open quote: complete the command's words all the same
        return line.split()[1:]


def complete(parser: argparse.ArgumentParser) -> None:
    """Answer argcomplete (it exits the process)."""
    import argcomplete

    argcomplete.autocomplete(parser)
