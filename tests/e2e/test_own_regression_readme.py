"""The README's "Your own regression" block, as a new user follows it: the recipe of
probes/README.md saved as `probes/check.py` beside the matrix.yaml that `init` writes, then the
block's commands as written (those that need a wheel index or a GPU are checked as far as this
machine allows: what they would run is found, and the flags parse)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from helpers import REPO
from helpers.cli import torchbisect

from torchbisect.exits import Exit

pytest.importorskip("torch")  # `probe` runs the recipe on the torch of the tests' interpreter


def _block(text: str, heading: str) -> list[str]:
    section = text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"(?:^ {4}\S.*\n)+", section, re.MULTILINE)
    assert block, f"no command block under {heading!r}"
    return [re.split(r"\s{2,}#", line.strip(), maxsplit=1)[0] for line in block[0].splitlines()]


def _recipe() -> str:
    """The example script of probes/README.md's recipe, as a user copies it."""
    text = (REPO / "probes" / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Your own regression: the exit-status recipe\n", 1)[1]
    block = re.search(r"^ {7}\S.*\n(?: {7}.*\n|\n)*", section, re.MULTILINE)
    assert block
    return "\n".join(line[7:] for line in block[0].splitlines()).strip() + "\n"


@pytest.mark.slow  # a real probe run of the recipe
def test_the_readmes_own_regression_block_runs_as_written(tmp_path):
    lines = _block((REPO / "README.md").read_text(encoding="utf-8"), "Your own regression")
    assert [shlex.split(line)[:2] for line in lines] == [
        ["torchbisect", "init"],
        ["torchbisect", "probe"],
        ["torchbisect", "matrix"],
        ["torchbisect", "bisect"],
        ["torchbisect", "bisect"],
    ]
    env = {"XDG_DATA_HOME": str(tmp_path / "data"), "TORCHBISECT_PROBES": ""}

    def run(line: str):
        return torchbisect(*shlex.split(line)[1:], cwd=tmp_path, env_extra=env)

    assert run(lines[0]).returncode == Exit.OK and (tmp_path / "matrix.yaml").is_file()
    (tmp_path / "probes").mkdir()
    (tmp_path / "probes" / "check.py").write_text(_recipe())
    done = run(lines[1])  # no GPU here: the recipe says it cannot tell, and so does `probe`
    assert done.returncode == Exit.CANNOT_TELL, done.stdout + done.stderr
    assert "cannot tell: no GPU" in done.stdout
    assert "check" in done.stdout and "Traceback" not in done.stderr

    # `probe: check` under `defaults:`, as the matrix line says: the plan probes with it
    text = (tmp_path / "matrix.yaml").read_text()
    assert "\ndefaults:\n" in text
    (tmp_path / "matrix.yaml").write_text(
        text.replace("\ndefaults:\n", "\ndefaults:\n  probe: check\n", 1)
    )
    from torchbisect.config.matrix import load_matrix
    from torchbisect.probe.scripts import probe_path, project_probes

    with project_probes(tmp_path / "matrix.yaml"):
        config = load_matrix(tmp_path / "matrix.yaml")
        assert config.defaults.probe == ["check"]
        assert probe_path("check") == tmp_path / "probes" / "check.py"
    # the --script line's command is accepted as it is written (a file run through python)
    script = shlex.split(shlex.split(lines[4])[shlex.split(lines[4]).index("--script") + 1])
    assert script == ["python", "check.py"]


def test_the_recipe_is_a_standalone_exit_status_script(tmp_path):
    from torchbisect.probe.info import ProbeOutput, read_info

    path: Path = tmp_path / "check.py"
    path.write_text(_recipe())
    info = read_info(path)
    assert info.output is ProbeOutput.EXIT_STATUS
    assert info.title == "torch.linalg.solve is wrong on batched half inputs"
    compile(path.read_text(), str(path), "exec")
