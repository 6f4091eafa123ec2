"""The pure search: verdict tables, the ends check, the probe bound and a Hypothesis property."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from torchbisect.bisect.search import (
    EndsError,
    Outcome,
    SearchError,
    SearchHandler,
    first_bad,
    flip,
)
from torchbisect.exits import Exit

LETTER = {"G": Outcome.GOOD, "B": Outcome.BAD, "U": Outcome.UNKNOWN}


def table(verdicts: str):
    """A verdict function over a string such as "GGUBB" that records what was asked."""
    asked: list[int] = []

    def verdict_of(i: int) -> Outcome:
        asked.append(i)
        return LETTER[verdicts[i]]

    return verdict_of, asked


@pytest.mark.parametrize(
    ("verdicts", "last_good", "first_bad_", "between"),
    [
        ("GB", 0, 1, ()),
        ("GGB", 1, 2, ()),
        ("GBB", 0, 1, ()),
        ("GGGGGGGB", 6, 7, ()),
        ("GBBBBBBB", 0, 1, ()),
        ("GGGGBBBB", 3, 4, ()),
        ("GGGUBBBB", 2, 4, (3,)),  # the unknown hides the boundary: report a range
        ("GGGGGUBB", 4, 6, (5,)),  # an unknown right after the last good also hides it
        ("GGGGBBUB", 3, 4, ()),  # an unknown after the boundary changes nothing
        ("GUUUUUUB", 0, 7, (1, 2, 3, 4, 5, 6)),  # nothing but unknowns: the whole range
        ("GUGUBUB", 2, 4, (3,)),
        ("GGUGGGBB", 5, 6, ()),  # steps around unknowns and still pins the boundary
        ("GUUUGBUB", 4, 5, ()),
    ],
)
def test_verdict_table(verdicts, last_good, first_bad_, between):
    verdict_of, asked = table(verdicts)
    result = first_bad(len(verdicts), verdict_of)
    assert (result.last_good, result.first_bad) == (last_good, first_bad_)
    assert result.unknown_between == between
    assert result.exact == (not between)
    assert result.candidates == (*between, first_bad_)
    assert len(asked) == len(set(asked)) == result.probes  # each index asked once


# cargo-bisect-rustc's least_satisfying tests (No = GOOD, Yes = BAD): its answer is our first
# known bad; where an unknown sits just before it, we say the first bad is one of several.
@pytest.mark.parametrize(
    ("name", "verdicts", "cargo", "candidates"),
    [
        ("least_satisfying_1", "GUUGB", 4, (4,)),
        ("least_satisfying_2", "GUBUB", 2, (1, 2)),
        ("least_satisfying_3", "GGGGB", 4, (4,)),
        ("least_satisfying_4", "GGBBB", 2, (2,)),
        ("least_satisfying_5", "GBBBB", 1, (1,)),
        ("least_satisfying_6", "GBBUUBUB", 1, (1,)),
        ("least_satisfying_7", "GBUB", 1, (1,)),
    ],
)
def test_cargo_bisect_rustc_least_satisfying_tables(name, verdicts, cargo, candidates):
    verdict_of, _ = table(verdicts)
    result = first_bad(len(verdicts), verdict_of)
    assert result.first_bad == cargo, name
    assert result.candidates == candidates, name


# git's t6030-bisect-porcelain.sh as verdict tables over HASH1..HASHn (HASH1 good, HASHn bad;
# git's "skip" is UNKNOWN).  Where git says "the first bad commit could be any of" (and exits
# non-zero), the candidates are that list.
@pytest.mark.parametrize(
    ("scenario", "verdicts", "candidates"),
    [
        ("bisect skip: successful result", "GBUB", (1,)),  # skip HASH3, HASH2 bad: HASH2
        ("bisect skip: cannot tell between 3 commits", "GUUB", (1, 2, 3)),  # skip HASH2 and HASH3
        ("bisect skip: cannot tell between 2 commits", "GGUB", (2, 3)),  # skip HASH3, HASH2 good
        ("bisect run & skip: cannot tell between 2", "GGUB", (2, 3)),  # the script exits 125
        ("bisect run & skip: find first bad", "GGUGB", (4,)),  # skip HASH3, HASH4 good: HASH5
    ],
)
def test_git_bisect_skip_scenarios(scenario, verdicts, candidates):
    verdict_of, _ = table(verdicts)
    result = first_bad(len(verdicts), verdict_of)
    assert result.candidates == candidates, scenario
    assert result.exact == (len(candidates) == 1)


@pytest.mark.parametrize(
    ("verdicts", "index", "expected", "got"),
    [
        ("BB", 0, Outcome.GOOD, Outcome.BAD),
        ("UGB", 0, Outcome.GOOD, Outcome.UNKNOWN),
        ("GGG", 2, Outcome.BAD, Outcome.GOOD),
        ("GGU", 2, Outcome.BAD, Outcome.UNKNOWN),
    ],
)
def test_ends_are_checked_before_searching(verdicts, index, expected, got):
    verdict_of, asked = table(verdicts)
    with pytest.raises(EndsError) as err:
        first_bad(len(verdicts), verdict_of)
    assert (err.value.index, err.value.expected, err.value.got) == (index, expected, got)
    assert err.value.exit_code == Exit.MISTAKE
    assert asked[0] == 0  # the good end is asked first, and nothing in the middle
    assert set(asked) <= {0, len(verdicts) - 1}


@pytest.mark.parametrize("n", [0, 1])
def test_too_few_candidates(n):
    with pytest.raises(SearchError):
        first_bad(n, lambda i: Outcome.GOOD)


def test_ends_first_then_midpoint():
    verdict_of, asked = table("G" * 8 + "B" * 9)
    first_bad(17, verdict_of)
    assert asked[:3] == [0, 16, 8]


def test_find_fix_is_the_same_search_flipped():
    # affected (bad) nightlies until a fix lands at index 5
    user = "BBBBBGGGG"
    result = first_bad(len(user), lambda i: flip(LETTER[user[i]]))
    assert (result.last_good, result.first_bad) == (4, 5)
    assert flip(Outcome.UNKNOWN) is Outcome.UNKNOWN


def test_handler_hears_every_step_and_the_next_candidates():
    events = []

    class Recorder(SearchHandler):
        def probing(self, index, *, lo, hi, then):
            events.append(("probing", index, then))

        def probed(self, index, outcome, *, lo, hi):
            events.append(("probed", index, outcome.value))

        def finished(self, result):
            events.append(("finished", result.last_good, result.first_bad))

    verdict_of, _ = table("GGGGGBBBB")
    first_bad(9, verdict_of, handler=Recorder())
    assert events[0] == ("probing", 0, (8, 4))
    assert events[2] == ("probing", 8, (4,))
    # probing the midpoint 4: next is 6 if it is good, 2 if it is bad
    assert events[4] == ("probing", 4, (6, 2))
    assert events[-1] == ("finished", 4, 5)
    probed = [e for e in events if e[0] == "probing"]
    for (_, _, then), (_, nxt, _) in zip(probed, probed[1:], strict=False):
        assert nxt in then  # the prefetch hint always names the next index asked


@st.composite
def monotone_with_unknowns(draw, allow_unknowns=True):
    n = draw(st.integers(min_value=2, max_value=300))
    boundary = draw(st.integers(min_value=1, max_value=n - 1))  # index of the first bad
    truth = [Outcome.GOOD] * boundary + [Outcome.BAD] * (n - boundary)
    hidden: set[int] = set()
    if allow_unknowns and n > 2:
        hidden = draw(st.sets(st.integers(min_value=1, max_value=n - 2)))
    seen = [Outcome.UNKNOWN if i in hidden else v for i, v in enumerate(truth)]
    return seen, boundary, hidden


@given(monotone_with_unknowns())
def test_property_returns_the_true_boundary_or_the_range_that_hides_it(case):
    seen, boundary, hidden = case
    asked: list[int] = []

    def verdict_of(i):
        asked.append(i)
        return seen[i]

    result = first_bad(len(seen), verdict_of)
    known = [i for i in range(len(seen)) if i not in hidden]
    assert result.last_good == max(i for i in known if i < boundary)
    assert result.first_bad == min(i for i in known if i >= boundary)
    assert all(i in hidden for i in result.unknown_between)
    assert result.exact == (result.first_bad == boundary and result.last_good == boundary - 1)
    assert len(asked) == len(set(asked))
    # the candidates hold the true first bad, whatever the unknowns hide, and nothing the
    # verdicts rule out: every candidate is unknown but the last, which is the first known bad
    assert boundary in result.candidates
    assert list(result.candidates) == sorted(result.candidates)
    assert all(i in hidden for i in result.candidates[:-1])
    assert seen[result.candidates[-1]] is Outcome.BAD
    assert result.exact == (result.candidates == (boundary,))


@given(monotone_with_unknowns(allow_unknowns=False))
def test_property_probe_bound_without_unknowns(case):
    seen, boundary, _ = case
    result = first_bad(len(seen), lambda i: seen[i])
    assert result.exact and result.first_bad == boundary
    assert result.probes <= math.ceil(math.log2(len(seen))) + 2


@given(monotone_with_unknowns(), st.data())
def test_property_stored_verdicts_only_narrow_the_search(case, data):
    """Resuming: indexes with stored verdicts are free; the answer stays the same and the
    indexes that must really be probed still respect the bound."""
    seen, boundary, hidden = case
    cheap = data.draw(st.sets(st.integers(min_value=0, max_value=len(seen) - 1)))
    plain = first_bad(len(seen), lambda i: seen[i])
    resumed = first_bad(len(seen), lambda i: seen[i], cheap=cheap)
    assert (resumed.last_good, resumed.first_bad) == (plain.last_good, plain.first_bad)
    if not hidden:
        costly = [i for i, _ in resumed.asked if i not in cheap]
        assert len(costly) <= math.ceil(math.log2(len(seen))) + 2


def test_stored_verdicts_are_asked_first():
    verdict_of, asked = table("GGGGGGGGBBBBBBBB")
    result = first_bad(16, verdict_of, cheap={3, 11})
    assert asked[:4] == [0, 15, 3, 11]  # ends first, then what is already known
    assert (result.last_good, result.first_bad) == (7, 8)
