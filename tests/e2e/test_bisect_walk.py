"""The walk to a missing end (`bisect --bad DATE` without --good): verdict tables, the bound,
unknowns stepped over, --find-fix forwards, and a Hypothesis property; then the real command."""

from __future__ import annotations

import json
from datetime import date, timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest
from helpers.cli import torchbisect
from helpers.nightly_world import SCRIPT, bisect_args
from hypothesis import given
from hypothesis import strategies as st

from torchbisect.bisect.candidates import build_candidates
from torchbisect.bisect.walk import distances, walk
from torchbisect.errors import ConfigError
from torchbisect.exits import Exit
from torchbisect.model import Cell, Channel
from torchbisect.outcome import Direction, NightlyPoint, Outcome

TEMPLATE = Cell(id="", channel=Channel.NIGHTLY, version="", cuda="cu130", python="3.12")
LETTER = {"G": Outcome.GOOD, "B": Outcome.BAD, "U": Outcome.UNKNOWN}
START = date(2025, 6, 1)


def listed(verdicts: str, gaps: frozenset[int] = frozenset()):
    """One nightly a day from 2025-06-01 (none on the `gaps` days); verdicts[i] is day i's."""
    days = [(START + timedelta(i)).isoformat() for i in range(len(verdicts)) if i not in gaps]
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
        cell_template=TEMPLATE,
    )
    asked: list[int] = []

    def judge(cand) -> NightlyPoint:
        i = (date.fromisoformat(cand.date) - START).days
        asked.append(i)
        return NightlyPoint(
            date=cand.date, version=cand.version, verdict=LETTER[verdicts[i]], reason="r"
        )

    return cands, judge, asked


def day(i: int) -> str:
    return (START + timedelta(i)).isoformat()


def run_walk(verdicts: str, *, direction=Direction.REGRESSION, limit=64, gaps=frozenset()):
    cands, judge, asked = listed(verdicts, gaps)
    said: list[str] = []
    walked = walk(cands, direction=direction, judge=judge, say=said.append, limit=limit)
    return walked, asked, said


def test_distances_double_up_to_the_bound():
    assert list(distances(64)) == [1, 2, 4, 8, 16, 32, 64]
    assert list(distances(10)) == [1, 2, 4, 8, 10]
    assert list(distances(1)) == [1]


@pytest.mark.parametrize(
    ("verdicts", "asked", "good", "bad"),
    [
        # 40 days, bad from day 20: 39 (the --bad end), then 1, 2, 4, 8, 16 days back
        ("G" * 20 + "B" * 20, [39, 38, 37, 35, 31, 23, 7], 7, 23),
        # an unknown where the good one would be is stepped over, never taken as good
        ("G" * 7 + "U" + "G" * 12 + "B" * 20, [39, 38, 37, 35, 31, 23, 7, 0], 0, 23),
        # the first step back is good already
        ("G" * 39 + "B", [39, 38], 38, 39),
        # an unknown right next to --bad: stepped over; the nearest bad stays --bad
        ("G" * 38 + "UB", [39, 38, 37], 37, 39),
    ],
)
def test_walks_back_doubling_until_a_nightly_is_good(verdicts, asked, good, bad):
    walked, got, said = run_walk(verdicts)
    assert got == asked
    assert (walked.good.date, walked.bad.date) == (day(good), day(bad))
    assert said[0] == (
        f"no --good: walking back from --bad {day(len(verdicts) - 1)}, 1, 2, 4, "
        "8 … days (at most 64, --walk-limit), until a nightly is good"
    )
    assert len(walked.points) == len(asked)
    rng = walked.range(listed(verdicts)[0])
    assert (rng.candidates[0].date, rng.candidates[-1].date) == (day(good), day(bad))


def test_an_unknown_furthest_in_reach_walks_back_in_to_a_good_one():
    # 32 days back is bad, 35 (the bound) unknown: the good ones between are found going back in
    walked, asked, said = run_walk("GGGGUGGB" + "B" * 32, limit=35)
    assert asked == [39, 38, 37, 35, 31, 23, 7, 4, 5]
    assert (walked.good.date, walked.bad.date) == (day(5), day(7))
    assert (
        "2025-06-05 could not be judged: stepped over (an unknown nightly is never taken as "
        "good)" in said
    )


def test_dates_without_a_nightly_take_the_next_one_out():
    # no nightly 1-3 days before --bad: the first step lands 4 days back, the next further out
    walked, asked, said = run_walk("G" * 10 + "B" * 10, gaps=frozenset({16, 17, 18}))
    assert asked == [19, 15, 11, 3]
    assert (
        "walking back: the 2025-06-16 nightly (2.10.0.dev20250616), 4 days before --bad "
        "2025-06-20" in said
    )
    assert (walked.good.date, walked.bad.date) == (day(3), day(11))


def test_find_fix_walks_forward_from_bad():
    walked, asked, _ = run_walk("B" * 12 + "G" * 28, direction=Direction.FIX)
    assert asked == [0, 1, 2, 4, 8, 16]
    assert (walked.bad.date, walked.good.date) == (day(8), day(16))


@pytest.mark.parametrize(
    ("verdicts", "limit", "asked", "message"),
    [
        (
            "B" * 40,
            10,
            [39, 38, 37, 35, 31, 29],
            "the walk found no good nightly within 10 days before --bad 2025-07-10 (tried: "
            "2025-07-09 bad, 2025-07-08 bad, 2025-07-06 bad, 2025-07-02 bad, 2025-06-30 bad); "
            "give --good, or a larger --walk-limit",
        ),
        (
            "U" * 3 + "B",
            64,
            [3, 2, 1, 0],
            "the walk found no good nightly before --bad 2025-06-04 on the index (tried: "
            "2025-06-03 unknown, 2025-06-02 unknown, 2025-06-01 unknown); give --good, or "
            "--index-url with an index that lists older nightlies",
        ),
        (
            "BG",
            64,
            [1],
            "the --bad end, the 2025-06-02 nightly (2.10.0.dev20250602), is not bad but good: a "
            "walk "
            "needs a bad nightly to start from; pick another --bad",
        ),
    ],
)
def test_no_good_nightly_found_is_one_sentence_naming_the_bound(verdicts, limit, asked, message):
    cands, judge, got = listed(verdicts)
    with pytest.raises(ConfigError) as err:
        walk(cands, direction=Direction.REGRESSION, judge=judge, say=lambda _: None, limit=limit)
    assert str(err.value) == message
    assert got == asked


@st.composite
def series(draw):
    n = draw(st.integers(min_value=3, max_value=120))
    boundary = draw(st.integers(min_value=1, max_value=n - 1))  # first bad day
    unknown = draw(st.sets(st.integers(min_value=0, max_value=n - 2)))
    gaps = draw(st.sets(st.integers(min_value=1, max_value=n - 2)))
    text = "".join("U" if i in unknown else "G" if i < boundary else "B" for i in range(n))
    return text, boundary, frozenset(gaps - {0}), draw(st.integers(min_value=1, max_value=150))


@given(series())
def test_property_the_walk_ends_on_a_true_good_and_a_true_bad_around_the_change(case):
    verdicts, boundary, gaps, limit = case
    cands, judge, asked = listed(verdicts, gaps)
    try:
        walked = walk(
            cands, direction=Direction.REGRESSION, judge=judge, say=lambda _: None, limit=limit
        )
    except ConfigError:
        # no good one was met (an unknown never counts as good), and the bound held
        last = len(verdicts) - 1
        assert all(verdicts[i] != "G" and last - i <= limit for i in asked)
        assert len(asked) <= len(list(distances(limit))) + 1 + unknowns(verdicts, asked)
        return
    good = (date.fromisoformat(walked.good.date) - START).days
    bad = (date.fromisoformat(walked.bad.date) - START).days
    assert verdicts[good] == "G" and verdicts[bad] == "B"
    assert good < boundary <= bad
    assert len(asked) == len(set(asked))
    assert len(asked) <= len(list(distances(limit))) + 1 + unknowns(verdicts, asked)


def unknowns(verdicts: str, asked: list[int]) -> int:
    """Each unknown met may cost one more step (the walk back in from the last one)."""
    return sum(verdicts[i] == "U" for i in asked)


# -- through the real command, on test_bisect_e2e's stand-in index ------------------------------


def without_good(base: Path, url: str, work: Path, *extra: str) -> list[str]:
    args = bisect_args(base, url, work, *extra)
    at = args.index("--good")
    return args[:at] + args[at + 2 :]  # no --good


@pytest.mark.slow
def test_bad_only_walks_back_then_bisects(world, tmp_path):
    base, _, url = world
    runs = tmp_path / "runs.txt"
    counted = f'echo "$TORCHBISECT_DATE" >> {runs}; {SCRIPT}'
    done = torchbisect(
        *without_good(base, url, tmp_path, "--script", counted), cwd=tmp_path, timeout=600
    )
    assert done.returncode == Exit.OK, done.stderr
    result = json.loads((tmp_path / "bisect.json").read_text())
    assert (result["last_good"]["date"], result["first_bad"]["date"]) == (
        "2025-08-13",
        "2025-08-14",
    )
    assert (
        "no --good: walking back from --bad 2025-08-31, 1, 2, 4, 8 … days (at most 64, "
        "--walk-limit), until a nightly is good" in done.stderr
    )
    # 1, 2, 4, 8 and 16 days back: 08-30, 08-29, 08-27, 08-23 bad, 08-15 bad, then 08-01
    # (32 days back is before the index's first nightly: the furthest one is taken)
    for line in (
        "the 2025-08-30 nightly (2.11.0.dev20250830+cpu), 1 days before",
        "the 2025-08-15 nightly (2.10.0.dev20250815+cpu), 16 days before",
        "the 2025-08-01 nightly (2.10.0.dev20250801+cpu), 30 days before",
    ):
        assert f"walking back: {line} --bad 2025-08-31" in done.stderr
    ran = len(runs.read_text().split())
    assert f"({ran} run now, {result['probes'] - ran} from the store)" in done.stdout
    walk_dates = {
        "2025-08-31",
        "2025-08-30",
        "2025-08-29",
        "2025-08-27",
        "2025-08-23",
        "2025-08-15",
        "2025-08-01",
    }
    assert walk_dates <= {p["date"] for p in result["points"]}


@pytest.mark.slow
def test_find_fix_with_bad_only_walks_forward(world, tmp_path):
    base, _, url = world
    fixed = SCRIPT.replace("1 if d >= '20250814' else 0", "0 if d >= '20250822' else 1")
    args = without_good(base, url, tmp_path, "--script", fixed, "--find-fix", "--walk-limit", "8")
    args[args.index("--bad") + 1] = "2025-08-15"
    done = torchbisect(*args, cwd=tmp_path, timeout=600)
    assert done.returncode == Exit.OK, done.stderr
    result = json.loads((tmp_path / "bisect.json").read_text())
    assert (result["last_bad"]["date"], result["first_good"]["date"]) == (
        "2025-08-21",
        "2025-08-22",
    )
    assert (
        "no --good: walking forward from --bad 2025-08-15, 1, 2, 4, 8 … days (at most 8, "
        "--walk-limit), until a nightly is good" in done.stderr
    )
    assert "8 days after --bad 2025-08-15" in done.stderr
