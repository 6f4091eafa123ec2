"""The gate a probe's JSON document passes before it is stored or drawn.

A probe is any script in the probes folder (`TORCHBISECT_PROBES`), so its document is untrusted:
it may be huge, nested thousands deep, or say `"stale_trials": "x"`.  `check_text` (what a probe
wrote) and `check` (a parsed document, e.g. from an older store) either return the document with
every string capped at `DETAIL_CHARS`, or raise `Rejected` with the reason — which the caller
turns into an infrastructure failure of that one cell, never a verdict.

Limits: `MAX_BYTES` of text, `MAX_DEPTH` levels of nesting, the verdicts of `model.Verdict`,
numbers where numbers are read (seconds, trials), strings (or null) where the report prints text.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from .model import PROBE_SCHEMA, Verdict

MAX_BYTES = 1_000_000  # the real probe writes about 10 KB
MAX_DEPTH = 12  # document → cases → case → variants → variant → value is 6
DETAIL_CHARS = 2_000  # per string: a traceback's last lines, not a log
_VERDICTS = frozenset(v.value for v in Verdict)
_TEXT_ENV = ("torch", "torch_version", "git_version", "cuda_runtime", "driver", "gpu",
             "capability", "python", "platform", "triton")
_NUMBERS = ("seconds", "import_seconds", "wall_seconds")
_COUNTS = ("stale_trials", "trials")
_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"')
_BRACKETS = re.compile(r"[\[\]{}]")


class Rejected(ValueError):
    """The document cannot be trusted; `str(err)` says why, in a few words."""


def check_text(text: str) -> dict[str, Any]:
    """Parse and check what a probe wrote."""
    if len(text) > MAX_BYTES:
        raise Rejected(f"the document is larger than {MAX_BYTES:,} bytes")
    if _depth(text) > MAX_DEPTH:
        raise Rejected(f"the document nests deeper than {MAX_DEPTH} levels")
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as err:
        raise Rejected(f"not JSON ({str(err)[:200]})") from None
    return check(doc)


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
    for key in ("probe", "probe_version"):
        if key in doc and not isinstance(doc[key], str):
            raise Rejected(f"`{key}` is not a string")
    _number(doc.get("seconds"), "seconds")
    return _capped(doc)


def _case(name: str, case: Any) -> None:
    where = f"case {_short(name)}"
    if not isinstance(case, dict):
        raise Rejected(f"{where} is not an object")
    _verdict(case.get("verdict"), f"{where}: verdict")
    if not isinstance(case.get("detail", ""), str):
        raise Rejected(f"{where}: detail is not a string")
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
        return value if len(value) <= DETAIL_CHARS else value[:DETAIL_CHARS - 1] + "…"
    if isinstance(value, dict):
        return {str(k)[:DETAIL_CHARS]: _capped(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [_capped(v, depth + 1) for v in value]
    return value


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
