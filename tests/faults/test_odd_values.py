"""Round 3, item 3: every odd value in configuration or on the command line is one sentence.

YAML complex keys, control bytes, invisible characters (a zero-width space in a runner label
would queue its jobs forever), names too long for a file name, dates out of any range, and
special files (FIFOs, devices, /proc) given as inputs or outputs: each ends in one sentence that
names the file and line or the flag, exit status 2, never a traceback or a hang.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from helpers.cli import call, torchbisect

from torchbisect.exits import Exit

RUNNERS = (
    "kinds:\n  - name: {name}\n    gpu: NVIDIA H200\n    labels: [self-hosted, {label}]\n"
    '    platform: linux_x86_64\n    driver: "580.95.05"\n'
)
MATRIX = "defaults:\n  cuda: {value}\nnightly:\n  last: 3\n"


@pytest.fixture
def cli(tmp_path, monkeypatch, capsys):
    """The command line in the test's folder, run in this process (its entry point, as the
    console script calls it); what could block (a FIFO) runs as a child with a timeout."""
    monkeypatch.chdir(tmp_path)

    def run(*args: str) -> subprocess.CompletedProcess:
        capsys.readouterr()
        code = call(*args)
        out = capsys.readouterr()
        return subprocess.CompletedProcess(args, code, out.out, out.err)

    run.folder = tmp_path
    return run


def _child(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return torchbisect(*args, cwd=cwd, timeout=60)


def _one_sentence(done: subprocess.CompletedProcess, *said: str) -> None:
    assert done.returncode == Exit.MISTAKE, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr and "itself failed" not in lines[0]
    for text in said:
        assert text in lines[0], lines[0]


def _plan_matrix(cli, text: str) -> subprocess.CompletedProcess:
    (cli.folder / "matrix.yaml").write_text(text, encoding="utf-8")
    return cli("plan", "--matrix", "matrix.yaml", "--offline")


def _plan_runners(cli, text: str) -> subprocess.CompletedProcess:
    # a matrix.yaml beside it: the packaged default matrix's notice is no part of the answer
    (cli.folder / "matrix.yaml").write_text("preinstalled: true\n", encoding="utf-8")
    (cli.folder / "runners.yaml").write_text(text, encoding="utf-8")
    return cli("plan", "--runners", "runners.yaml", "--kinds-only", "--github-output", "out.txt")


COMPLEX_KEYS = {
    "a_list_as_key": "? [a, b]\n: 1\n",
    "a_mapping_as_key": "? {a: 1}\n: 1\n",
    "nested": "nightly:\n  ? [last]\n  : 3\n",
    "flow": "nightly: {[last]: 3}\n",
}


@pytest.mark.parametrize("case", sorted(COMPLEX_KEYS))
def test_a_yaml_complex_key_is_one_sentence(cli, case):
    _one_sentence(
        _plan_matrix(cli, COMPLEX_KEYS[case]), "matrix.yaml, line", "keys are plain names"
    )


# Control characters, and characters a reader cannot see, anywhere in either file.
HIDDEN = {
    "NUL": "\x00",
    "SOH": "\x01",
    "BEL": "\x07",
    "ESC": "\x1b",
    "DEL": "\x7f",
    "NEL": "\x85",
    "soft hyphen": "\u00ad",
    "zero-width space": "\u200b",
    "zero-width joiner": "\u200d",
    "right-to-left override": "\u202e",
    "word joiner": "\u2060",
    "BOM inside": "\ufeff",
    "private use": "\ue000",
}


@pytest.mark.parametrize("name", sorted(HIDDEN))
def test_a_control_or_invisible_character_is_one_sentence_with_its_line(cli, name):
    char = HIDDEN[name]
    _one_sentence(
        _plan_matrix(cli, MATRIX.format(value=f"cu1{char}30")),
        "matrix.yaml, line 2",
        f"U+{ord(char):04X}",
    )
    _one_sentence(
        _plan_runners(cli, RUNNERS.format(name="H200", label=f"h2{char}00")),
        "runners.yaml, line 4",
        f"U+{ord(char):04X}",
    )


def test_a_bom_at_the_start_and_ordinary_unicode_are_accepted(cli):
    done = _plan_runners(cli, "\ufeff# Grüße, 東京\n" + RUNNERS.format(name="H200", label="h200"))
    assert done.returncode == Exit.OK, done.stderr


@pytest.mark.parametrize("length", [65, 250, 300])
def test_a_name_too_long_for_a_file_name_is_one_sentence(cli, length):
    _one_sentence(
        _plan_runners(cli, RUNNERS.format(name="K" * length, label="h200")),
        "runners.yaml, line 2",
        "at most 64 characters",
    )
    wheel = cli.folder / "torch-2.99.0-cp311-cp311-linux_x86_64.whl"
    wheel.write_bytes(b"")
    _one_sentence(
        _plan_matrix(cli, f"dev:\n  - wheel: {wheel}\n    name: {'d' * length}\n"),
        "matrix.yaml, line 3",
        "at most 64 characters",
    )


def test_a_name_of_64_characters_is_accepted(cli):
    done = _plan_runners(cli, RUNNERS.format(name="K" * 64, label="h200"))
    assert done.returncode == Exit.OK, done.stderr


@pytest.mark.parametrize(
    "entry",
    [
        "last: 99999999",
        "last: 99999999999999999999",
        "from: 0001-01-01",
        "from: 2026-01-01\n  step: 10000000",
    ],
)
def test_a_date_range_past_any_calendar_is_one_sentence(cli, entry):
    _one_sentence(_plan_matrix(cli, f"nightly:\n  {entry}\n"), "matrix.yaml, line", "at most 3,660")


@pytest.mark.parametrize("flag", ["--good", "--bad"])
@pytest.mark.parametrize("when", ["99999999 days ago", "9999999999999999999999 days ago"])
def test_a_bisection_end_before_year_one_is_one_sentence(cli, flag, when):
    ends = {"--good": "3 days ago", "--bad": "today", flag: when}
    _one_sentence(
        cli("bisect", "--good", ends["--good"], "--bad", ends["--bad"], "--allow-no-gpu"),
        flag,
        "first day of the calendar",
    )


@pytest.fixture
def fifo(tmp_path) -> Path:
    path = tmp_path / "fifo.yaml"
    os.mkfifo(path)
    return path


@pytest.mark.slow  # over 2 s here: child processes
def test_special_files_as_inputs_are_one_sentence_and_never_block(cli, fifo):
    (cli.folder / "matrix.yaml").write_text("preinstalled: true\n", encoding="utf-8")
    _one_sentence(
        _child(cli.folder, "plan", "--matrix", str(fifo)), "is a FIFO, not a file", "--matrix"
    )
    _one_sentence(
        _child(cli.folder, "plan", "--runners", str(fifo), "--kinds-only", "--github-output", "o"),
        "is a FIFO",
        "--runners",
    )
    _one_sentence(cli("plan", "--matrix", "/dev/zero"), "is a device")
    if Path("/proc/self/environ").exists():  # NUL-separated: a "regular" file of no size
        _one_sentence(cli("plan", "--matrix", "/proc/self/environ"), "U+0000")


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="no /proc here")
@pytest.mark.parametrize(
    "args",
    [
        ["matrix", "--matrix", "m.yaml", "--allow-no-gpu", "--out", "/proc"],
        ["matrix", "--matrix", "m.yaml", "--allow-no-gpu", "--out", "/proc/x"],
        ["schema", "--out", "/proc/x.json"],
        ["schema", "--out", "/dev/null"],
    ],
)
def test_special_places_as_outputs_are_one_sentence(cli, args):
    """root passes os.access() in /proc; only a file that cannot be made tells."""
    (cli.folder / "m.yaml").write_text("nightly:\n  last: 1\n")
    _one_sentence(cli(*args), "--out")
