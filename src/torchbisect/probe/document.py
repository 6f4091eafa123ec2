"""The gate a probe's JSON document passes before it is stored or drawn (and a bisection's).

A probe is any script in the probes folder (`TORCHBISECT_PROBES`), so its document is untrusted:
it may be huge, nested thousands deep, or say `"stale_trials": "x"`.  `check_text` (what a probe
wrote) and `check` (a parsed document, e.g. from an older store) either return the document with
every string capped at `DETAIL_CHARS` and token-shaped strings masked (`masking`), or raise
`Rejected` with the reason — which the caller turns into an infrastructure failure of that one
cell, never a verdict.  Recorded documents (`report --probe-json`, `--bisection`) pass the same
gate (`read_text`, `check_bisection`): a hostile file is one sentence, never a traceback or a
page as large as the file.

Limits: `MAX_BYTES` of text, `MAX_DEPTH` levels of nesting, the verdicts of `model.Verdict`,
numbers where numbers are read (seconds, trials), strings (or null) where the report prints text.
Which keys are text, numbers or counts is read from the document's types (probe/shape.py), which
probe.schema.json is made of too.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from .. import defaults
from ..errors import ConfigError
from ..masking import SHORTEST_SECRET, mask
from ..model import PROBE_SCHEMA, Verdict, roll_up
from ..utils.words import storable
from .scripts import probe_info
from .shape import Count, ProbeCaseJson, ProbeDocument, ProbeEnvJson, keys

MAX_BYTES = 1_000_000  # the real probe writes about 10 KB
MAX_DEPTH = 12  # document → cases → case → a case's own dict → its entry → value is 6
DETAIL_CHARS = 2_000  # per string: a traceback's last lines, not a log
_VERDICTS = frozenset(v.value for v in Verdict)
_TEXT = keys(ProbeDocument, str)  # probe, probe_version
_SECONDS = keys(ProbeDocument, float | None)
_CASE_TEXT = keys(ProbeCaseJson, str)  # detail
_NUMBERS = keys(ProbeCaseJson, float | None)  # seconds, import_seconds, wall_seconds
_COUNTS = keys(ProbeCaseJson, Count | None)  # stale_trials, trials
_TEXT_ENV = keys(ProbeEnvJson, str | None)  # torch, …, triton
_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"')
_BRACKETS = re.compile(r"[\[\]{}]")


class Rejected(ValueError):
    """The document cannot be trusted; `str(err)` says why, in a few words."""


def check_text(text: str) -> dict[str, Any]:
    """Parse and check what a probe wrote."""
    return check(parse(text))


def parse(text: str, *, max_bytes: int = MAX_BYTES, max_depth: int = MAX_DEPTH) -> Any:
    """JSON `text`, refused (`Rejected`) when larger or deeper than the bounds, before parsing."""
    if len(text) > max_bytes:
        raise Rejected(f"the document is larger than {max_bytes:,} bytes")
    if _depth(text) > max_depth:
        raise Rejected(f"the document nests deeper than {max_depth} levels")
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as err:
        raise Rejected(f"not JSON ({str(err)[:200]})") from None


def read_text(path: Path, *, max_bytes: int = MAX_BYTES) -> str:
    """A recorded document's text, read no further than `max_bytes` (and one byte more, so that
    `parse` can say it was too large): a 50 MB file is never loaded.  OSError passes through."""
    with Path(path).open("rb") as fh:
        return fh.read(max_bytes + 1).decode("utf-8", errors="replace")


# -- a bisection's document (a `bisect --json` file, a stored or merged bisection) ---------------

_DIRECTIONS = ("regression", "fix")
_OUTCOMES = ("good", "bad", "unknown")
_POINT_TEXT = ("date", "version", "git_version", "main_sha", "reason")
_RESULT_TEXT = ("case", "cuda", "python", "compare_url", "rule", "reproduce", "finished")
MAX_POINTS = 10_000  # a bisection of every nightly since 2023 probes fewer than 1,500


def check_bisection(doc: Any) -> dict[str, Any]:
    """A bisection result's document, checked and capped like a probe's (`BisectResult.from_json`
    then reads only what this let through)."""
    if not isinstance(doc, dict):
        raise Rejected("the document is not a JSON object")
    if doc.get("direction") not in _DIRECTIONS:
        raise Rejected(f"direction {_short(doc.get('direction'))} is not regression or fix")
    for key in _RESULT_TEXT:
        _text(doc.get(key, ""), f"`{key}`")
    if type(doc.get("probes")) is not int or doc["probes"] < 0:
        raise Rejected(f"`probes` is not a whole number ({_short(doc.get('probes'))})")
    pair = (
        ("last_good", "first_bad")
        if doc["direction"] == "regression"
        else ("last_bad", "first_good")
    )
    for key in pair:
        if doc.get(key) is not None:
            _point(doc[key], f"`{key}`")
    if type(doc.get("exact", False)) is not bool:
        raise Rejected(f"`exact` is not true or false ({_short(doc.get('exact'))})")
    for key in ("points", "skipped", "commits", "candidates", "unknown", "missing"):
        items = doc.get(key, [])
        if not isinstance(items, list) or len(items) > MAX_POINTS:
            raise Rejected(f"`{key}` is not a list of at most {MAX_POINTS:,} items")
        for i, item in enumerate(items):
            if key == "points":
                _point(item, f"point {i}")
            else:
                _text(item, f"`{key}` item {i}")
    capped: dict[str, Any] = _capped(doc)  # a dict's copy, capped: a dict again
    return capped


def _point(point: Any, where: str) -> None:
    if not isinstance(point, dict):
        raise Rejected(f"{where} is not an object")
    unknown = set(point) - {*_POINT_TEXT, "verdict", "stale_fraction"}
    if unknown:
        raise Rejected(f"{where} has unknown keys ({_short(sorted(unknown))})")
    if point.get("verdict") not in _OUTCOMES:
        raise Rejected(
            f"{where}: verdict {_short(point.get('verdict'))} is not one of {', '.join(_OUTCOMES)}"
        )
    for key in _POINT_TEXT:
        _text(point.get(key, ""), f"{where}: {key}")
    if not isinstance(point.get("date"), str):
        raise Rejected(f"{where} has no date")
    fraction = point.get("stale_fraction")
    _number(fraction, f"{where}: stale_fraction")
    if fraction is not None and not 0 <= fraction <= 1:
        raise Rejected(f"{where}: stale_fraction {fraction!r} is not between 0 and 1")


def _text(value: Any, where: str) -> None:
    if not isinstance(value, str):
        raise Rejected(f"{where} is not a string ({_short(value)})")


def check(doc: Any) -> dict[str, Any]:
    """Check a parsed document; the same document with long strings capped."""
    if not isinstance(doc, dict):
        raise Rejected("the document is not a JSON object")
    if doc.get("schema") != PROBE_SCHEMA:
        raise Rejected(f"unsupported probe schema {_short(doc.get('schema'))}")
    _verdict(doc.get("verdict"), "verdict")
    cases = doc.get("cases", {})
    if not isinstance(cases, dict):
        raise Rejected("`cases` is not an object")
    for name, case in cases.items():
        _case(name, case)
    env = doc.get("env", {})
    if not isinstance(env, dict):
        raise Rejected("`env` is not an object")
    for key, value in env.items():
        _env_value(key, value)
    for key in _TEXT:
        if key in doc and not isinstance(doc[key], str):
            raise Rejected(f"`{key}` is not a string")
    for key in _SECONDS:
        _number(doc.get(key), key)
    return _rolled_up(_capped(doc))


def _rolled_up(doc: dict[str, Any]) -> dict[str, Any]:
    """The document with the verdict its cases roll up to (model.roll_up): one that claims
    another keeps its claim only in a `note`, so no gate or page believes it."""
    if doc.get("claimed_verdict") not in _VERDICTS or not isinstance(doc.get("note", ""), str):
        doc = {k: v for k, v in doc.items() if k not in ("claimed_verdict", "note")}
    probe = doc.get("probe")
    computed = roll_up(doc.get("cases", {}), controls_of(probe if isinstance(probe, str) else ""))
    if computed is None or computed.value == doc["verdict"]:
        return doc
    note = (
        f"the probe said {doc['verdict']}, but its cases roll up to {computed.value} "
        "(probes/README.md, Roll-up): stored as " + computed.value
    )
    return {
        **doc,
        "verdict": computed.value,
        "exit_code": computed.exit_code,
        "claimed_verdict": doc["verdict"],
        "note": note,
    }


def controls_of(probe: str) -> dict[str, Verdict]:
    """The probe's control cases and the verdict each must show, as its file declares them
    (CONTROLS, read by probe/info.py, never run); none for a probe whose file is not here.
    Read through probe_info, which caches by the file's path, size and time, never by the
    name alone: another probes folder (TORCHBISECT_PROBES) may hold another file of that name."""
    try:
        declared = probe_info(probe or defaults.PROBE).controls
    except (ConfigError, OSError):
        return {}
    return {name: Verdict(v) for name, v in declared.items() if v in _VERDICTS}


def claimed(doc: dict[str, Any]) -> Verdict:
    """The verdict the probe itself gave (its exit status agrees with this one, not with the
    computed verdict, when the two differ); a stored run keeps it beside the computed one."""
    return Verdict(doc.get("claimed_verdict", doc["verdict"]))


def _case(name: str, case: Any) -> None:
    where = f"case {_short(name)}"
    if not isinstance(case, dict):
        raise Rejected(f"{where} is not an object")
    _verdict(case.get("verdict"), f"{where}: verdict")
    for key in _CASE_TEXT:
        if not isinstance(case.get(key, ""), str):
            raise Rejected(f"{where}: {key} is not a string")
    for key in _NUMBERS:
        _number(case.get(key), f"{where}: {key}")
    for key in _COUNTS:
        value = case.get(key)
        if value is not None and (type(value) is not int or value < 0):
            raise Rejected(f"{where}: {key} is not a whole number ({_short(value)})")
    stale, trials = case.get("stale_trials"), case.get("trials")
    if stale is not None and trials is not None and stale > trials:
        raise Rejected(f"{where}: stale on {stale} of {trials} trials")


def _env_value(key: str, value: Any) -> None:
    if key == "unknown":  # why a key is null: {key: reason}, both text (the probe's gather_env)
        if not isinstance(value, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        ):
            raise Rejected(f"env unknown is not a mapping of text to text ({_short(value)})")
        return
    if key == "capability" and isinstance(value, list):  # older probes wrote [9, 0]
        if len(value) > 4 or not all(type(v) is int for v in value):
            raise Rejected(f"env capability is not a version ({_short(value)})")
        return
    if key in _TEXT_ENV:
        if value is not None and not isinstance(value, str):
            raise Rejected(f"env {key} is not a string or null ({_short(value)})")
    elif value is not None and not isinstance(value, (str, int, float, bool)):
        raise Rejected(f"env {_short(key)} is not a plain value")


def _verdict(value: Any, where: str) -> None:
    if value not in _VERDICTS:
        raise Rejected(f"{where} {_short(value)} is not one of {', '.join(sorted(_VERDICTS))}")


def _number(value: Any, where: str) -> None:
    if value is None:
        return
    if type(value) not in (int, float) or not math.isfinite(value):
        raise Rejected(f"{where} is not a number ({_short(value)})")


def _capped(value: Any, depth: int = 1) -> Any:
    if depth > MAX_DEPTH:
        raise Rejected(f"the document nests deeper than {MAX_DEPTH} levels")
    if isinstance(value, str):
        value = storable(value)  # a lone surrogate ("\\ud800") would stop every later page
        if len(value) < SHORTEST_SECRET:  # most strings of a document: nothing to cap or mask
            return value
        return mask(value if len(value) <= DETAIL_CHARS else value[: DETAIL_CHARS - 1] + "…")
    if isinstance(value, dict):
        return {_key(k): _capped(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [_capped(v, depth + 1) for v in value]
    return value


def _key(key: Any) -> str:
    key = storable(key if isinstance(key, str) else str(key))
    return key if len(key) < SHORTEST_SECRET else mask(key[:DETAIL_CHARS])


def _depth(text: str) -> int:
    """The deepest nesting of brackets outside strings: json.loads would recurse that deep."""
    deepest = level = 0
    for bracket in _BRACKETS.finditer(_STRINGS.sub("", text)):
        level += 1 if bracket[0] in "[{" else -1
        deepest = max(deepest, level)
    return deepest


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"
