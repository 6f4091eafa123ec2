"""How exact a bisection is, through the real `bisect --script` command on the stand-in nightly
index of test_bisect_e2e (HTTP, uv venvs, a stand-in pytorch clone; 08-03, -09, -10, -17 and -25
have no nightly).  Scenarios of git's t6030-bisect-porcelain.sh ("bisect run & skip"), with the
script's exit 125 as git's skip: "could be any of" becomes `candidates`, exit status 8.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from helpers.cli import torchbisect
from helpers.nightly_world import bisect_args

from torchbisect.exits import Exit

pytestmark = pytest.mark.slow

NOT_EXACT = Exit.NOT_EXACT


def script(
    first_bad: str,
    *,
    skip: tuple[str, ...] = (),
    abort_before: str = "",
    counter: Path | None = None,
) -> str:
    """Bad from `first_bad` on, exit 125 on `skip`, exit 255 on a nightly in the middle older
    than `abort_before`; each run appends a line to `counter`."""
    steps = [f'echo "$TORCHBISECT_DATE" >> {counter}'] if counter else []
    steps += [f'[ "$TORCHBISECT_DATE" = {day} ] && exit 125' for day in skip]
    if abort_before:
        steps.append(
            f'[ "$TORCHBISECT_DATE" != 2025-08-01 ] && '
            f'[ "$TORCHBISECT_DATE" \\< {abort_before} ] && exit 255'
        )
    steps.append(f'[ "$TORCHBISECT_DATE" \\< {first_bad} ] && exit 0; exit 1')
    return "; ".join(steps)


def bisect(index, tmp_path: Path, command: str, *extra: str) -> subprocess.CompletedProcess:
    base, _, url = index
    return torchbisect(
        *bisect_args(
            base,
            url,
            tmp_path,
            "--script",
            command,
            "--markdown",
            str(tmp_path / "summary.md"),
            *extra,
        ),
        cwd=tmp_path,
        timeout=600,
    )


def result_of(tmp_path: Path) -> dict:
    return json.loads((tmp_path / "bisect.json").read_text())


def test_unknowns_next_to_the_change_say_could_be_any_of(world, tmp_path):
    """git: 'bisect run & skip: cannot tell between 2 commits', with two skips here."""
    runs = tmp_path / "runs.txt"
    done = bisect(
        world, tmp_path, script("2025-08-14", skip=("2025-08-12", "2025-08-13"), counter=runs)
    )
    assert done.returncode == NOT_EXACT, done.stderr
    result = result_of(tmp_path)
    assert result["exact"] is False
    assert result["candidates"] == ["2025-08-12", "2025-08-13", "2025-08-14"]
    assert {"2025-08-12", "2025-08-13"} <= set(result["unknown"])
    assert result["missing"] == []
    assert (result["last_good"]["date"], result["first_bad"]["date"]) == (
        "2025-08-11",
        "2025-08-14",
    )
    # every run of the script is a probe, --repeat's re-asks at the pair included; the bound
    # said at the start holds only while no nightly is unknown, and says so
    assert result["probes"] == len(runs.read_text().split())
    assert (
        "at most 7 probes while none is unknown (--repeat 2: each judged now runs 2 times, "
        "the two that decide the range 1 more)" in done.stderr
    )
    lead = "the first bad nightly is one of 3: 2025-08-12, 2025-08-13, 2025-08-14"
    assert done.stdout.splitlines()[0] == lead
    summary = (tmp_path / "summary.md").read_text()
    assert f"**The{lead[3:]}**" in summary and summary.index(lead[4:]) < summary.index("|")


def test_unknown_and_missing_dates_are_told_apart(world, tmp_path):
    """The last good is 08-07; 08-08 is tried without a verdict; 08-09 and 08-10 have no
    nightly: the first bad is 08-08 or 08-11, never a date without a nightly."""
    done = bisect(world, tmp_path, script("2025-08-11", skip=("2025-08-08",)))
    assert done.returncode == NOT_EXACT, done.stderr
    result = result_of(tmp_path)
    assert result["candidates"] == ["2025-08-08", "2025-08-11"]
    assert "2025-08-08" in result["unknown"]
    assert result["missing"] == ["2025-08-09", "2025-08-10"]
    assert "unknown:    2025-08-08" in done.stdout
    assert "missing:    2025-08-09, 2025-08-10 (no nightly that day)" in done.stdout


def test_adjacent_tested_nightlies_are_exact_across_dates_without_one(world, tmp_path):
    """git: 'bisect run & skip: find first bad': a skip away from the change changes nothing."""
    done = bisect(world, tmp_path, script("2025-08-11", skip=("2025-08-20",)))
    assert done.returncode == Exit.OK, done.stderr
    result = result_of(tmp_path)
    assert result["exact"] is True and result["candidates"] == ["2025-08-11"]
    assert (result["last_good"]["date"], result["missing"]) == (
        "2025-08-08",
        ["2025-08-09", "2025-08-10"],
    )
    assert done.stdout.splitlines()[0] == (
        "the first bad nightly is 2025-08-11 (exact: the nightly before it, 2025-08-08, is "
        "good; no nightly was published on 2025-08-09, 2025-08-10)"
    )


def test_a_script_that_aborts_prints_the_range_found_so_far(world, tmp_path):
    done = bisect(world, tmp_path, script("2025-08-14", abort_before="2025-08-14"))
    assert done.returncode == Exit.ABORTED == 9  # not 1, which is "affected" and nothing else
    assert "exited with status 255 (above 127), which stops the bisection" in done.stderr
    found = re.search(
        r"range found so far: last good (\S+), first bad (\S+); the first bad "
        r"nightly is one of (\d+): (.*)",
        done.stderr,
    )
    assert found, done.stderr
    good, bad, count, days = found.groups()
    assert good < "2025-08-14" <= bad and "2025-08-14" in days.split(", ")
    assert int(count) == len(days.split(", "))
    # a gate reading --json or --markdown learns the stop, and the range, without an answer
    doc = json.loads((tmp_path / "bisect.json").read_text())
    assert doc["stopped"]["status"] == 9 and "exited with status 255" in doc["stopped"]["message"]
    assert doc["range_so_far"] == found.group(0) and "exact" not in doc
    assert {p["date"] for p in doc["points"]} >= {"2025-08-01", good, bad}
    summary = (tmp_path / "summary.md").read_text()
    assert "stopped (exit 9)" in summary and f"last good {good}, first bad {bad}" in summary


def test_a_flaky_script_writes_the_stop_and_a_range_without_the_build_that_answered_both_ways(
    world, tmp_path
):
    """Every bad nightly but the --bad end answers good on its second run: the first one the
    search asks is flaky there (exit 7), and --json holds the stop and what the other builds pin."""
    runs = tmp_path / "runs"
    runs.mkdir()
    flaky = (
        f'n=$(cat {runs}/"$TORCHBISECT_DATE" 2>/dev/null || echo 0); n=$((n + 1)); '
        f'echo $n > {runs}/"$TORCHBISECT_DATE"; '
        '[ "$TORCHBISECT_DATE" \\< 2025-08-14 ] && exit 0; '
        '[ "$TORCHBISECT_DATE" = 2025-08-31 ] && exit 1; [ $n = 2 ] && exit 0; exit 1'
    )
    done = bisect(world, tmp_path, flaky)
    assert done.returncode == Exit.FLAKY == 7, done.stderr
    said = re.search(
        r"--script is flaky: on the (\S+) nightly .* answered bad 1×, good 1× in 2 runs",
        done.stderr,
    )
    assert said, done.stderr
    doc = json.loads((tmp_path / "bisect.json").read_text())
    assert doc["stopped"]["status"] == 7 and said.group(0) in doc["stopped"]["message"]
    assert said.group(1) not in {p["date"] for p in doc["points"]}
    assert said.group(1) not in doc["range_so_far"].split(": ", 1)[1].split(";")[0]
    assert "stopped (exit 7)" in (tmp_path / "summary.md").read_text()


def test_an_end_where_the_script_hangs_is_no_verdict_with_a_status_of_its_own(world, tmp_path):
    """Not 2: the flags are right, the end just gave no answer (as an install failure would)."""
    hangs = (
        '[ "$TORCHBISECT_DATE" = 2025-08-01 ] && sleep 120; '
        '[ "$TORCHBISECT_DATE" \\< 2025-08-14 ] && exit 0; exit 1'
    )
    done = bisect(world, tmp_path, hangs, "--timeout", "5")
    assert done.returncode == Exit.END_UNJUDGED == 10, done.stderr
    error = done.stderr.strip().splitlines()[-1]
    assert error.startswith(
        "torchbisect bisect: error: the --good end, the 2025-08-01 nightly "
        "(2.10.0.dev20250801+cpu), could not be judged ("
    ), error
    assert "Traceback" not in done.stderr
    doc = json.loads((tmp_path / "bisect.json").read_text())
    assert doc["stopped"] == {"status": 10, "message": error.split("error: ", 1)[1]}
    assert doc["range_so_far"].startswith("range found so far: none")
    [end] = [p for p in doc["points"] if p["date"] == "2025-08-01"]
    assert end["verdict"] == "unknown" and end["reason"].startswith("timeout: ")


def test_a_script_the_shell_cannot_find_is_named_as_the_scripts_problem(world, tmp_path):
    done = bisect(world, tmp_path, "torchbisect-no-such-command --check")
    assert done.returncode == Exit.MISTAKE
    error = done.stderr.strip().splitlines()[-1]
    assert error == (
        "torchbisect bisect: error: --script `torchbisect-no-such-command --check` "
        "could not be run on the 2025-08-01 nightly (2.10.0.dev20250801+cpu) "
        "(exit 127: the shell did not find it); check the command, its path and "
        "its permissions"
    )


def test_a_fix_hidden_by_an_unknown_says_the_first_fixed_is_one_of(world, tmp_path):
    fixed = (
        '[ "$TORCHBISECT_DATE" = 2025-08-21 ] && exit 125; '
        '[ "$TORCHBISECT_DATE" \\< 2025-08-22 ] && exit 1; exit 0'
    )
    # --good 08-01 --bad 08-31 as given for the regression: the hint fits --find-fix
    done = bisect(world, tmp_path, fixed, "--find-fix")
    assert done.returncode == Exit.MISTAKE
    assert (
        "with --find-fix, --bad (2025-08-31) must be older than --good (2025-08-01)" in done.stderr
        and "drop --find-fix" in done.stderr
    )
    base, _, url = world
    args = bisect_args(base, url, tmp_path, "--script", fixed, "--find-fix")
    args[args.index("--good") + 1], args[args.index("--bad") + 1] = "2025-08-31", "2025-08-01"
    done = torchbisect(*args, cwd=tmp_path, timeout=600)
    assert done.returncode == NOT_EXACT, done.stderr
    result = result_of(tmp_path)
    assert result["candidates"] == ["2025-08-21", "2025-08-22"] and result["exact"] is False
    assert (result["last_bad"]["date"], result["first_good"]["date"]) == (
        "2025-08-20",
        "2025-08-22",
    )
    assert (
        done.stdout.splitlines()[0] == "the first fixed nightly is one of 2: 2025-08-21, 2025-08-22"
    )
