"""matrix.yaml: the pydantic model of which builds to test, and the one loader that validates it.

Every mistake in the file ends in ONE ConfigError sentence that names the file, the line, the key
and what was expected (the YAML node tree supplies the line of each key pydantic complains about).
The JSON Schema that editors use (matrix.schema.json) is generated from the same models
(schema.py); each value's type and check are in fields.py; how a pydantic error
becomes that sentence lives in sentences.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from .. import defaults as builtin  # not `defaults`: matrix.yaml has a key of that name
from ..errors import ConfigError
from ..probe.scripts import default_probe, is_exit_status, probe_info
from .fields import (
    MAX_DAYS,
    ConcreteTag,
    CudaTag,
    Day,
    Days,
    EnvName,
    EnvValue,
    Flag,
    HttpsUrl,
    ImageKey,
    ImageRef,
    IndexRef,
    Name,
    ProbeNames,
    Python,
    Seconds,
    Sha256,
    Trials,
    WheelRef,
    as_list,
    expected,
    preinstalled_entry,
    stable_versions,
    test_versions,
)
from .sentences import parse_yaml, read_config, sentence

DEFAULT_CUDA_TAGS = (
    "cu118",
    "cu121",
    "cu124",
    "cu126",
    "cu128",
    "cu129",
    "cu130",
    "cu132",
    "cu134",
)
# `last: N` windows count steps from this Monday, so the same dates come back day after day
# (stored results are reused) instead of shifting with every run.
STEP_EPOCH = date(2000, 1, 3)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ProbeOptions(_Strict):
    """How a probe runs: set in `defaults`, per entry, or per probe under `probes:`."""

    cases: list[Name] | None = Field(None, description="Cases to run; empty: the probe's own.")
    trials: Trials | None = Field(None, description="Repetitions of timing-dependent cases.")
    timeout: Seconds | None = Field(None, description="Seconds per cell before it is stopped.")
    env: dict[EnvName, EnvValue] = Field(
        default_factory=dict, description="Extra environment variables for the probe."
    )


class _ProbeChoice(_Strict):
    probe: ProbeNames | None = Field(
        None,
        description=(
            "Probe script in probes/ (without .py), or a list of them: which probes run on these "
            "builds (default: every probe under `probes:`, else stale_replay)."
        ),
    )


class RunOptions(ProbeOptions, _ProbeChoice):  # in this order, `probe` is the first key
    """How a cell is probed; set in `defaults` and overridden per entry."""


class Options(RunOptions):
    cuda: CudaTag | None = Field(
        None,
        description=(
            "cu126 … cu134, cpu, or auto: per release, the newest tag it was built for that the "
            "runner's driver supports."
        ),
    )
    python: Python | None = Field(None, description='Python version, quoted: "3.12", "3.13t".')
    overlay: Flag | None = Field(
        None,
        description=("Install torch --no-deps over an image that already has the CUDA libraries."),
    )


class StableEntry(Options):
    versions: Annotated[str | list[str], BeforeValidator(stable_versions)] = Field(
        description="A list of versions, or 'all from 2.3' (optionally 'all from 2.3 to 2.15').",
        examples=["all from 2.3", ["2.11.0", "2.15.0"]],
    )


class TestEntry(Options):
    __test__ = False  # not a pytest class

    versions: Annotated[str | list[str], BeforeValidator(test_versions)] = Field(
        "current",
        description="'current': release candidates newer than the newest stable "
        "release; or a list of versions.",
    )


class NightlyEntry(Options):
    dates: list[Day] | None = Field(None, description="Explicit dates, YYYY-MM-DD.")
    start: Day | None = Field(None, alias="from", description="First date of a range.")
    end: Day | None = Field(None, alias="to", description="Last date of a range (default today).")
    last: Days | None = Field(None, description="The last N days, ending today.")
    step: Days | None = Field(
        None,
        description=(
            "Take every step-th day of the range (from `from`), or of `last` (counted on a fixed "
            "calendar, so the same dates come back every day)."
        ),
    )

    @field_validator("end")
    @classmethod
    def _after_start(cls, end: date | None, info: ValidationInfo) -> date | None:
        start = info.data.get("start")
        if end and start and end < start:
            raise expected(f"a date on or after `from` ({start})", end.isoformat())
        return end

    @model_validator(mode="after")
    def _one_kind(self) -> NightlyEntry:
        given = [
            k
            for k, v in (("dates", self.dates), ("from", self.start), ("last", self.last))
            if v is not None
        ]
        if len(given) != 1:
            raise PydanticCustomError(
                "expected",
                "expected exactly one of `dates`, `from` or "
                "`last` to say which nightlies, got {got}",
                {"got": " and ".join(f"`{g}`" for g in given) or "none"},
            )
        if self.end is not None and self.start is None:
            raise PydanticCustomError("expected", "`to` needs a `from`")
        span = ((self.end or date.today()) - self.start).days if self.start else 0
        if span > MAX_DAYS:
            raise PydanticCustomError(
                "expected",
                "expected a range of at most {most} days from `from`, got {got}",
                {"most": f"{MAX_DAYS:,}", "got": f"{span:,}"},
            )
        if self.step is not None and self.dates is not None:
            raise PydanticCustomError(
                "expected", "`step` applies to `from` or `last`, not to a list of `dates`"
            )
        return self

    def days(self, today: date) -> list[date]:
        """The requested dates, oldest first."""
        if self.dates is not None:
            return sorted(set(self.dates))
        step = self.step or 1
        if self.start is not None:
            end = self.end or today
            return [
                self.start + timedelta(days=i) for i in range(0, (end - self.start).days + 1, step)
            ]
        last = self.last
        assert last is not None  # _one_kind: one of `dates`, `from` and `last` is given
        first = today - timedelta(days=last - 1)
        return [
            first + timedelta(days=i)
            for i in range(last)
            if (first + timedelta(days=i) - STEP_EPOCH).days % step == 0
        ]


class DevEntry(Options):
    wheel: WheelRef = Field(description="Local path (relative to matrix.yaml) or https:// URL.")
    sha256: Sha256 | None = Field(None, description="Expected sha256; computed when absent.")
    name: Name | None = Field(
        None, description="Cell id becomes dev-<name>; default from the wheel's version."
    )
    index: IndexRef | None = Field(
        None,
        description=("Index for its dependencies (e.g. the nightly index for pytorch-triton)."),
    )

    @property
    def filename(self) -> str:
        return self.wheel.rsplit("/", 1)[-1].replace("%2B", "+")

    @property
    def cell_name(self) -> str:
        """`name`, or the wheel's version with characters unsafe in an id replaced."""
        if self.name:
            return self.name
        return re.sub(r"[^A-Za-z0-9_.-]", "-", self.filename.split("-")[1])


class Preinstalled(RunOptions):
    interpreter: str | None = Field(
        None,
        description=(
            "Python whose torch to test; default: the image's python3 or the running interpreter."
        ),
    )
    image: ImageRef | None = Field(
        None,
        description=("Docker backend: the image whose torch to test, e.g. an NGC PyTorch image."),
    )


class Indexes(_Strict):
    """Index URL overrides per channel (mirrors, air-gapped runners); {cuda} is the tag."""

    stable: IndexRef | None = Field(None, examples=["https://mirror.example/whl/{cuda}/"])
    test: IndexRef | None = None
    nightly: IndexRef | None = None


class References(_Strict):
    """Where the page and affected.json point a reader (the report reads only this key)."""

    upstream: HttpsUrl | None = Field(
        None,
        description=("The upstream bug report (default: a search of pytorch/pytorch's issues)."),
    )
    page: HttpsUrl | None = Field(
        None, description=("Where the page is published, for affected.json's references.")
    )
    repository: HttpsUrl | None = Field(
        None,
        description=(
            "The torchbisect repository the page links as where the tool lives (default: the "
            "workflow's repository under Actions, else the checkout's origin)."
        ),
    )


StableList = Annotated[list[StableEntry], BeforeValidator(as_list)]
TestList = Annotated[list[TestEntry], BeforeValidator(as_list)]
NightlyList = Annotated[list[NightlyEntry], BeforeValidator(as_list)]
DevList = Annotated[list[DevEntry], BeforeValidator(as_list)]


class MatrixConfig(_Strict):
    """The whole of matrix.yaml."""

    defaults: Options = Field(default_factory=Options, description="Settings every entry inherits.")
    cuda_tags: list[ConcreteTag] = Field(
        list(DEFAULT_CUDA_TAGS), description=("The CUDA tags `cuda: auto` chooses among.")
    )
    images: dict[ImageKey, ImageRef] = Field(
        default_factory=dict,
        description=("Container base image per CUDA tag; `default` for the others."),
    )
    indexes: Indexes = Field(default_factory=Indexes)
    allow_links_to: list[Annotated[str, StringConstraints(min_length=1)]] = Field(
        default_factory=list,
        description=(
            "Hosts (or `file`) a remote index may link wheels to although they are private, "
            "link-local or loopback addresses; by default such links are ignored."
        ),
    )
    stable: StableList = Field(default_factory=list, description="Releases.")
    test: TestList = Field(default_factory=list, description="Release candidates.")
    nightly: NightlyList = Field(default_factory=list, description="Nightly builds.")
    dev: DevList = Field(default_factory=list, description="Wheels you built.")
    preinstalled: Annotated[Preinstalled | None, BeforeValidator(preinstalled_entry)] = Field(
        None, description="The torch already installed in the image or interpreter."
    )
    references: References = Field(default_factory=References)
    probes: dict[Name, ProbeOptions | None] = Field(
        default_factory=dict,
        description=(
            "The probes every entry runs (each build is probed by each), with each one's own "
            "cases, trials, timeout and env; an entry's `probe:` picks among them. Without it, "
            "`probe:` names the probe (default stale_replay)."
        ),
    )

    def settings(self, entry: RunOptions) -> Settings:
        """The entry's options, with `defaults` (then built-in defaults) filling the gaps; one
        `ProbeSettings` per probe it runs, whose own settings (`probes:`) come first."""

        def pick(name: str, fallback: Any, *first: ProbeOptions | None) -> Any:
            for source in (*first, entry, self.defaults):
                value = getattr(source, name, None)
                if value is not None:
                    return value
            return fallback

        def run(name: str) -> ProbeSettings:
            own = self.probes.get(name)
            env = {**self.defaults.env, **entry.env, **(own.env if own else {})}
            # a plain git-bisect-run script has one case and no trials: another probe's `cases`
            # and `trials` in `defaults` must not make its runs differ from a bisection's
            plain = is_exit_status(name)
            return ProbeSettings(
                probe=name,
                cases=() if plain else tuple(pick("cases", (), own)),
                trials=None if plain else pick("trials", None, own),
                timeout=pick("timeout", builtin.TIMEOUT, own),
                env=tuple(sorted(env.items())),
            )

        return Settings(
            cuda=pick("cuda", "auto"),
            python=pick("python", None),
            probes=tuple(run(name) for name in self.probe_names(entry)),
            overlay=pick("overlay", False),
        )

    def probe_names(self, entry: RunOptions) -> list[str]:
        """The probes an entry runs: its `probe:` (or `defaults`'), else every one of `probes:`,
        else the built-in default (the shipped stale_replay, whatever the probes folders hold
        beside it: a user's probe runs where matrix.yaml names it)."""
        named = entry.probe if entry.probe is not None else self.defaults.probe
        if named is not None:
            return list(dict.fromkeys(named))
        return list(self.probes) or [default_probe()]

    def named_probes(self) -> list[str]:
        """Every probe the entries run, `probes:` first, in the file's order; empty when the file
        names none (every build is then probed by the built-in default).  A page is drawn for
        each, runs or not: a matrix whose `defaults: probe: mine` probed nothing yet draws
        `mine`'s empty page, not the shipped probe's."""
        if not self.names_a_probe():
            return []
        named = [*self.probes]
        for loc, entry in _entries(self):
            if loc != ("defaults",):  # `defaults` reaches the page through the entries it fills
                named += self.probe_names(entry)
        return list(dict.fromkeys(named))

    def image(self, cuda: str) -> str | None:
        return self.images.get(cuda) or self.images.get("default")

    def names_a_probe(self) -> bool:
        """Whether the file names any probe (`probes:`, or a `probe:` anywhere); if not, every
        build is probed by the built-in default."""
        return bool(self.probes) or any(e.probe is not None for _, e in _entries(self))


@dataclass(frozen=True, kw_only=True)
class ProbeSettings:
    """How one probe runs on one entry's builds: a cell's probe fields."""

    probe: str
    cases: tuple[str, ...]
    trials: int | None
    timeout: float
    env: tuple[tuple[str, str], ...]


@dataclass(frozen=True, kw_only=True)
class Settings:
    """One entry's effective options: its builds', and each of its probes'."""

    cuda: str
    python: str | None  # None: the runner's Python
    probes: tuple[ProbeSettings, ...]  # at least one: every build is probed by each
    overlay: bool


def load_matrix(path: Path) -> MatrixConfig:
    """Read and validate matrix.yaml; any problem raises ConfigError with one sentence."""
    path = Path(path)
    text = read_config(path, what="a matrix", flag="--matrix")
    root, data = parse_yaml(
        path,
        text,
        empty="expected at least one of `stable`, `test`, `nightly`, `dev` or `preinstalled`",
    )
    try:
        config = MatrixConfig.model_validate(data, context={"base": path.parent})
    except ValidationError as err:
        raise ConfigError(sentence(path, root, err.errors(), MatrixConfig)) from None
    problems = _semantic_problems(config)
    if problems:
        raise ConfigError(sentence(path, root, problems, MatrixConfig))
    return config


def _semantic_problems(config: MatrixConfig) -> list[dict[str, Any]]:
    """Rules across entries, in pydantic's error shape so they are reported the same way."""
    problems: list[dict[str, Any]] = []
    if not (config.stable or config.test or config.nightly or config.dev or config.preinstalled):
        problems.append(
            {
                "type": "expected",
                "loc": (),
                "msg": (
                    "nothing to test; add at least one of `stable`, `test`, `nightly`, `dev` or "
                    "`preinstalled`"
                ),
            }
        )
    problems += _probe_problems(config)
    names: dict[str, int] = {}
    for i, entry in enumerate(config.dev):
        name = entry.cell_name
        if name in names:
            problems.append(
                {
                    "type": "expected",
                    "loc": ("dev", i, "name" if entry.name else "wheel"),
                    "msg": f"another dev wheel is already named {name!r}; give this "
                    "one a different `name`",
                }
            )
        names[name] = i
    return problems


def _probe_problems(config: MatrixConfig) -> list[dict[str, Any]]:
    """Each probe the file names is in the probes folder and reads (probe/info.py), and, with
    `probes:`, each `probe:` picks among them: said at the line that names it."""
    problems: list[dict[str, Any]] = []
    for name in config.probes:
        if why := _unreadable(name):
            problems.append({"type": "expected", "loc": ("probes", name), "msg": why})
    for loc, entry in _entries(config):
        named = entry.probe
        if named is None:
            continue
        if not named:
            problems.append(
                {
                    "type": "expected",
                    "loc": (*loc, "probe"),
                    "msg": ("expected a probe's name or a list of them, got an empty list"),
                }
            )
        for name in named:
            if config.probes and name not in config.probes:
                listed = ", ".join(config.probes)
                why = (
                    f"probe {name!r} is not among `probes:` ({listed}); list it there "
                    f"(`{name}: {{}}` runs it with the defaults) or pick one of those"
                )
                problems.append({"type": "expected", "loc": (*loc, "probe"), "msg": why})
            elif why := _unreadable(name):
                problems.append({"type": "expected", "loc": (*loc, "probe"), "msg": why})
    return problems + _case_problems(config)


def _case_problems(config: MatrixConfig) -> list[dict[str, Any]]:
    """Each name under a `cases:` is a case (or control) the probe it reaches declares: a typo
    would have the probe exit 128 on every cell, read as an infrastructure failure.  Said at the
    name, under `probes:`, the entry or `defaults`, wherever the cases a probe runs come from."""
    problems: dict[tuple[str | int, ...], dict[str, Any]] = {}
    for loc, entry in _entries(config):
        if loc == ("defaults",):
            continue  # `defaults` alone runs nothing: its cases are checked where they reach
        names = config.probe_names(entry)
        plain = [n for n in names if not _unreadable(n) and is_exit_status(n)]
        for name in plain:  # one case of its own, decided alone: its own cases or trials do nothing
            _ignored(problems, ("probes", name), config.probes.get(name), name)
        if plain and len(plain) == len(names):  # the entry runs such scripts alone
            _ignored(problems, loc, entry, plain[0])
        for name in names:
            if _unreadable(name) or is_exit_status(name):
                continue  # said above; or already, at its name
            own = config.probes.get(name)
            where, given = next(
                (
                    (at, source.cases)
                    for at, source in (
                        (("probes", name), own),
                        (loc, entry),
                        (("defaults",), config.defaults),
                    )
                    if source is not None and source.cases is not None
                ),
                ((), None),
            )
            known = probe_info(name).declared_cases
            for i, case in enumerate(given or ()):
                if known and case not in known:
                    problems.setdefault(
                        (*where, "cases", i),
                        {
                            "type": "expected",
                            "loc": (*where, "cases", i),
                            "msg": f"{case!r} is not a case of the probe {name}; choose from "
                            f"{', '.join(known)}",
                        },
                    )
    return list(problems.values())


def _ignored(
    problems: dict[tuple[str | int, ...], dict[str, Any]],
    where: tuple[str | int, ...],
    source: ProbeOptions | None,
    name: str,
) -> None:
    """`cases:` or `trials:` set where only an exit-status script reads them: it would run as if
    they were not there, the page saying nothing of it."""
    for key in ("cases", "trials"):
        if source is not None and getattr(source, key) is not None:
            problems.setdefault(
                (*where, key),
                {
                    "type": "expected",
                    "loc": (*where, key),
                    "msg": f"the probe {name} is an exit-status script: its one case is "
                    f"{name} and its exit status decides, so `{key}` would do nothing; remove it",
                },
            )


def _entries(config: MatrixConfig) -> list[tuple[tuple[str | int, ...], RunOptions]]:
    found: list[tuple[tuple[str | int, ...], RunOptions]] = [(("defaults",), config.defaults)]
    for channel in ("stable", "test", "nightly", "dev"):
        found += [((channel, i), e) for i, e in enumerate(getattr(config, channel))]
    if config.preinstalled is not None:
        found.append((("preinstalled",), config.preinstalled))
    return found


def _unreadable(name: str) -> str:
    """Why the probe `name` cannot run, or ""."""
    try:
        probe_info(name)
    except ConfigError as err:
        return str(err)
    return ""
