"""The field types of matrix.yaml: each value's check and its sentence when it fails.

Every check raises pydantic's `expected` error ("expected a date such as 2026-10-01, got …"), which
sentences.py turns into one sentence naming the file, line and key.  Text types also carry
their pattern into the JSON Schema.  The models that use these types are in matrix.py.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Annotated, Any, cast

from annotated_types import Ge, GroupedMetadata, Gt, Le
from pydantic import BeforeValidator, StringConstraints, ValidationInfo, WithJsonSchema
from pydantic_core import PydanticCustomError

from ..net import credentials
from .sentences import show


def expected(what: str, value: Any, hint: str = "") -> PydanticCustomError:
    return PydanticCustomError(
        "expected",
        "expected {what}, got {got}{hint}",
        {"what": what, "got": show(value), "hint": hint},
    )


def _whole(one: str, many: str, most: int | None = None) -> BeforeValidator:
    def check(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise expected(f"a whole number of {many}", value)
        if value < 1:
            raise expected(f"at least 1 {one}", value)
        if most is not None and value > most:
            raise expected(f"at most {most:,} {many}", value)
        return value

    return BeforeValidator(check)


MAX_DAYS = 3660  # ten years of nightlies: far more than any index keeps, and than a matrix needs


def _seconds(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise expected("a number of seconds", value)
    if value == float("inf"):  # a timeout that never ends is none
        raise expected("a finite number of seconds", value)
    if not value > 0:  # `not >`: NaN too
        raise expected("more than 0 seconds", value)
    try:
        return float(value)
    except OverflowError:  # an int no float can hold
        raise expected("a finite number of seconds", value) from None


class _Matching(GroupedMetadata):
    """A text type's check against `regex`, with the pattern also in the JSON Schema: pydantic
    unpacks it into the two (`Annotated[str, _Matching(...)]`), and mypy reads the type as str."""

    def __init__(self, regex: str, what: str) -> None:
        self._regex, self._what, self._compiled = regex, what, re.compile(regex)

    def __iter__(self) -> Iterator[object]:
        yield StringConstraints(pattern=f"^(?:{self._regex})$")
        yield BeforeValidator(self._check)

    def _check(self, value: Any) -> str:
        if (
            isinstance(value, int)
            and not isinstance(value, bool)
            and self._compiled.fullmatch(str(value))
        ):
            raise expected(self._what, value, " (put it in quotes: YAML reads it as a number)")
        if not isinstance(value, str) or not self._compiled.fullmatch(value):
            raise expected(self._what, value)
        return value


def _python(value: Any) -> str:
    if isinstance(value, float):
        raise expected(
            'a Python version in quotes such as "3.12"',
            value,
            " (YAML reads an unquoted 3.10 as the number 3.1)",
        )
    if not isinstance(value, str) or not re.fullmatch(r"3\.\d{1,2}t?", value):
        raise expected('a Python version such as "3.12" or "3.13t"', value)
    return value


def _day(value: Any) -> date:
    if isinstance(value, date):
        return value
    if isinstance(value, str) and re.fullmatch(r"\d{4}-\d\d-\d\d", value):
        try:
            return date.fromisoformat(value)
        except ValueError:
            pass
    raise expected("a date such as 2026-10-01", value)


def _boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise expected("true or false", value)
    return value


def _env_value(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise expected("a text or number value", value)
    return str(value)


def _version(value: Any) -> str:
    from packaging.version import InvalidVersion, Version

    try:
        Version(value)
        return cast(str, value)  # Version() reads text alone: a TypeError otherwise
    except (InvalidVersion, TypeError):
        raise expected("a torch version such as 2.15.0", value) from None


_RANGE = re.compile(r"all(?: from (\S+?)(?: to (\S+))?)?")


def stable_versions(value: Any) -> str | list[str]:
    if isinstance(value, list):
        if not value:
            raise expected("at least one version", value)
        return [_version(v) for v in value]
    match = _RANGE.fullmatch(value) if isinstance(value, str) else None
    if not isinstance(value, str) or not match or not all(_valid(v) for v in match.groups() if v):
        raise expected("a list of versions or 'all from X' (optionally 'to Y')", value)
    return value


def test_versions(value: Any) -> str | list[str]:
    if value == "current":
        return "current"
    if isinstance(value, list) and value:
        return [_version(v) for v in value]
    raise expected("'current' or a list of versions", value)


def _valid(text: str) -> bool:
    try:
        _version(text)
        return True
    except PydanticCustomError:
        return False


def _wheel_ref(value: Any, info: ValidationInfo) -> str:
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    what = "a local path or an https:// URL of a .whl file"
    if not isinstance(value, str) or re.match(r"^(?!https://|file://)\w+://", value):
        raise expected(what, _hidden(value))
    try:
        parse_wheel_filename(value.rsplit("/", 1)[-1].replace("%2B", "+"))
    except InvalidWheelFilename:
        raise expected(
            what + " (named like torch-<version>-<python>-<abi>-<platform>.whl)", _hidden(value)
        ) from None
    return _resolve_path(credentials.remember(value), info)


def _index_ref(value: Any, info: ValidationInfo) -> str:
    if not isinstance(value, str) or re.search(r"\{(?!cuda\})", value) or not value:
        raise expected(
            "an index URL or folder, with {cuda} where the CUDA tag goes", _hidden(value)
        )
    return _resolve_path(credentials.remember(value), info)


def _hidden(value: Any) -> Any:
    """A URL's password masked before a sentence quotes it."""
    return credentials.hide(value) if isinstance(value, str) else value


def _resolve_path(value: str, info: ValidationInfo) -> str:
    """Relative paths are relative to matrix.yaml, not to wherever torchbisect runs."""
    base = (info.context or {}).get("base")
    if "://" in value or base is None or Path(value).is_absolute():
        return value
    return str((Path(base) / value).resolve())


def as_list(value: Any) -> list[Any]:
    """A channel is one entry (a mapping) or a list of entries; validate both as a list."""
    if isinstance(value, dict):
        return [value]
    if isinstance(value, list) and all(isinstance(v, dict) for v in value):
        return value
    odd = (
        next((v for v in value if not isinstance(v, dict)), None)
        if isinstance(value, list)
        else None
    )
    hint = f" holding {show(odd)}" if isinstance(value, list) else ""
    raise expected("a mapping or a list of mappings", value, hint)


def preinstalled_entry(value: Any) -> Any:
    if value is True:
        return {}
    if value is False:
        return None
    if not isinstance(value, dict):
        raise expected("true, false or a mapping", value)
    return value


def _short_name(value: Any) -> Any:
    if isinstance(value, str) and len(value) > 64 and re.fullmatch(r"[A-Za-z0-9][\w.-]*", value):
        raise expected("a name of at most 64 characters (it becomes part of file names)", value)
    return value


# At most 64: a name becomes part of file names (`dev-<name>.log`, `locks/<kind>.lock.json`).
_NAME = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}"
CudaTag = Annotated[str, _Matching(r"cu\d{3}|cpu|auto", "a CUDA tag such as cu130, cpu or auto")]
ConcreteTag = Annotated[str, _Matching(r"cu\d{3}|cpu", "a CUDA tag such as cu130 or cpu")]
ImageKey = Annotated[str, _Matching(r"cu\d{3}|cpu|default", "a CUDA tag such as cu130, or default")]
_NAME_IS = "a name of letters, digits, '.', '_' or '-'"
Name = Annotated[str, _Matching(_NAME, _NAME_IS), BeforeValidator(lambda value: _short_name(value))]
EnvName = Annotated[str, _Matching(r"[A-Za-z_][A-Za-z0-9_]*", "an environment variable name")]
Sha256 = Annotated[str, _Matching(r"[0-9a-fA-F]{64}", "a sha256 of 64 hex digits")]
ImageRef = Annotated[
    str, _Matching(r"\S+", "a container image such as nvidia/cuda:13.0.1-base-ubuntu24.04")
]
EnvValue = Annotated[str, BeforeValidator(_env_value)]
Python = Annotated[str, StringConstraints(pattern=r"^3\.\d{1,2}t?$"), BeforeValidator(_python)]
Day = Annotated[date, BeforeValidator(_day)]
Days = Annotated[int, Ge(1), Le(MAX_DAYS), _whole("day", "days", MAX_DAYS)]


def _probe_names(value: Any) -> list[str]:
    """`probe:` is one name or a list of them; each is checked here, so a bad one is said at
    the key (`probe`), as a single name always was."""
    names = [value] if not isinstance(value, list) else value
    for name in names:
        _short_name(name)
        if isinstance(name, int) and not isinstance(name, bool) and re.fullmatch(_NAME, str(name)):
            raise expected(_NAME_IS, name, " (put it in quotes: YAML reads it as a number)")
        if not isinstance(name, str) or not re.fullmatch(_NAME, name):
            raise expected(
                _NAME_IS if not isinstance(value, list) else f"a list of probe names ({_NAME_IS})",
                name,
            )
    return list(names)


# A probe's name, or a list of them; the schema says both.
ProbeNames = Annotated[
    list[str],
    BeforeValidator(_probe_names),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "string", "pattern": f"^(?:{_NAME})$"},
                {"type": "array", "items": {"type": "string", "pattern": f"^(?:{_NAME})$"}},
            ]
        }
    ),
]
MAX_TRIALS = 1_000_000  # the probe's default is 20; a million is hours of replays per case
Trials = Annotated[int, Ge(1), Le(MAX_TRIALS), _whole("trial", "trials", MAX_TRIALS)]
Seconds = Annotated[float, Gt(0), BeforeValidator(_seconds)]
Flag = Annotated[bool, BeforeValidator(_boolean)]
WheelRef = Annotated[str, BeforeValidator(_wheel_ref)]
IndexRef = Annotated[str, BeforeValidator(_index_ref)]
HttpsUrl = Annotated[str, _Matching(r"https://[^\s/]+\S*", "an https:// URL")]
