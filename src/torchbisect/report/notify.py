"""Someone is told: one GitHub issue per regression that follows the verdicts and the fix status.

The issue is the pipeline's memory of what it last said.  Its body holds the newest Markdown
summary and, in an HTML comment, the state it was written from (each build's verdict per GPU
model, the fix status).  A run that changes that state rewrites its own section of the body and
adds a comment naming the changes (a comment is what notifies the people watching); a run that
changes nothing sends no write at all.  The matrix and the weekly fix check share the issue, each
in its section.  A state marker that is not what torchbisect wrote (edited by hand, say) is said
in a note, read as no state (every verdict counts as new) and written anew.

Verdicts are kept per (GPU model, build): the same build measured on an H200 and a GB300 are two
verdicts, and a change on one model is said naming it.  A state written by a torchbisect that kept
no models (`"verdicts": {build: verdict}`) is read once as the baseline, said in a note and written
anew per model: with one model measured now it is that model's; with several, each model is
compared with it and each such change says the baseline named no model.

Each regression (each probe of the store) has its own issue, titled by the probe's title and
found among the open issues labelled `torchbisect` by the probe its state names; an issue whose
state names no probe was written when there was one regression, the default probe's, and stays
that regression's.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from packaging.version import InvalidVersion, Version

from .. import cells, defaults
from ..model import CellRun, RunStatus, Verdict
from ..net.github import GitHub
from ..outcome import BisectResult, Direction
from ..utils.words import count

LABEL = "torchbisect"
_STATE = re.compile(r"<!-- torchbisect-state: (\{.*?\}) -->", re.DOTALL)


@dataclass(frozen=True, kw_only=True)
class FixStatus:
    """What the weekly check found: `key` is what is compared between runs, `text` what is said."""

    key: str  # "fixed:<date>", "no-fix:<date>" or "unknown"
    text: str

    @property
    def decided(self) -> bool:
        return self.key != "unknown"


Verdicts = dict[str, dict[str, str]]  # GPU model -> build (cell id) -> verdict


def verdicts_of(runs: list[CellRun]) -> Verdicts:
    """Each build's verdict per GPU model; infrastructure failures are not verdicts and are
    left out."""
    by_model: Verdicts = {}
    for r in runs:
        if r.status is RunStatus.OK and r.verdict is not None:
            by_model.setdefault(r.gpu_model, {})[r.cell.id] = r.verdict.value
    return by_model


def fix_status(runs: list[CellRun], bisections: list[BisectResult]) -> FixStatus:
    """From a fix search's own store: the fix it found, or its newest nightly still affected."""
    fixes = [
        (b, b.after) for b in bisections if b.direction is Direction.FIX and b.after is not None
    ]
    if fixes:
        found, first = fixes[-1]
        if not found.exact:  # unknown nightlies before it: the fix is one of several
            return FixStatus(
                key=f"fixed:{first.date}",
                text=f"fix found: the first good nightly is one of "
                f"{len(found.candidates)}: {', '.join(found.candidates)}",
            )
        return FixStatus(
            key=f"fixed:{first.date}",
            text=f"fix found: first good nightly {first.date} ({first.version})",
        )
    nightlies = sorted(
        (r for r in runs if r.cell.date and r.status is RunStatus.OK),
        key=lambda r: r.cell.date or "",
    )
    if nightlies and nightlies[-1].verdict is Verdict.AFFECTED:
        newest = nightlies[-1].cell
        return FixStatus(
            key=f"no-fix:{newest.date}",
            text=f"no fix yet: newest nightly {newest.date} ({newest.version}) still affected",
        )
    return FixStatus(
        key="unknown",
        text="the fix check could not tell: the newest nightly has "
        "no verdict (see the bisect step's log)",
    )


def changes(old: Verdicts, new: Verdicts, *, baseline: dict[str, str] | None = None) -> list[str]:
    """What a watcher is told: per model, builds whose verdict moved and new builds that differ
    from their predecessor; a model measured for the first time, or gone from the store; and
    builds on which the models newly disagree.  `baseline`: an older state that named no model,
    compared with every model the new state has no state for."""
    said: list[str] = []
    for model in sorted(new):
        before = old.get(model)
        if before is None and baseline is not None:
            said += _moved(
                model, baseline, new[model], note=" (the earlier state named no GPU model)"
            )
        elif before is not None:
            said += _moved(model, before, new[model])
        elif old:  # (a first issue, or a state read as none, has no news to tell)
            said.append(f"{_name(model)}: measured for the first time, {_tally(new[model])}")
    said += [
        f"{_name(model)}: no verdicts in this store any more ({len(old[model])} before)"
        for model in sorted(set(old) - set(new))
    ]
    was, now = _disagreements(old), _disagreements(new)
    said += [
        f"`{cell}`: the verdict differs between GPU models: "
        + "; ".join(
            f"{_word(v)} on {', '.join(_name(m) for m in ms)}"
            for v, ms in sorted(now[cell].items())
        )
        for cell in sorted(now)
        if was.get(cell) != now[cell]
    ]
    return said


def _moved(model: str, old: dict[str, str], new: dict[str, str], note: str = "") -> list[str]:
    on = f"`{{}}` on {_name(model)}"
    moved = [
        f"{on.format(cell)}: {_word(old[cell])} → {_word(new[cell])}{note}"
        for cell in sorted(new)
        if cell in old and old[cell] != new[cell]
    ]
    for cell in sorted(set(new) - set(old)):
        before = _predecessor(cell, old)
        if before is not None and old[before] != new[cell]:
            moved.append(
                f"{on.format(cell)}: {_word(new[cell])} (the build before it, "
                f"`{before}`, was {_word(old[before])}){note}"
            )
    return moved


_ANSWERS = {
    Verdict.AFFECTED.value: True,
    Verdict.NOT_AFFECTED.value: False,
    Verdict.REFUSED.value: False,
}  # a build that refuses with a clear error is fixed


def _disagreements(by_model: Verdicts) -> dict[str, dict[str, tuple[str, ...]]]:
    """Builds measured affected on one model and not affected (or refused) on another: verdict
    -> the models.  A model without an answer (skipped, inconclusive…) disagrees with none."""
    seen: dict[str, dict[str, list[str]]] = {}
    for model, verdicts in sorted(by_model.items()):
        for cell, verdict in verdicts.items():
            if verdict in _ANSWERS:
                seen.setdefault(cell, {}).setdefault(verdict, []).append(model)
    return {
        cell: {v: tuple(ms) for v, ms in by.items()}
        for cell, by in seen.items()
        if len({_ANSWERS[v] for v in by}) > 1
    }


def _tally(verdicts: dict[str, str]) -> str:
    counts = Counter(verdicts.values())
    return (
        f"{count(len(verdicts), 'build')} with a verdict ("
        + ", ".join(
            f"{n} {_word(v)}" for v, n in sorted(counts.items(), key=lambda x: (-x[1], x[0]))
        )
        + ")"
    )


def _word(verdict: str) -> str:
    return verdict.replace("_", " ")


_PLAIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9 .()+-]{0,80}")


def _name(model: str) -> str:
    """A GPU model as a comment names it: plain when it reads like one ("NVIDIA H200"), else a
    code span, so text recorded by a probe cannot become a link, a mention or HTML."""
    if _PLAIN.fullmatch(model) and "www." not in model.lower():
        return model
    return "`" + " ".join(model.replace("`", "'").split())[:80] + "`"


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


def title_of(regression_title: str) -> str:
    """The issue's title: the regression's, as its probe names it."""
    return f"torchbisect: {regression_title}"[:256]


def issue_of(issues: list[tuple[int, str]], probe: str) -> tuple[int, str] | None:
    """The oldest issue whose state names `probe`; one whose state names no probe (or cannot be
    read) belongs to the default probe, the one regression there was before there were several."""
    for number, body in sorted(issues):
        state, _ = _read_state(body)
        if state.get("probe", defaults.PROBE) == probe:
            return number, body
    return None


def tell(
    api: GitHub,
    repo: str,
    *,
    section: str,
    markdown: str,
    verdicts: Verdicts | None = None,
    fix: FixStatus | None = None,
    kinds: dict[str, tuple[str, str]] | None = None,
    probe: str = defaults.PROBE,
    title: str = "",
) -> Told:
    """Open the regression's issue (`title`), or update it when the verdicts, the fix status or
    whether each runner kind reported (`kinds`: name -> (state, the sentence that says it))
    changed since last said.  `probe`: the regression's, whose issue this is."""
    issue = issue_of(api.find_issues(repo, LABEL), probe)
    number = issue[0] if issue else 0
    body = issue[1] if issue else ""
    state, wrong = _read_state(body)
    notes = (
        [
            f"the state marker in issue #{number} is not one torchbisect wrote ({wrong}); "
            "it is read as no state, so every verdict counts as new"
        ]
        if wrong
        else []
    )
    said: list[str] = []
    rewrite = bool(wrong)  # a marker that was wrong, or of an older torchbisect, is written anew
    state["probe"] = probe  # written with the next change (an older state named none)
    if verdicts is not None:
        legacy = state.pop("verdicts", None)
        if legacy is not None and "models" not in state:
            baseline, old, note = _legacy(legacy, verdicts, number)
            notes.append(note)
            rewrite = True
        else:
            baseline, old = None, state.get("models", {})
        said += changes(old, verdicts, baseline=baseline)
        state["models"] = verdicts
    if kinds is not None:
        said += kind_changes(state.get("kinds"), kinds)
        state["kinds"] = {name: st for name, (st, _) in kinds.items()}
    if fix is not None and fix.decided and state.get("fix") != fix.key:
        said.append(f"fix status: {fix.text}")
        state["fix"] = fix.key
    new_body = _write_state(_set_section(body, section, markdown), state)
    if issue is None:
        number = api.create_issue(repo, title_of(title or probe), new_body, [LABEL])
        return Told(action="opened", number=number, changes=tuple(said))
    if not said and not rewrite:
        return Told(action="unchanged", number=number)
    api.update_issue(repo, number, new_body)
    if said:
        api.comment(repo, number, "What changed:\n\n" + "\n".join(f"- {s}" for s in said))
    return Told(action="updated", number=number, changes=tuple(said), notes=tuple(notes))


def kind_changes(old: dict[str, str] | None, new: dict[str, tuple[str, str]]) -> list[str]:
    """Runner kinds whose attendance moved ("reported", "partial", "absent", "never"): a kind
    whose runners went offline is news, and so is one that came back.  The first time kinds are
    followed (`old` None, or the store held no attendance: "unknown") only a kind that is not all
    there is news; a store without attendance says nothing either way."""
    said = []
    for name, (state, text) in new.items():
        before = (old or {}).get(name)
        first = old is None or before == "unknown"
        if state not in (before, "unknown") and not (first and state == "reported"):
            said.append(f"runner kind {_name(name)}: {text}")
    return said


def _legacy(
    verdicts: dict[str, str], now: Verdicts, number: int
) -> tuple[dict[str, str] | None, Verdicts, str]:
    """An older torchbisect's state (one verdict per build, no GPU model): (the baseline every
    model is compared with, the per-model state it stands for, the note that says so)."""
    said = (
        f"the state in issue #{number} was written by a torchbisect that kept no GPU models "
        f"({count(len(verdicts), 'build')})"
    )
    if len(now) == 1:
        [model] = now
        return (
            None,
            {model: verdicts},
            (
                f"{said}; it is read as {_name(model)}'s, the only GPU "
                "model measured now, and written anew per model"
            ),
        )
    return (
        verdicts,
        {},
        (
            f"{said}; each of the {len(now)} GPU models measured now is compared "
            "with it (a change said against it may be a model's first "
            "measurement), and it is written anew per model"
        ),
    )


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
    if not _builds(state.get("verdicts", {})):
        return {}, "its verdicts are not a mapping of build to verdict"
    models = state.get("models", {})
    if not isinstance(models, dict) or not all(
        isinstance(m, str) and _builds(v) for m, v in models.items()
    ):
        return {}, "its models are not a mapping of GPU model to each build's verdict"
    kinds = state.get("kinds", {})
    if not isinstance(kinds, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in kinds.items()
    ):
        return {}, "its runner kinds are not a mapping of kind to state"
    if not isinstance(state.get("fix", ""), str):
        return {}, "its fix status is not text"
    if not isinstance(state.get("probe", ""), str):
        return {}, "its probe is not a name"
    return state, ""


def _builds(verdicts: Any) -> bool:
    return isinstance(verdicts, dict) and all(
        isinstance(k, str) and isinstance(v, str) for k, v in verdicts.items()
    )


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
