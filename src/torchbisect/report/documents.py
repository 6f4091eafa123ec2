"""The JSON documents torchbisect publishes or reads, as types, and their JSON Schemas.

`ResultsDocument` is the page's results.json (written by report/writers/results_json.py);
`ProbeDocument` is what a probe prints (probes/README.md's contract; its types live in
probe/shape.py, where the gate of probe/document.py reads them too).  The schemas published
beside matrix.schema.json (results.schema.json, probe.schema.json, and copies in every rendered
site) are generated from these types, as matrix.schema.json is from the config model, and the
tests validate every committed document against them, so a change to either shape shows up as a
schema diff.

results.json is torchbisect's own output: its objects name every key and allow no others.  A
probe document is any probe's output: the schema asks for what the gate reads and allows more.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, TypeAdapter
from typing_extensions import NotRequired, TypedDict

from ..model import Channel, RunStatus, Verdict
from ..outcome import Direction, Outcome
from ..probe.shape import ProbeDocument

SCHEMA_FILES = {"results": "results.schema.json", "probe": "probe.schema.json"}

_CLOSED = ConfigDict(extra="forbid")
Count = Annotated[int, Field(ge=0)]
Seconds = Annotated[float, Field(ge=0)]


# ---- results.json ------------------------------------------------------------------------------


class CellJson(TypedDict):
    """The build a run tested (not the plan's knobs)."""

    __pydantic_config__ = _CLOSED
    id: str
    channel: Channel
    version: str
    cuda: str
    python: str
    date: str | None
    url: str | None  # the wheel's URL; a local wheel by its file name only
    sha256: str | None
    probe: str
    yanked: NotRequired[str]  # only for a file the index had yanked: its reason ("" for none)


class CaseJson(TypedDict):
    __pydantic_config__ = _CLOSED
    verdict: Verdict
    detail: str
    seconds: float
    stale_trials: Count | None
    trials: Count | None
    flaky: bool


class RunJson(TypedDict):
    __pydantic_config__ = _CLOSED
    cell: CellJson
    gpu: str
    driver: str
    status: RunStatus
    reason: str  # why an infrastructure failure happened; "" otherwise
    verdict: Verdict | None  # None: no verdict (an infrastructure failure)
    cases: dict[str, CaseJson]
    env: dict[str, Any]  # the probe's `env`, as it reported it
    probe: str
    probe_version: str
    wheel_sha256: str | None
    backend: str
    started: str
    seconds_install: float
    seconds_probe: float
    log_excerpt: str


class NightlyEdgeJson(TypedDict):
    """Where the verdict changes: `date` is the first nightly MEASURED on the new side, the first
    nightly there only when `exact`."""

    __pydantic_config__ = _CLOSED
    date: str
    version: str
    previous: str | None
    bisected: bool
    exact: bool
    # Written since the edge said how far it is known (older documents lack them): the nightlies
    # that can be the first on the new side (empty: not enumerated, any after `previous`), and
    # the page's sentence for the edge.
    candidates: NotRequired[list[str]]
    text: NotRequired[str]
    case: str
    compare_url: str


class SinceJson(TypedDict):
    """Where the newest affected stretch of releases began, as measured."""

    __pydantic_config__ = _CLOSED
    release: str  # its first affected release
    after: str  # the release before it measured not affected (or without the API)
    exact: bool  # nothing the store knows of lies between them unmeasured, and `after` was
    # measured on every GPU model affected at `release`
    again: bool  # an older release was affected: the regression came back


class HeadlineJson(TypedDict):
    """One GPU model's headline, as the page states it."""

    __pydantic_config__ = _CLOSED
    gpu: str
    text: str
    tested: list[str]
    unclear: list[str]
    affected_ranges: list[list[str]]  # [first, last] affected releases of each run of them
    first_affected_nightly: NightlyEdgeJson | None
    first_fixed_nightly: NightlyEdgeJson | None
    fixed_in: NotRequired[str | None]  # the release the fix is measured in (fixed_release)
    since: NotRequired[SinceJson | None]  # where the newest affected stretch began
    newest_run: str


class NightlyPointJson(TypedDict):
    __pydantic_config__ = _CLOSED
    date: str
    version: str
    verdict: Outcome
    git_version: str
    main_sha: str
    stale_fraction: float | None
    reason: str
    commit: NotRequired[str]  # a main-branch commit overlaid on this nightly's binary
    build: NotRequired[str]  # a re-spin's PEP 427 build tag ("3")
    yanked: NotRequired[str]  # the index had yanked the file: its reason ("" for none given)


class BisectionJson(TypedDict):
    """A bisection: `last_good`/`first_bad` for a regression, `last_bad`/`first_good` with
    --find-fix (`direction: fix`)."""

    __pydantic_config__ = _CLOSED
    direction: Direction
    case: str
    cuda: str
    python: str
    exact: bool  # one candidate: the first bad (first fixed) build is known
    candidates: list[str]  # oldest first: every build that can be it
    last_good: NotRequired[NightlyPointJson | None]
    first_bad: NotRequired[NightlyPointJson | None]
    last_bad: NotRequired[NightlyPointJson | None]
    first_good: NotRequired[NightlyPointJson | None]
    probes: Count
    points: list[NightlyPointJson]
    unknown: list[str]  # no verdict: tried without one, or not judged (CUDA not known)
    missing: list[str]  # dates between the pair with no nightly; releases without a build here
    # the builds probed whose file the index had yanked, by key, with the reason (since re-spins
    # and yanks were told apart)
    yanked: NotRequired[dict[str, str]]
    compare_url: str
    commits: list[str]
    rule: str
    reproduce: str
    finished: str
    # down to the commit (`bisect --pytorch-repo`): the bisection over the commits of this pair
    narrowed: NotRequired[BisectionJson]


class KindJson(TypedDict):
    """A runner kind runners.yaml declares (or the store's attendance names), and what the
    attendance says of it in the latest run."""

    __pydantic_config__ = _CLOSED
    name: str
    gpu: str  # the GPU name it declares (undeclared: the names its runners reported)
    platform: str  # "" for an undeclared kind
    declared: bool
    state: Literal["reported", "partial", "absent", "never", "unknown"]  # unknown: no attendance
    text: str  # the page's sentence
    gpus: list[str]  # the GPU models with results that it names


class ModelsJson(TypedDict):
    """The GPU models measured, what holds across them, where their verdicts differ."""

    __pydantic_config__ = _CLOSED
    measured: list[str]  # the GPU models with results, one headline each
    headline: str  # across the models ("" with fewer than two)
    differences: list[str]  # one sentence per release or nightly edge the models disagree on
    kinds: list[KindJson]  # empty when the report read no runners.yaml


class ResultsDocument(TypedDict):
    """results.json: every run the page shows (in page order), the headlines, the bisections."""

    __pydantic_config__ = _CLOSED
    schema: Literal[1]
    generated: str  # ISO 8601, UTC
    headlines: list[HeadlineJson]
    models: NotRequired[ModelsJson]  # written since several GPU kinds were compared
    cases: list[str]  # the page's columns
    runs: list[RunJson]
    bisections: list[BisectionJson]


_TYPES = {
    "results": (ResultsDocument, "torchbisect results.json"),
    "probe": (ProbeDocument, "torchbisect probe document"),
}


def json_schema(name: str) -> dict[str, Any]:
    """The JSON Schema of document `name` ("results" or "probe")."""
    kind, title = _TYPES[name]
    schema = TypeAdapter(kind).json_schema()
    schema["title"] = title
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}


def schema_text(name: str) -> str:
    return json.dumps(json_schema(name), indent=2) + "\n"
