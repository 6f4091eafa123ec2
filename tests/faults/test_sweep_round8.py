"""Round 8's review, as a maintainer bringing their own `git bisect run` script meets the tool:
each of these was accepted and then did something else than asked.

- `matrix --cells ""` (an unset variable) ran every cell of the matrix; `--skip ""` skipped none.
- `bisect --probe SCRIPT --case X` (an exit-status script, whose one case is its own name)
  installed and probed the ends, then exited 10 ("the --good end could not be judged");
  `--trials` and `--min-affected` with such a script printed a rule that does not apply.
- `--repeat` had no upper bound (a run that never ends), `bisect --trials` none either.
- matrix.yaml's `cases:` or `trials:` for an exit-status script were ignored without a word.
"""

from __future__ import annotations

import os

import pytest
from helpers.cli import invoke, one_sentence

from torchbisect.exits import Exit

ENDS = ("--good", "2.5.0", "--bad", "2.6.0")


@pytest.mark.parametrize("flag", ["--cells", "--skip"])
@pytest.mark.parametrize("value", ["", ",", " , "])
def test_a_cells_or_skip_pattern_that_names_nothing_is_refused(tmp_path, flag, value):
    done = invoke("matrix", f"{flag}={value}", "--allow-no-gpu", cwd=tmp_path)
    line = one_sentence(done.stderr, done.returncode, Exit.MISTAKE)
    assert f"argument {flag}: names no pattern ({value!r}: an unset variable?)" in line, line
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (
            ["--case", "nope"],
            "--case nope: the probe cumsum_64bit is an exit-status script, whose one case is "
            "cumsum_64bit; drop --case",
        ),
        (
            ["--trials", "5"],
            "--trials and --min-affected are for a document probe's racy cases; the probe "
            "cumsum_64bit is an exit-status script and decides alone: to ask it several times, "
            "run it as --script 'python ",
        ),
        (["--min-affected", "1"], "the probe cumsum_64bit is an exit-status script"),
    ],
)
def test_a_flag_an_exit_status_probe_does_not_read_is_refused_before_any_work(
    tmp_path, flags, said
):
    done = invoke("bisect", *ENDS, "--probe", "cumsum_64bit", *flags, cwd=tmp_path)
    line = one_sentence(done.stderr, done.returncode, Exit.MISTAKE, command="bisect")
    assert said in line, line
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (
            ["--script", "true", "--repeat", "99999999999999999999999"],
            "--repeat 99999999999999999999999: at most 1,000",
        ),
        (["--trials", "1000001"], "--trials must be between 1 and 1,000,000"),
    ],
)
def test_a_repeat_or_trials_past_any_run_that_ends_is_refused(tmp_path, flags, said):
    done = invoke("bisect", *ENDS, *flags, cwd=tmp_path)
    line = one_sentence(done.stderr, done.returncode, Exit.MISTAKE, command="bisect")
    assert said in line, line


@pytest.mark.parametrize(
    ("text", "where", "key"),
    [
        (
            "probes:\n  cumsum_64bit: {cases: [nope]}\nstable:\n  - versions: ['2.5.0']\n",
            "line 2, key `probes.cumsum_64bit.cases`",
            "cases",
        ),
        (
            "probes:\n  cumsum_64bit:\n    trials: 5\nstable:\n  - versions: ['2.5.0']\n",
            "line 3, key `probes.cumsum_64bit.trials`",
            "trials",
        ),
        (
            "defaults:\n  probe: cumsum_64bit\nstable:\n  - versions: ['2.5.0']\n    trials: 3\n",
            "line 5, key `stable[0].trials`",
            "trials",
        ),
    ],
)
def test_cases_or_trials_only_an_exit_status_script_would_read_are_said_at_their_line(
    tmp_path, text, where, key
):
    (tmp_path / "matrix.yaml").write_text(text)
    done = invoke("plan", "--offline", cwd=tmp_path)
    line = one_sentence(done.stderr, done.returncode, Exit.MISTAKE, command="plan")
    assert (
        f"matrix.yaml, {where}: the probe cumsum_64bit is an exit-status script: its one case is "
        f"cumsum_64bit and its exit status decides, so `{key}` would do nothing; remove it"
    ) in line, line


@pytest.mark.parametrize("order", ["store first", "edited first"])
def test_a_merge_input_whose_run_differs_from_the_same_run_stored_is_refused_whole(tmp_path, order):
    """The same run (cell, wheel, probe file, GPU, driver, start) with another verdict was
    dropped without a word, the result depending on the order of the inputs."""
    from dataclasses import replace

    from helpers import make_run

    from torchbisect.store.db import Store

    run = make_run(verdict="affected")
    with Store(tmp_path / "a.sqlite") as a:
        a.add(run)
    edited = make_run(verdict="not_affected")
    assert replace(edited, result=run.result) == run  # the same key, another document
    with Store(tmp_path / "b.sqlite") as b:
        b.add(edited)
    inputs = ["a.sqlite", "b.sqlite"] if order == "store first" else ["b.sqlite", "a.sqlite"]
    done = invoke("merge", "out.sqlite", *inputs, cwd=tmp_path)
    line = one_sentence(done.stderr, done.returncode, Exit.MISTAKE, command="merge")
    assert f"{inputs[1]}: holds 1 run also stored here with other content" in line, line
    assert "nothing was merged" in line, line
    assert not (tmp_path / "out.sqlite").exists()


@pytest.mark.parametrize("kind", ["folder", "fifo"])
def test_a_probe_name_that_is_a_folder_or_a_fifo_is_said_so_not_missing(tmp_path, kind):
    (tmp_path / "matrix.yaml").write_text("stable:\n  - versions: ['2.5.0']\n")
    (tmp_path / "probes").mkdir()
    odd = tmp_path / "probes" / "x.py"
    odd.mkdir() if kind == "folder" else os.mkfifo(odd)
    done = invoke("probe", "--probe", "x", cwd=tmp_path)
    line = one_sentence(done.stderr, done.returncode, Exit.MISTAKE, command="probe")
    assert f"probe 'x': {odd} is not a regular file (a folder, a FIFO or a device)" in line, line
