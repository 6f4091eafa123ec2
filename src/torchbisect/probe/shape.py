"""The shape of a probe's JSON document, said once, as types: its keys, which are required, their
types.

probes/README.md states the contract in words; these types are it for the code.  The gate
(probe/document.py) takes from them which keys it checks as text, numbers and counts, and
report/documents.py makes probe.schema.json of them.  A probe document is any probe's output:
the types name what the gate reads and allow more (a case's own keys, an env's own keys).

No import of pydantic here (the gate runs on every probe's document): the `__pydantic_config__`
and the bounds (`annotated_types`) are plain values that pydantic reads when the schema is made.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args, get_origin

from annotated_types import Ge
from typing_extensions import NotRequired, Required, TypedDict, get_type_hints

from ..model import Verdict

Count = Annotated[int, Ge(0)]
_OPEN = {"extra": "allow"}
_PLAIN = {"type": ["string", "number", "boolean", "null"]}


class ProbeCaseJson(TypedDict):
    __pydantic_config__ = _OPEN  # a case may add its own keys (a probe's VARIANTS, …)
    verdict: Verdict
    detail: NotRequired[str]
    seconds: NotRequired[float | None]
    import_seconds: NotRequired[float | None]
    wall_seconds: NotRequired[float | None]
    stale_trials: NotRequired[Count | None]
    trials: NotRequired[Count | None]


class ProbeEnvJson(TypedDict):
    """Where the probe ran: these keys are text (or null, unknown); any other is a plain value."""

    __pydantic_config__ = {"extra": "allow", "json_schema_extra": {"additionalProperties": _PLAIN}}
    torch: NotRequired[str | None]
    torch_version: NotRequired[str | None]
    git_version: NotRequired[str | None]
    cuda_runtime: NotRequired[str | None]
    driver: NotRequired[str | None]
    gpu: NotRequired[str | None]
    capability: NotRequired[str | None]
    python: NotRequired[str | None]
    platform: NotRequired[str | None]
    triton: NotRequired[str | None]
    # key -> why it is null: the query raised, or ended the process that asked it (an aborting
    # library), or was never asked
    unknown: NotRequired[dict[str, str]]


class ProbeDocument(TypedDict):
    """What a probe prints (probes/README.md): one verdict, a verdict per case, the environment."""

    __pydantic_config__ = _OPEN
    schema: Literal[1]
    verdict: Verdict
    probe: NotRequired[str]
    probe_version: NotRequired[str]
    exit_code: NotRequired[int]
    cases: NotRequired[dict[str, ProbeCaseJson]]
    env: NotRequired[ProbeEnvJson]
    options: NotRequired[dict[str, Any]]
    seconds: NotRequired[float | None]


def keys(kind: type, of: Any) -> tuple[str, ...]:
    """The keys of `kind` whose type is `of` (`float | None`, `Count | None`), required or not,
    in the order `kind` names them."""
    hints = get_type_hints(kind, include_extras=True)
    return tuple(key for key, hint in hints.items() if _bare(hint) == of)


def _bare(hint: Any) -> Any:
    return get_args(hint)[0] if get_origin(hint) in (NotRequired, Required) else hint
