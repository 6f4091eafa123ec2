"""The vocabulary every stage shares: channels, verdicts, cells, probe results and cell runs
(what a bisection concludes is its neighbour on the same floor, outcome.py).

Config → plan → run → store → report all speak in these frozen types; nothing passes dicts of
dicts between stages.  The probe scripts cannot import this module (they run inside arbitrary
containers), so `ProbeResult.from_json` is the one place that reads their JSON document.
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from . import defaults
from .exits import Exit

PROBE_SCHEMA = 1
NO_GPU = "no GPU"  # the GPU model of a run that had none


class Channel(str, enum.Enum):
    """Where a build comes from; also the first word of a cell identifier."""

    STABLE = "stable"
    TEST = "test"  # release candidates, on the …/whl/test/ index
    NIGHTLY = "nightly"
    DEV = "dev"  # a local or https wheel named in matrix.yaml
    PREINSTALLED = "preinstalled"  # the torch already in the image or interpreter


class Verdict(str, enum.Enum):
    """What a probe concluded about one case, or about a whole run."""

    AFFECTED = "affected"
    NOT_AFFECTED = "not_affected"
    REFUSED = "refused"  # capture raised a clear error about the lazy copy: a fix
    NOT_APPLICABLE = "not_applicable"
    INCONCLUSIVE = "inconclusive"  # a control misbehaved: nothing here is trustworthy
    ERROR = "error"
    CRASHED = "crashed"
    TIMEOUT = "timeout"
    SKIPPED = "skipped"  # no CUDA device

    @property
    def is_safe(self) -> bool:
        """True for the verdicts that tell a user their build does not give stale data."""
        return self in (Verdict.NOT_AFFECTED, Verdict.REFUSED)

    @property
    def exit_code(self) -> Exit:
        """`git bisect run` convention: 0 good, 1 bad, 125 cannot tell."""
        if self is Verdict.AFFECTED:
            return Exit.AFFECTED
        return Exit.OK if self.is_safe else Exit.CANNOT_TELL


class RunStatus(str, enum.Enum):
    """Whether the probe produced a verdict, or the infrastructure failed before it could."""

    OK = "ok"
    INFRA_FAILURE = "infra_failure"


@dataclass(frozen=True, kw_only=True)
class Cell:
    """One build to test: the unit of work, keyed by `id` everywhere (plan, store, logs, HTML)."""

    id: str
    channel: Channel
    version: str  # torch version string as published, e.g. "2.10.0.dev20250801+cu128"
    cuda: str  # cuda tag ("cu130", "cpu") or "" when unknown (preinstalled)
    python: str  # "3.12"; "" when not known before probing (a preinstalled torch)
    url: str | None = None  # wheel URL or local path; None for preinstalled
    sha256: str | None = None
    date: str | None = None  # nightly date YYYY-MM-DD
    probe: str = defaults.PROBE
    cases: tuple[str, ...] = ()  # empty: the probe's default set
    trials: int | None = None
    timeout: float = defaults.TIMEOUT  # per cell, seconds
    env: tuple[tuple[str, str], ...] = ()
    base_image: str | None = None  # docker backend: the image for this cell's CUDA tag
    overlay: bool = False  # install torch --no-deps over an environment that has CUDA libraries
    index_url: str | None = None  # where nightly dependencies (pytorch-triton) come from
    # A preinstalled cell: the interpreter whose torch it tests, by name or path; None: the
    # default one (the interpreter running torchbisect; `python3` in an image).
    interpreter: str | None = None
    # The index had yanked this file (PEP 592): its reason, "" when none was given; None when it
    # was not.  pip installs a yanked file for an `==` pin, with a warning: it is probed, and said.
    yanked: str | None = None

    @property
    def key(self) -> tuple[str, str]:
        """(id, probe): what a run is of.  One build probed by two probes (two regressions) is
        two runs, which never stand in for each other: the plan, the store, the logs and the
        progress keep them apart by this key."""
        return self.id, self.probe

    @property
    def run_name(self) -> str:
        """The key as one word, for log files and progress lines: the id for the default probe
        (and for a --script run, whose id carries its script), else `<id>.<probe>`."""
        if self.probe == defaults.PROBE or ":" in self.probe:
            return self.id
        return f"{self.id}.{self.probe}"

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["channel"] = self.channel.value
        data["cases"] = list(self.cases)
        data["env"] = dict(self.env)
        if self.yanked is None:
            del data["yanked"]  # a build that was not yanked reads as it did before the field
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Cell:
        values = dict(data)
        values["channel"] = Channel(values["channel"])
        values["cases"] = tuple(values.get("cases") or ())
        values["env"] = tuple(sorted((values.get("env") or {}).items()))
        if "interpreter" not in values and values["channel"] is Channel.PREINSTALLED:
            # Written before Cell had `interpreter`: `python` carried the interpreter then.
            values["python"], values["interpreter"] = split_interpreter(values.get("python"))
        return cls(**values)


def split_interpreter(text: str | None) -> tuple[str, str | None]:
    """(python, interpreter) of what matrix.yaml's `preinstalled.interpreter` says: a name or
    a path is an interpreter; nothing or a bare version ("3.12", "3.12.4", "3.13t") means the
    default interpreter, and the version is kept as the cell's Python."""
    text = text or ""
    return (text, None) if re.fullmatch(r"[\d.]*t?", text) else ("", text)


@dataclass(frozen=True, kw_only=True)
class MissingBuild:
    """A requested build the index does not have (reported, not fatal for nightlies)."""

    channel: Channel
    what: str  # a date or a version
    reason: str


@dataclass(frozen=True, kw_only=True)
class Plan:
    cells: tuple[Cell, ...]
    missing: tuple[MissingBuild, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "cells": [c.to_json() for c in self.cells],
            "missing": [
                {"channel": m.channel.value, "what": m.what, "reason": m.reason}
                for m in self.missing
            ],
        }


_FAILURES = (Verdict.ERROR, Verdict.CRASHED, Verdict.TIMEOUT)  # in roll-up precedence order


def roll_up(
    cases: Mapping[str, Mapping[str, Any]], controls: Mapping[str, Verdict]
) -> Verdict | None:
    """A run's verdict from its document's cases, by the rule of probes/README.md ("Roll-up"),
    the one place torchbisect computes it: a document's own `verdict` is not believed
    (probe/document.py stores a disagreeing one with this verdict and a note).  `controls`: the
    probe's control cases and the verdict each must show (its CONTROLS); one the document does
    not run is not judged.  None when the document has no cases to roll up."""
    if not cases:
        return None
    verdicts = [Verdict(c["verdict"]) for c in cases.values()]
    if all(v is Verdict.SKIPPED for v in verdicts):
        return Verdict.SKIPPED
    if all(c.get("torch_import_failed") for c in cases.values()):
        return Verdict.ERROR  # the run could not start: no control misbehaved
    if Verdict.INCONCLUSIVE in verdicts or not all(
        _behaved(want, cases[name]) for name, want in controls.items() if name in cases
    ):
        return Verdict.INCONCLUSIVE
    measured = {Verdict(c["verdict"]) for name, c in cases.items() if name not in controls}
    for verdict in (Verdict.AFFECTED, *_FAILURES, Verdict.REFUSED, Verdict.NOT_AFFECTED):
        if verdict in measured:
            return verdict
    return Verdict.NOT_APPLICABLE


def _behaved(want: Verdict, case: Mapping[str, Any]) -> bool:
    """A control showed what it must; the positive one is stale on every trial it ran."""
    if case.get("verdict") != want.value:
        return False
    return want is not Verdict.AFFECTED or case.get("stale_trials") == case.get("trials")


@dataclass(frozen=True, kw_only=True)
class CaseResult:
    name: str
    verdict: Verdict
    detail: str = ""
    seconds: float = 0.0
    stale_trials: int | None = None
    trials: int | None = None

    @property
    def flaky(self) -> bool:
        """Stale on some trials but not all: a race, reported with its rate."""
        return bool(self.trials) and 0 < (self.stale_trials or 0) < (self.trials or 0)

    @property
    def stale_fraction(self) -> float | None:
        if not self.trials or self.stale_trials is None:
            return None
        return self.stale_trials / self.trials


@dataclass(frozen=True, kw_only=True)
class ProbeResult:
    """The probe's JSON document, parsed."""

    verdict: Verdict
    cases: tuple[CaseResult, ...]
    env: dict[str, Any] = field(default_factory=dict)
    probe: str = defaults.PROBE
    probe_version: str = ""
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_json(cls, data: dict[str, Any] | str) -> ProbeResult:
        doc = json.loads(data) if isinstance(data, str) else data
        if doc.get("schema") != PROBE_SCHEMA:
            raise ValueError(f"unsupported probe schema {doc.get('schema')!r}")
        cases = tuple(
            CaseResult(
                name=name,
                verdict=Verdict(c["verdict"]),
                detail=str(c.get("detail", "")),
                seconds=float(c.get("seconds", 0.0)),
                stale_trials=c.get("stale_trials"),
                trials=c.get("trials"),
            )
            for name, c in doc.get("cases", {}).items()
        )
        return cls(
            verdict=Verdict(doc["verdict"]),
            cases=cases,
            env=dict(doc.get("env", {})),
            probe=str(doc.get("probe", defaults.PROBE)),
            probe_version=str(doc.get("probe_version", "")),
            raw=doc,
        )

    def case(self, name: str) -> CaseResult | None:
        return next((c for c in self.cases if c.name == name), None)


@dataclass(frozen=True, kw_only=True)
class CellRun:
    """One stored run of one cell: a verdict, or an infrastructure failure with its reason."""

    cell: Cell
    status: RunStatus
    result: ProbeResult | None = None  # set when status is OK
    reason: str = ""  # set when status is INFRA_FAILURE
    wheel_sha256: str = ""
    probe_version: str = ""
    gpu: str = ""  # "NVIDIA H200" or "none"
    driver: str = ""
    backend: str = ""
    started: str = ""  # ISO 8601 UTC
    seconds_install: float = 0.0
    seconds_probe: float = 0.0
    log_excerpt: str = ""
    run_id: int | None = None

    @property
    def verdict(self) -> Verdict | None:
        return self.result.verdict if self.result else None

    @property
    def gpu_model(self) -> str:
        """The GPU model this run's verdict belongs to (`NO_GPU` when it ran on none): results of
        different models are never merged, on the page nor in the notification."""
        gpu = self.gpu or (self.result.env.get("gpu", "") if self.result else "")
        return gpu if isinstance(gpu, str) and gpu and gpu != "none" else NO_GPU


@dataclass(frozen=True, kw_only=True)
class Attendance:
    """One shard of one runner kind reporting in one scheduled run (`matrix --kind`), stored so the
    page can say which declared kinds reported and which did not (runners offline, a shard that
    died before it stored anything)."""

    kind: str  # the name runners.yaml gives the kind: "H200"
    shard: str  # "1/2"; "1/1" for a run without --shard
    run: str  # "<GITHUB_RUN_ID>-<GITHUB_RUN_ATTEMPT>", or "local-<started>" outside Actions
    gpu: str  # the GPU names the shard saw, ", "-joined; "" when it saw none
    host: str
    started: str  # ISO 8601 UTC
    finished: str
    cells: int  # cells in the shard
    probed: int  # cells probed in this run
    reused: int  # cells answered by a stored run
    failed: int  # cells without a verdict (install failures, crashes, timeouts, not reached)

    @classmethod
    def roll_call(cls, run: str, at: str, host: str) -> Attendance:
        """The build's record that scheduled run `run` was merged (kind and shard empty): the
        page then knows which run is the latest even when no shard of any kind reported in it."""
        return cls(
            kind="",
            shard="",
            run=run,
            gpu="",
            host=host,
            started=at,
            finished=at,
            cells=0,
            probed=0,
            reused=0,
            failed=0,
        )

    @property
    def is_roll_call(self) -> bool:
        return not self.kind and not self.shard

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Attendance:
        names = {f.name: f.type for f in fields(cls)}
        if set(doc) != set(names):
            raise ValueError(f"attendance keys {sorted(doc)} are not {sorted(names)}")
        for name, value in doc.items():
            wanted = int if names[name] == "int" else str
            if type(value) is not wanted:
                raise ValueError(f"attendance {name} is not {wanted.__name__}: {value!r}")
        return cls(**doc)
