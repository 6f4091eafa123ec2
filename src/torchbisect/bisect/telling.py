"""What a bisection tells its user when it cannot go on: an end with the wrong verdict, a
--script that cannot run (refused before anything is probed when its path says so), and the range
found so far when the script asks to stop.  Each is one sentence with what to do next.
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

from ..errors import ConfigError, TorchbisectError
from ..exits import Exit
from ..outcome import Direction, NightlyPoint, Outcome
from .candidates import CandidateList
from .search import EndsError, flip
from .verdicts import StoppedSearch


class EndUnjudged(StoppedSearch):
    """An end of the range could not be judged (the probe or script hung, crashed or skipped
    there): no verdict, so no search; not the user's mistake until the build is known to be bad."""

    exit_code = Exit.END_UNJUDGED


def ends_error(
    err: EndsError,
    cands: CandidateList,
    points: dict[int, NightlyPoint],
    *,
    direction: Direction,
    script: str | None,
) -> TorchbisectError:
    """An end with the wrong verdict is a mistake in the flags (ConfigError); an end without one
    is EndUnjudged."""
    text = ends_sentence(err, cands, points, direction=direction, script=script)
    return EndUnjudged(text) if err.got is Outcome.UNKNOWN else ConfigError(text)


def ends_sentence(
    err: EndsError,
    cands: CandidateList,
    points: dict[int, NightlyPoint],
    *,
    direction: Direction,
    script: str | None,
) -> str:
    """An end of the range with the wrong verdict, as one sentence with a hint that fits the
    direction asked; a script the shell could not run is named as the script's problem."""
    cand = cands.candidates[err.index]
    point = points.get(err.index)
    at_start = err.index == 0
    flag = {
        (True, Direction.REGRESSION): "--good",
        (False, Direction.REGRESSION): "--bad",
        (True, Direction.FIX): "--bad",
        (False, Direction.FIX): "--good",
    }[(at_start, direction)]
    where = f"the {flag} end, {cand.label},"
    if err.got is Outcome.UNKNOWN:
        why = point.reason if point else "no verdict"
        return (
            f"{where} could not be judged ({why}): when that is this machine's doing (no GPU, "
            f"an index or network failure) no build can be, so fix that first; when it is "
            f"this build's, pick another {flag}"
        )
    not_run = _NOT_RUN.search(point.reason) if script is not None and point else None
    if not_run:
        status = not_run.group(1)
        return (
            f"--script `{script}` could not be run on {cand.label} (exit {status}: "
            f"the shell {_NOT_RUN_WHY[status]}); check the command, its path "
            "and its permissions"
        )
    expected = flag[2:]
    got = "bad" if expected == "good" else "good"
    if direction is Direction.REGRESSION:
        hint = ", or use --find-fix to look for the build that fixed it" if at_start else ""
        side = "an older" if at_start else "a newer"
        return f"{where} is not {expected} but {got}: pick {side} {flag}{hint}"
    if at_start:  # --find-fix, and the older end is already good
        return (
            f"{where} is not {expected} but {got}: pick a --bad where the bug is present, "
            "or drop --find-fix to look for the build that brought it"
        )
    return f"{where} is not {expected} but {got}: pick a newer {flag}"


# What probes/script.py records for a command the shell could not run (git's statuses): the
# detail ends in the status, after the command's last line when it printed one.
_NOT_RUN = re.compile(r"(?:^|\()exit (12[67])\)?$")
_NOT_RUN_WHY = {"126": "found it but could not execute it", "127": "did not find it"}


def check_script(command: str, *, on_host: bool) -> None:
    """Refuse a --script that cannot run before anything is probed: a path that is not there
    or not executable.  A bare name is looked up on the build's PATH where it runs (a venv's
    `bin` first), so only its exit status 126/127 at an end can tell (`_ends_sentence`)."""
    if not command.isascii():
        try:  # bytes that are not UTF-8 (a file's name) reach here as lone surrogates
            command.encode("utf-8")
        except UnicodeEncodeError:
            raise ConfigError(
                f"--script {command!r} holds bytes that are not UTF-8 text: rename the "
                "file (or link to it) with a name in UTF-8"
            ) from None
    try:
        words = shlex.split(command)
    except ValueError as err:
        raise ConfigError(
            f"--script {command!r} is not a shell command ({err}): check its quotes"
        ) from None
    if not words:
        raise ConfigError("--script is empty: give the command that decides good or bad")
    first = words[0]
    if not on_host or "/" not in first or re.match(r"^\w+=", first):
        return  # in a container, a name on PATH, or a variable assignment first
    path = Path(first).expanduser()
    if not path.exists():
        raise ConfigError(
            f"--script: {first} does not exist (seen from {Path.cwd()}); give the "
            "path of the command that decides good or bad"
        )
    through = f"--script '{_interpreter(path)} {first}'"
    if path.is_dir() or not os.access(path, os.X_OK):
        raise ConfigError(
            f"--script: {first} is not executable: run it through its interpreter "
            f"({through}), or give it a `#!` line and `chmod +x {first}`"
        )
    if not _starts_as_a_program(path):
        # execve refuses a file without `#!`, and the shell then runs it as a shell script
        # whatever it is written in: a Python file's "Syntax error" would be read as bad
        raise ConfigError(
            f"--script: {first} has no `#!` line, so the shell would run it as a "
            f"shell script whatever it is written in: run it through its "
            f"interpreter ({through}), or make its first line a `#!` line such as "
            f"`#!/usr/bin/env {_interpreter(path)}`"
        )


_PROGRAM = (b"#!", b"\x7fELF")  # a script that names its interpreter, or a binary


def _starts_as_a_program(path: Path) -> bool:
    try:
        with path.open("rb") as fh:
            head = fh.read(4)
    except OSError:
        return True  # unreadable: its run says why (126), as for any command
    return head.startswith(_PROGRAM)


def _interpreter(path: Path) -> str:
    """What runs a script of this kind, as the build's PATH names it (a venv's `python`)."""
    return "python" if path.suffix == ".py" else "sh"


def so_far(points: dict[int, NightlyPoint], cands: CandidateList, direction: Direction) -> str:
    """The range the verdicts given so far pin (for a bisection that stops early)."""
    own = {
        i: flip(p.verdict) if direction is Direction.FIX else p.verdict for i, p in points.items()
    }
    goods = [i for i, o in own.items() if o is Outcome.GOOD]
    lo = max(goods, default=None)
    bads = [i for i, o in own.items() if o is Outcome.BAD and (lo is None or i > lo)]
    hi = min(bads, default=None)
    names = (
        ("last good", "first bad")
        if direction is Direction.REGRESSION
        else ("last bad", "first good")
    )
    if lo is None or hi is None:
        return "range found so far: none (the two ends were not both judged yet)"
    keys = [c.key for c in cands.candidates[lo + 1 : hi + 1]]
    unit = "nightly" if cands.candidates[0].date else "release"
    first = "first bad" if direction is Direction.REGRESSION else "first fixed"  # as `lead` says
    return (
        f"range found so far: {names[0]} {cands.candidates[lo].key}, {names[1]} "
        f"{cands.candidates[hi].key}; the {first} {unit} is one of {len(keys)}: "
        f"{', '.join(keys)}"
    )
