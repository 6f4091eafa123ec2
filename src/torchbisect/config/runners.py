"""runners.yaml: the kinds of self-hosted GPU runner the scheduled service fans out over.

Declared once and read by everything that needs them: `plan --runners` plans and locks each
kind's own platform's wheels, `matrix --kind` checks that the runner it runs on is that kind, the
workflows take each kind's label set from here, and the page says which declared kinds reported
(a kind whose runners are offline is said, not silently missing).  Mistakes end in one sentence
with the line, as for matrix.yaml.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from ..errors import ConfigError
from .fields import Name, expected
from .sentences import parse_yaml, read_config, sentence

PLATFORMS = ("linux_x86_64", "linux_aarch64")
DEFAULT = Path("runners.yaml")


def _label(value: Any) -> str:
    if not isinstance(value, str) or not value.strip() or value != value.strip():
        raise expected("a runner label such as self-hosted or h200", value)
    return value


def _labels(value: Any) -> list[str]:
    if isinstance(value, str):  # `labels: h200` would silently drop self-hosted
        raise expected("a list of runner labels such as [self-hosted, linux, x64, h200]", value)
    if not isinstance(value, list) or not value:
        raise expected("a non-empty list of runner labels", value)
    return value


def _gpu(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise expected("the GPU name nvidia-smi -L prints, such as NVIDIA H200", value)
    return " ".join(value.split())


def _driver(value: Any) -> str:
    if isinstance(value, float) or (isinstance(value, int) and not isinstance(value, bool)):
        value = str(value)  # `driver: 580` is a fine major version
    if not isinstance(value, str) or not all(p.isdigit() for p in value.split(".")):
        raise expected('a driver version such as "580.95.05" (nvidia-smi prints it)', value)
    return value


def _platform(value: Any) -> str:
    if not isinstance(value, str) or value not in PLATFORMS:
        raise expected(
            " or ".join(PLATFORMS),
            value,
            " (the wheel platform of the runners' CPU: x86_64 or aarch64)",
        )
    return value


def _shards(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise expected("a whole number of runners, 1 or more", value)
    return value


class KindEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Name = Field(description="What the page and the notification call this kind: H200.")
    gpu: Annotated[str, BeforeValidator(_gpu)] = Field(
        description=("The GPU name `nvidia-smi -L` prints on these runners, or its first words.")
    )
    labels: Annotated[list[Annotated[str, BeforeValidator(_label)]], BeforeValidator(_labels)] = (
        Field(description=("The `runs-on` label set that selects these runners."))
    )
    platform: Annotated[Literal["linux_x86_64", "linux_aarch64"], BeforeValidator(_platform)] = (
        Field(description="The wheel platform of the runners' CPU.")
    )
    driver: Annotated[str, BeforeValidator(_driver)] | None = Field(
        None, description=("The oldest driver among these runners: `cuda: auto` plans for it.")
    )
    shards: Annotated[int, BeforeValidator(_shards)] = Field(
        1, description=("How many of these runners one run fans out over.")
    )


class _RunnersFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    kinds: list[KindEntry] = Field(min_length=1, description="The kinds of GPU runner.")


@dataclass(frozen=True, kw_only=True)
class Kind:
    """One declared kind of runner (`line`: where runners.yaml declares it)."""

    name: str
    gpu: str
    labels: tuple[str, ...]
    platform: str
    driver: str | None
    shards: int
    line: int

    def matches(self, gpu_name: str) -> bool:
        """Whether a GPU that nvidia-smi names `gpu_name` is this kind's GPU: the name, or the
        name followed by more words (`NVIDIA H200` matches `NVIDIA H200 NVL`, `NVIDIA H20`
        does not match `NVIDIA H200`: another GPU)."""
        name = " ".join(gpu_name.split())
        return name == self.gpu or name.startswith(self.gpu + " ")


@dataclass(frozen=True)
class Runners:
    path: Path
    kinds: tuple[Kind, ...]

    def kind(self, name: str) -> Kind:
        for kind in self.kinds:
            if kind.name == name:
                return kind
        raise ConfigError(
            f"{self.path} declares no kind named {name!r}; it declares "
            f"{', '.join(k.name for k in self.kinds)}"
        )

    def kind_of_gpu(self, gpu_name: str) -> Kind | None:
        """The first declared kind whose GPU this is, or None (a GPU no kind declares)."""
        return next((k for k in self.kinds if k.matches(gpu_name)), None)


def runners_schema() -> dict[str, Any]:
    """JSON Schema of runners.yaml (runners.schema.json); a numeric driver is accepted too."""
    schema = _RunnersFile.model_json_schema()
    driver = schema["$defs"]["KindEntry"]["properties"]["driver"]
    driver["anyOf"].insert(0, {"type": "number"})
    schema["title"] = "torchbisect runners.yaml"
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}


def load_runners(path: Path) -> Runners:
    """Read and validate runners.yaml; any problem raises ConfigError with one sentence."""
    path = Path(path)
    text = read_config(path, what="a runners", flag="--runners")
    root, data = parse_yaml(path, text, empty="expected `kinds:`, a list of runner kinds")
    try:
        parsed = _RunnersFile.model_validate(data)
    except ValidationError as err:
        raise ConfigError(sentence(path, root, err.errors(), _RunnersFile)) from None
    problems = _duplicates(parsed)
    if problems:
        raise ConfigError(sentence(path, root, problems, _RunnersFile))
    lines = _entry_lines(root)
    return Runners(
        path,
        tuple(
            Kind(
                name=e.name,
                gpu=e.gpu,
                labels=tuple(e.labels),
                platform=e.platform,
                driver=e.driver,
                shards=e.shards,
                line=lines[i],
            )
            for i, e in enumerate(parsed.kinds)
        ),
    )


def _duplicates(parsed: _RunnersFile) -> list[dict[str, Any]]:
    """Two kinds with one name (their locks and artifacts would collide), or label sets where a
    runner of one kind also carries every label of another (it would take that kind's shards:
    GitHub gives a job to any runner that has all of its labels)."""
    problems: list[dict[str, Any]] = []
    for i, entry in enumerate(parsed.kinds):
        for other in parsed.kinds[:i]:
            if entry.name == other.name:
                problems.append(
                    {
                        "type": "expected",
                        "loc": ("kinds", i, "name"),
                        "msg": (
                            f"kind {entry.name!r} is declared twice; give each kind its own name"
                        ),
                    }
                )
            elif set(entry.labels) <= set(other.labels) or set(other.labels) <= set(entry.labels):
                problems.append(
                    {
                        "type": "expected",
                        "loc": ("kinds", i, "labels"),
                        "msg": (
                            f"a runner of kind {other.name!r} or of this one would also carry "
                            "every "
                            "label of the other and take its shards; give each kind a label of its "
                            "own, such as its GPU's name"
                        ),
                    }
                )
    return problems


def _entry_lines(root: Any) -> list[int]:
    """The line of each entry of `kinds` (1-based), for sentences about a kind later on."""
    for key, value in getattr(root, "value", ()):
        if getattr(key, "value", None) == "kinds":
            return [item.start_mark.line + 1 for item in value.value]
    return []
