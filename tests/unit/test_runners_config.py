"""runners.yaml: the declared kinds of GPU runner come back as written, every mistake is one
sentence with its line, and the shipped file and schema agree."""

from __future__ import annotations

import dataclasses
import json
import textwrap
from pathlib import Path

import pytest
import yaml

from torchbisect.config import sentences
from torchbisect.config.runners import load_runners, runners_schema
from torchbisect.config.schema import runners_schema_text
from torchbisect.errors import ConfigError

TWO_KINDS = """\
kinds:
  - name: H200
    gpu: NVIDIA  H200
    labels: [self-hosted, linux, x64, h200]
    platform: linux_x86_64
    driver: "580.159.04"
    shards: 2
  - name: GB300
    gpu: NVIDIA GB300
    labels: [self-hosted, linux, ARM64, gb300]
    platform: linux_aarch64
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "runners.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def refused(tmp_path: Path, text: str) -> str:
    with pytest.raises(ConfigError) as caught:
        load_runners(write(tmp_path, text))
    return str(caught.value)


def test_two_kinds_come_back_with_their_platforms_and_lines(tmp_path):
    runners = load_runners(write(tmp_path, TWO_KINDS))
    h200, gb300 = runners.kinds
    assert (h200.name, h200.platform, h200.driver, h200.shards, h200.line) == (
        "H200",
        "linux_x86_64",
        "580.159.04",
        2,
        2,
    )
    assert h200.labels == ("self-hosted", "linux", "x64", "h200")
    assert (gb300.platform, gb300.driver, gb300.shards, gb300.line) == ("linux_aarch64", None, 1, 8)
    assert runners.kind("GB300") is gb300
    assert h200.matches("NVIDIA H200") and h200.matches("NVIDIA   H200 NVL")
    assert not h200.matches("NVIDIA H100 80GB HBM3")
    # whole words: the H20 is another GPU than the H200, though its name begins the same
    h20 = dataclasses.replace(h200, gpu="NVIDIA H20")
    assert not h20.matches("NVIDIA H200") and h20.matches("NVIDIA H20")
    assert runners.kind_of_gpu("NVIDIA GB300") is gb300
    assert runners.kind_of_gpu("NVIDIA A100-SXM4-80GB") is None


def test_an_unknown_kind_names_the_declared_ones(tmp_path):
    runners = load_runners(write(tmp_path, TWO_KINDS))
    with pytest.raises(
        ConfigError,
        match=r"declares no kind named 'H100'; it declares H200, "
        r"GB300",
    ):
        runners.kind("H100")


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (
            TWO_KINDS.replace("linux_aarch64", "aarch64"),
            "line 11, key `kinds[1].platform`: expected linux_x86_64 or linux_aarch64, got "
            "'aarch64'",
        ),
        (
            TWO_KINDS.replace("[self-hosted, linux, ARM64, gb300]", "gb300"),
            "line 10, key `kinds[1].labels`: expected a list of runner labels",
        ),
        (
            TWO_KINDS.replace("shards: 2", "shards: 0"),
            "line 7, key `kinds[0].shards`: expected a whole number of runners, 1 or more, got 0",
        ),
        (
            TWO_KINDS.replace("    gpu: NVIDIA GB300\n", ""),
            "line 8, key `kinds[1]`: missing the required key `gpu`",
        ),
        (
            TWO_KINDS.replace('driver: "580.159.04"', "driver: 580.x"),
            "line 6, key `kinds[0].driver`: expected a driver version",
        ),
        (
            TWO_KINDS.replace("name: GB300", "name: H200"),
            "line 8, key `kinds[1].name`: kind 'H200' is declared twice",
        ),
        (
            TWO_KINDS.replace("[self-hosted, linux, ARM64, gb300]", "[self-hosted, linux]"),
            "line 10, key `kinds[1].labels`: a runner of kind 'H200' or of this one would also "
            "carry "
            "every label of the other",
        ),
        (
            TWO_KINDS.replace("    shards: 2\n", "    shards: 2\n    shard: 3\n"),
            "line 8, key `kinds[0].shard`",
        ),
        ("", "the file is empty; expected `kinds:`, a list of runner kinds"),
        ("kinds: []\n", "line 1, key `kinds`"),
    ],
)
def test_each_mistake_is_one_sentence_with_its_line(tmp_path, text, said):
    message = refused(tmp_path, text)
    assert said in message, message
    assert "\n" not in message and str(tmp_path / "runners.yaml") in message


def test_a_missing_file_names_the_flag(tmp_path):
    with pytest.raises(ConfigError, match="does not exist: pass --runners PATH"):
        load_runners(tmp_path / "runners.yaml")


def test_a_numeric_driver_is_a_major_version(tmp_path):
    (kind, _) = load_runners(write(tmp_path, TWO_KINDS.replace('"580.159.04"', "580"))).kinds
    assert kind.driver == "580"


def test_the_shipped_file_loads_and_its_schema_is_current(repo):
    runners = load_runners(repo / "runners.yaml")
    assert runners.kinds and all(k.labels[0] == "self-hosted" for k in runners.kinds)
    assert (repo / "runners.schema.json").read_text() == runners_schema_text()
    first = (repo / "runners.yaml").read_text().splitlines()[0]
    assert first == "# yaml-language-server: $schema=./runners.schema.json"


def test_the_schema_agrees_with_the_loader(repo, tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft202012Validator(runners_schema())

    def errors(text: str) -> list[str]:
        doc = yaml.load(text, Loader=sentences.Loader)
        return [e.message for e in validator.iter_errors(doc)]

    assert errors((repo / "runners.yaml").read_text()) == []
    assert errors(TWO_KINDS) == []
    assert errors(TWO_KINDS.replace("linux_aarch64", "aarch64"))
    assert errors(TWO_KINDS.replace("shards: 2", "shard: 2"))
    assert json.loads(runners_schema_text())["title"] == "torchbisect runners.yaml"
