"""Someone is told: one GitHub issue that follows the verdicts and the fix status.

The issue is the pipeline's memory of what it last said.  Its body holds the newest Markdown
summary and, in an HTML comment, the state it was written from (each build's verdict, the fix
status).  A run that changes that state rewrites its own section of the body and adds a comment
naming the changes (a comment is what notifies the people watching); a run that changes nothing
sends no write at all.  The matrix and the weekly fix check share the issue, each in its section.
A state marker that is not what torchbisect wrote (edited by hand, say) is said in a note, read
as no state (every verdict counts as new) and written anew.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from packaging.version import InvalidVersion, Version

from . import cells
from .model import CellRun, RunStatus, Verdict
from .net.github import GitHub
from .outcome import BisectResult, Direction

LABEL = "torchbisect"
TITLE = "torchbisect: which PyTorch builds hand out stale lazy-clone data"
_STATE = re.compile(r"<!-- torchbisect-state: (\{.*?\}) -->", re.DOTALL)


@dataclass(frozen=True, kw_only=True)
class FixStatus:
    """What the weekly check found: `key` is what is compared between runs, `text` what is said."""

    key: str  # "fixed:<date>", "no-fix:<date>" or "unknown"
    text: str

    @property
    def decided(self) -> bool:
        return self.key != "unknown"


def verdicts_of(runs: list[CellRun]) -> dict[str, str]:
    """Each build's verdict; infrastructure failures are not verdicts and are left out."""
    return {r.cell.id: r.verdict.value for r in runs
            if r.status is RunStatus.OK and r.verdict is not None}


def fix_status(runs: list[CellRun], bisections: list[BisectResult]) -> FixStatus:
    """From a fix search's own store: the fix it found, or its newest nightly still affected."""
    fixes = [b for b in bisections if b.direction is Direction.FIX and b.after is not None]
    if fixes:
        found, first = fixes[-1], fixes[-1].after
        if not found.exact:  # unknown nightlies before it: the fix is one of several
            return FixStatus(key=f"fixed:{first.date}",
                             text=f"fix found: the first good nightly is one of "
                                  f"{len(found.candidates)}: {', '.join(found.candidates)}")
        return FixStatus(key=f"fixed:{first.date}",
                         text=f"fix found: first good nightly {first.date} ({first.version})")
    nightlies = sorted((r for r in runs if r.cell.date and r.status is RunStatus.OK),
                       key=lambda r: r.cell.date)
    if nightlies and nightlies[-1].verdict is Verdict.AFFECTED:
        newest = nightlies[-1].cell
        return FixStatus(key=f"no-fix:{newest.date}",
                         text=f"no fix yet: newest nightly {newest.date} ({newest.version}) "
                              "still affected")
    return FixStatus(key="unknown", text="the fix check could not tell: the newest nightly has "
                                         "no verdict (see the bisect step's log)")


def changes(old: dict[str, str], new: dict[str, str]) -> list[str]:
    """Builds whose verdict moved, and new builds that differ from their predecessor."""
    moved = [f"`{cell}`: {old[cell]} → {new[cell]}" for cell in sorted(new)
             if cell in old and old[cell] != new[cell]]
    for cell in sorted(set(new) - set(old)):
        before = _predecessor(cell, old)
        if before is not None and old[before] != new[cell]:
            moved.append(f"`{cell}`: {new[cell]} (the build before it, `{before}`, was "
                         f"{old[before]})")
    return moved


def _lane(cell_id: str) -> tuple[tuple[str, ...], str]:
    """(what successive builds share, the build's key): `nightly-20261001-cu130-cp312` ->
    (("nightly", "cu130", "cp312", ""), "20261001"); an id that is no build's stands alone."""
    try:
        parsed = cells.parse(cell_id)
    except ValueError:
        return (cell_id,), ""
    return parsed.lane, parsed.key


def _order(version: str) -> tuple[int, Any]:
    try:
        return (0, Version(version))
    except InvalidVersion:
        return (1, version)


def _predecessor(cell_id: str, known: dict[str, str]) -> str | None:
    lane, version = _lane(cell_id)
    older = [c for c in known if _lane(c)[0] == lane and _order(_lane(c)[1]) < _order(version)]
    return max(older, key=lambda c: _order(_lane(c)[1]), default=None)


@dataclass(frozen=True, kw_only=True)
class Told:
    """What `tell` did: "opened", "updated" or "unchanged", the issue number and the changes."""

    action: str
    number: int
    changes: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


def tell(api: GitHub, repo: str, *, section: str, markdown: str,
         verdicts: dict[str, str] | None = None, fix: FixStatus | None = None) -> Told:
    """Open the issue, or update it when the verdicts or the fix status changed since last said."""
    issue = api.find_issue(repo, LABEL)
    body = issue[1] if issue else ""
    state, wrong = _read_state(body)
    notes = (f"the state marker in issue #{issue[0]} is not one torchbisect wrote ({wrong}); "
             "it is read as no state, so every verdict counts as new",) if wrong else ()
    said: list[str] = []
    if verdicts is not None:
        said += changes(state.get("verdicts", {}), verdicts)
        state["verdicts"] = verdicts
    if fix is not None and fix.decided and state.get("fix") != fix.key:
        said.append(f"fix status: {fix.text}")
        state["fix"] = fix.key
    new_body = _write_state(_set_section(body, section, markdown), state)
    if issue is None:
        number = api.create_issue(repo, TITLE, new_body, [LABEL])
        return Told(action="opened", number=number, changes=tuple(said))
    number = issue[0]
    if not said and not wrong:
        return Told(action="unchanged", number=number)
    api.update_issue(repo, number, new_body)  # a marker that was wrong is written right
    if said:
        api.comment(repo, number, "What changed:\n\n" + "\n".join(f"- {s}" for s in said))
    return Told(action="updated", number=number, changes=tuple(said), notes=notes)


def _read_state(body: str) -> tuple[dict[str, Any], str]:
    """The state the body's marker holds, and "" — or no state and what is wrong with it."""
    match = _STATE.search(body)
    if not match:
        return {}, ""
    try:
        state = json.loads(match.group(1))
    except (json.JSONDecodeError, RecursionError):
        return {}, "it is not JSON"
    if not isinstance(state, dict):
        return {}, "it is not a JSON object"
    verdicts = state.get("verdicts", {})
    if not isinstance(verdicts, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in verdicts.items()):
        return {}, "its verdicts are not a mapping of build to verdict"
    if not isinstance(state.get("fix", ""), str):
        return {}, "its fix status is not text"
    return state, ""


def _write_state(body: str, state: dict[str, Any]) -> str:
    marker = f"<!-- torchbisect-state: {json.dumps(state, sort_keys=True)} -->"
    return _STATE.sub("", body).rstrip() + "\n\n" + marker + "\n"


def _set_section(body: str, name: str, markdown: str) -> str:
    """Replace (or append) the text between this section's markers; other sections stay."""
    start, end = f"<!-- torchbisect:{name} -->", f"<!-- /torchbisect:{name} -->"
    block = f"{start}\n{markdown.strip()}\n{end}"
    pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.DOTALL)
    if pattern.search(body):
        return pattern.sub(lambda _: block, body)
    return (_STATE.sub("", body).rstrip() + "\n\n" + block).lstrip()
