"""The verdict rule as a table, the flags' one-sentence errors, and the printed/Markdown result."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.cli import call

from torchbisect.bisect.verdicts import Rule
from torchbisect.exits import Exit
from torchbisect.model import Cell, CellRun, Channel, ProbeResult, RunStatus
from torchbisect.outcome import BisectResult, Direction, NightlyPoint, Outcome
from torchbisect.page.bisections import bisect_view
from torchbisect.page.headline import build_headline
from torchbisect.report.writers.bisection_text import render_markdown, render_text

CELL = Cell(
    id="nightly-20250801-cu130-cp312",
    channel=Channel.NIGHTLY,
    version="2.10.0.dev20250801+cu130",
    cuda="cu130",
    python="3.12",
)


def run_with(verdict: str | None, case_verdict: str | None = None, *, case="capture_data_ptr"):
    if verdict is None:
        return CellRun(cell=CELL, status=RunStatus.INFRA_FAILURE, reason="install: HTTP 404")
    cases = {case: {"verdict": case_verdict or verdict, "detail": "d"}} if case else {}
    doc = {"schema": 1, "verdict": verdict, "cases": cases, "env": {"git_version": "abc"}}
    return CellRun(cell=CELL, status=RunStatus.OK, result=ProbeResult.from_json(doc))


@pytest.mark.parametrize(
    ("run", "expected"),
    [
        (run_with("affected"), "bad"),
        (run_with("not_affected"), "good"),
        (run_with("refused"), "good"),  # a clear error at capture is a fix
        (run_with("affected", "not_affected"), "good"),  # only the chosen case decides
        (run_with("inconclusive", "affected"), "unknown"),  # a broken control spoils everything
        (run_with("error"), "unknown"),
        (run_with("crashed"), "unknown"),
        (run_with("timeout"), "unknown"),
        (run_with("skipped"), "unknown"),  # no CUDA device
        (run_with("not_applicable"), "unknown"),
        (run_with("affected", case=None), "unknown"),  # the case did not run
        (run_with(None), "unknown"),  # infrastructure failure
    ],
)
def test_probe_rule_table(run, expected):
    assert Rule().judge(run).verdict == expected


def test_infra_failure_reason_is_kept():
    assert Rule().judge(run_with(None)).reason == "install: HTTP 404"


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--script", "true", "--case", "side_stream"], "--script decides on its own"),
        (["--trials", "3", "--min-affected", "4"], "--min-affected must be between 1 and --trials"),
        (["--trials", "3", "--min-stale", "4"], "--min-affected must be between 1 and --trials"),
        (["--trials", "0"], "--trials must be between 1 and 1,000,000"),
        (
            ["--good", "2.9.0"],
            "--good '2.9.0' is neither a date (YYYY-MM-DD or YYYYMMDD) nor a "
            "nightly version such as 2.10.0.dev20250801; a release such as 2.12.0 is accepted when "
            "both ends are releases",
        ),
        (["--repo", "/nonexistent"], "is not a git clone"),
        # the hints fit the direction given
        (
            ["--good", "2025-08-09", "--bad", "2025-08-01"],
            "--good (2025-08-09) must be older than --bad (2025-08-01); if the bug went away "
            "between "
            "them, add --find-fix",
        ),
        (
            ["--find-fix"],
            "with --find-fix, --bad (2025-08-09) must be older than --good "
            "(2025-08-01), since a fix comes after the bug; drop --find-fix",
        ),
        (["--bad", "20250801"], "--good and --bad are the same nightly (2025-08-01)"),
        (["--find-fix", "--bad", "2025-08-01"], "--good and --bad are the same nightly"),
        (["--good", "2.12.0", "--bad", "2.12.0+cu130"], "the same release (2.12.0)"),
        (["--good", "2.15.0", "--bad", "2.12.0"], "add --find-fix to look for the release"),
        # a script that cannot run is the script's problem, said before anything is probed
        (["--script", "/nonexistent/check.sh"], "--script: /nonexistent/check.sh does not exist"),
        (["--script", "./check.sh --fast"], "--script: ./check.sh does not exist"),
        (["--script", "sh 'unclosed"], "is not a shell command (No closing quotation)"),
        (["--walk-limit", "8"], "--walk-limit is for a bisection without --good"),
    ],
)
def test_flag_errors_are_one_sentence_and_exit_2(flags, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = [
        "bisect",
        "--good",
        "2025-08-01",
        "--bad",
        "2025-08-09",
        "--index-url",
        str(tmp_path),
        "--store",
        str(tmp_path / "s.sqlite"),
        *flags,
    ]
    assert call(*argv) == Exit.MISTAKE
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--bad", "2.15.0"],
            "--bad 2.15.0 is a release: the walk to a good end steps over nightly "
            "dates; give --good too",
        ),
        (["--bad", "2025-08-01", "--walk-limit", "0"], "a whole number of days of at least 1"),
    ],
)
def test_without_good_the_walks_errors_are_one_sentence(flags, message, capsys, tmp_path):
    argv = ["bisect", "--index-url", str(tmp_path), "--store", str(tmp_path / "s.sqlite"), *flags]
    assert call(*argv) == Exit.MISTAKE
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]


def test_a_script_that_is_not_executable_is_named(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "check.sh").write_text("#!/bin/sh\nexit 0\n")  # no x bit
    argv = [
        "bisect",
        "--good",
        "2025-08-01",
        "--bad",
        "2025-08-09",
        "--index-url",
        str(tmp_path / "no-index"),
        "--store",
        str(tmp_path / "s.sqlite"),
        "--script",
        "./check.sh",
    ]
    assert call(*argv) == Exit.MISTAKE
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "torchbisect bisect: error: --script: ./check.sh is not executable: run it "
        "through its interpreter (--script 'sh ./check.sh'), or give it a `#!` line "
        "and `chmod +x ./check.sh`"
    ]
    assert not (tmp_path / "s.sqlite").exists()  # refused before any probing


def _bisect_script(tmp_path: Path, script: str) -> list[str]:
    return [
        "bisect",
        "--good",
        "2025-08-01",
        "--bad",
        "2025-08-09",
        "--index-url",
        str(tmp_path / "no-index"),
        "--store",
        str(tmp_path / "s.sqlite"),
        "--script",
        script,
    ]


def test_a_python_file_without_the_run_bit_is_advised_through_python(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "check.py").write_text("import sys\nsys.exit(0)\n")  # no x bit, no #!
    assert call(*_bisect_script(tmp_path, "./check.py")) == Exit.MISTAKE
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "(--script 'python ./check.py')" in line and "'sh ./check.py'" not in line


@pytest.mark.parametrize("name", ["check.py", "check"])
def test_an_executable_script_without_a_shebang_is_refused_before_it_runs(
    capsys, tmp_path, monkeypatch, name
):
    # chmod +x without a `#!`: /bin/sh ran the Python file, its "Syntax error" was read as bad
    # and the bisection said "pick an older --good"
    monkeypatch.chdir(tmp_path)
    script = tmp_path / name
    script.write_text(f"import sys\nopen({str(tmp_path / 'ran')!r}, 'w')\nsys.exit(1)\n")
    script.chmod(0o755)
    assert call(*_bisect_script(tmp_path, f"./{name}")) == Exit.MISTAKE
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"torchbisect bisect: error: --script: ./{name} has no `#!` line")
    interpreter = "python" if name.endswith(".py") else "sh"
    assert f"(--script '{interpreter} ./{name}')" in line
    assert not (tmp_path / "ran").exists() and not (tmp_path / "s.sqlite").exists()
    script.write_text("#!/bin/sh\nexit 0\n")  # with its `#!` it passes this check
    call(*_bisect_script(tmp_path, f"./{name}"))
    assert "has no `#!` line" not in capsys.readouterr().err


def _result(direction=Direction.REGRESSION) -> BisectResult:
    good = NightlyPoint(
        date="2025-08-13",
        version="2.10.0.dev20250813+cu130",
        verdict="good",
        git_version="a" * 40,
        main_sha="b" * 40,
    )
    bad = NightlyPoint(
        date="2025-08-15",
        version="2.10.0.dev20250815+cu130",
        verdict="bad",
        git_version="c" * 40,
        main_sha="",
        stale_fraction=0.5,
    )
    skipped = NightlyPoint(
        date="2025-08-14",
        version="2.10.0.dev20250814+cu130",
        verdict="unknown",
        reason="install: HTTP 404",
    )
    return BisectResult(
        direction=direction,
        case="side_stream",
        cuda="cu130",
        python="3.12",
        before=good,
        after=bad,
        probes=6,
        points=(good, skipped, bad),
        unknown=("2025-08-14",),
        rule="r",
        reproduce="torchbisect bisect …",
    )


def test_text_report_leads_with_the_candidates_and_names_the_pair_the_gap_and_the_counts():
    text = render_text(_result(), new_runs=4)
    assert text.splitlines()[0] == "the first bad nightly is one of 2: 2025-08-14, 2025-08-15"
    assert (
        "last good:  2025-08-13  2.10.0.dev20250813+cu130  git aaaaaaaaaaaa  main bbbbbbbbbbbb"
        in text
    )
    assert "main unknown" in text
    assert "not exact:  1 nightly between them could not be judged" in text
    assert "probes:     6 (4 run now, 2 from the store)" in text
    assert "unknown:    2025-08-14 (no verdict)" in text
    assert "compare:    unavailable (main sha unknown)" in text


def test_an_edge_between_adjacent_tested_nightlies_is_exact_whatever_dates_are_missing():
    good = NightlyPoint(date="2025-08-08", version="2.10.0.dev20250808", verdict="good")
    bad = NightlyPoint(date="2025-08-11", version="2.10.0.dev20250811", verdict="bad")
    result = BisectResult(
        direction=Direction.REGRESSION,
        case="c",
        cuda="cu130",
        python="3.12",
        before=good,
        after=bad,
        probes=4,
        points=(good, bad),
        missing=("2025-08-09", "2025-08-10"),
    )
    assert result.exact and result.candidates == ("2025-08-11",)
    text = render_text(result, new_runs=4)
    assert text.splitlines()[0] == (
        "the first bad nightly is 2025-08-11 (exact: the nightly before it, 2025-08-08, is "
        "good; no nightly was published on 2025-08-09, 2025-08-10)"
    )
    assert "not exact" not in text
    assert "missing:    2025-08-09, 2025-08-10 (no nightly that day)" in text
    assert result.to_json()["exact"] is True


def test_outcomes_are_one_enum_through_json_and_back():
    back = BisectResult.from_json(json.loads(json.dumps(_result().to_json())))
    assert [p.verdict for p in back.points] == [Outcome.GOOD, Outcome.UNKNOWN, Outcome.BAD]
    assert all(type(p.verdict) is Outcome for p in back.points)


def test_markdown_for_a_fix():
    md = render_markdown(_result(Direction.FIX))
    assert "**The first fixed nightly is one of 2: 2025-08-14, 2025-08-15**" in md
    assert md.index("one of 2") < md.index("| last bad |")  # it leads
    assert "| last bad | 2025-08-13 |" in md and "| first good | 2025-08-15 |" in md
    assert "Reproduce with: `torchbisect bisect …`" in md


def test_the_page_leads_with_the_candidates_too():
    view = bisect_view(_result())
    assert view.title == "First affected nightly for side_stream: one of 2 (2025-08-14, 2025-08-15)"
    assert ("unknown (no verdict)", "2025-08-14") in view.facts


def test_the_pages_headline_says_one_of_n_for_a_range_too():
    edge = build_headline("NVIDIA H200", [], [_result()]).first_affected
    assert not edge.exact
    assert edge.text == (
        "one of 2: 2025-08-14, 2025-08-15 (bisected on side_stream; not judged: 2025-08-14)"
    )


def test_the_fix_status_says_one_of_n_for_a_range_too():
    from torchbisect.report.notify import fix_status

    status = fix_status([], [_result(Direction.FIX)])
    assert status.text == "fix found: the first good nightly is one of 2: 2025-08-14, 2025-08-15"
    assert status.key == "fixed:2025-08-15"  # what the next weekly run compares against


def test_a_result_stored_before_exact_existed_reads_back_with_its_dates_told_apart():
    """Older results hold one `skipped` list mixing tried and never-published dates."""
    old = _result().to_json()
    for key in ("exact", "candidates", "unknown", "missing"):
        del old[key]
    old["skipped"] = ["2025-08-14", "2025-08-16"]
    back = BisectResult.from_json(old)
    assert (back.unknown, back.missing) == (("2025-08-14",), ("2025-08-16",))
    assert not back.exact and back.candidates == ("2025-08-14", "2025-08-15")


def test_json_keys_follow_the_direction():
    assert {"last_good", "first_bad", "probes", "unknown", "missing", "compare_url"} <= set(
        _result().to_json()
    )
    assert "skipped" not in _result().to_json()  # tried and never-published dates apart
    assert _result().to_json()["first_bad"]["verdict"] == "bad"
    assert {"last_bad", "first_good"} <= set(_result(Direction.FIX).to_json())


@pytest.mark.parametrize(
    ("direction", "verdicts", "said"),
    [
        (
            Direction.REGRESSION,
            {0: "good", 2: "good", 6: "bad"},
            "range found so far: last good 2025-08-03, first bad 2025-08-07; the first bad nightly "
            "is "
            "one of 4: 2025-08-04, 2025-08-05, 2025-08-06, 2025-08-07",
        ),
        (
            Direction.FIX,
            {0: "bad", 3: "unknown", 5: "good"},
            "range found so far: last bad 2025-08-01, first good 2025-08-06; the first fixed "
            "nightly is "
            "one of 5: 2025-08-02, 2025-08-03, 2025-08-04, 2025-08-05, 2025-08-06",
        ),
        (
            Direction.REGRESSION,
            {0: "good"},
            "range found so far: none (the two ends were not both judged yet)",
        ),
    ],
)
def test_the_range_found_so_far_when_a_script_stops_the_bisection(direction, verdicts, said):
    from types import SimpleNamespace

    from torchbisect.bisect.candidates import build_candidates
    from torchbisect.bisect.telling import so_far

    days = [f"2025-08-{d:02d}" for d in range(1, 9)]
    wheels = [
        SimpleNamespace(
            nightly_date=d,
            version=f"2.10.0.dev{d.replace('-', '')}",
            sha256=None,
            url=f"https://example.invalid/{d}.whl",
        )
        for d in days
    ]
    cands = build_candidates(
        wheels,
        older=days[0],
        newer=days[-1],
        older_flag="--good",
        newer_flag="--bad",
        cell_template=CELL,
    )
    points = {i: NightlyPoint(date=days[i], version="v", verdict=v) for i, v in verdicts.items()}
    assert so_far(points, cands, direction) == said


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (
            '"""A race"""\nPROBE_VERSION = "1"\nTRIAL_CASES = {"race": "often"}\n',
            "race.py:3: TRIAL_CASES must be a dict of case names to whole numbers of at least 1 "
            "literal",
        ),
        (
            '"""A race"""\nPROBE_VERSION = "1"\n',
            "--probe race: its file {folder}/race.py names no case (BISECT_CASE or CASE_LABELS), "
            "so "
            "name the case that decides with --case",
        ),
    ],
)
def test_a_probe_that_cannot_say_what_decides_is_one_sentence(source, message, tmp_path):
    """What decides a bisection is the probe's own declaration: a wrong one, or none, is one
    sentence naming the file (and line), exit 2, before anything is installed."""
    from helpers.cli import invoke, one_sentence

    folder = tmp_path / "probes"
    folder.mkdir()
    (folder / "race.py").write_text(source)
    done = invoke(
        "bisect",
        "--probe",
        "race",
        "--good",
        "2025-08-01",
        "--bad",
        "2025-08-09",
        "--index-url",
        tmp_path,
        "--store",
        tmp_path / "s.sqlite",
        cwd=tmp_path,
        env_extra={"TORCHBISECT_PROBES": str(folder)},
    )
    line = one_sentence(done.stderr, done.returncode, Exit.MISTAKE)
    assert message.format(folder=folder) in line
