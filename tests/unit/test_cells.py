"""Cell ids: every shape is built in one place and reads back into the parts it was built from."""

from __future__ import annotations

import fnmatch
from datetime import date

import pytest
from hypothesis import given
from hypothesis import strategies as st

from torchbisect import cells
from torchbisect.model import Channel


@pytest.mark.parametrize(
    ("built", "channel", "key", "version", "cuda", "python", "variant"),
    [
        (
            cells.release(Channel.STABLE, "2.15.0", "cu132", "3.12"),
            Channel.STABLE,
            "2.15.0",
            "",
            "cu132",
            "cp312",
            "",
        ),
        (
            cells.release(Channel.TEST, "2.16.0", "cu130", "3.13t"),
            Channel.TEST,
            "2.16.0",
            "",
            "cu130",
            "cp313t",
            "",
        ),
        (
            cells.nightly("2026-10-01", "cu130", "3.12"),
            Channel.NIGHTLY,
            "20261001",
            "",
            "cu130",
            "cp312",
            "",
        ),
        (
            cells.nightly("20261001", "cu130", "3.12", bump_version="2.17.0"),
            Channel.NIGHTLY,
            "20261001",
            "2.17.0",
            "cu130",
            "cp312",
            "",
        ),
        (
            cells.nightly("2026-10-01", "cu130", "3.12", probe="script:be87e4feef96"),
            Channel.NIGHTLY,
            "20261001",
            "",
            "cu130",
            "cp312",
            "script-be87e4feef96",
        ),
        (
            cells.release(Channel.STABLE, "2.12.0", "cu130", "3.12", probe="script:be87e4feef96"),
            Channel.STABLE,
            "2.12.0",
            "",
            "cu130",
            "cp312",
            "script-be87e4feef96",
        ),
        (cells.dev("my-fix"), Channel.DEV, "my-fix", "", "", "", ""),
        (cells.preinstalled(), Channel.PREINSTALLED, "", "", "", "", ""),
        (
            cells.preinstalled("2.11.0a0+git70d99e9", "3.12.3"),
            Channel.PREINSTALLED,
            "2.11.0a0-git70d99e9-cp312",
            "",
            "",
            "",
            "",
        ),
    ],
)
def test_ids_read_back_into_their_parts(built, channel, key, version, cuda, python, variant):
    parsed = cells.parse(built)
    assert (
        parsed.channel,
        parsed.key,
        parsed.version,
        parsed.cuda,
        parsed.python,
        parsed.variant,
    ) == (channel, key, version, cuda, python, variant)


def test_the_shapes_users_see():
    assert cells.nightly("2026-10-01", "cu130", "3.12") == "nightly-20261001-cu130-cp312"
    assert (
        cells.nightly("2026-10-01", "cu130", "3.12", bump_version="2.17.0")
        == "nightly-20261001-2.17.0-cu130-cp312"
    )
    assert cells.release(Channel.STABLE, "2.15.0", "cu132", "3.12") == "stable-2.15.0-cu132-cp312"
    assert cells.preinstalled() == "preinstalled"


def test_the_two_builds_of_a_bump_date_share_a_lane_with_their_neighbours():
    plain = cells.parse(cells.nightly("2026-10-02", "cu130", "3.12"))
    bumped = cells.parse(cells.nightly("2026-10-01", "cu130", "3.12", bump_version="2.18.0"))
    assert plain.lane == bumped.lane == ("nightly", "cu130", "cp312", "")


@pytest.mark.parametrize(
    "text",
    [
        "",
        "nightly",
        "stable-2.15.0",
        "dev",
        "dev-",
        "weekly-1-cu1-cp3",
        "nightly-20261001-cu130-cp312-extra",
    ],
)
def test_text_that_is_no_cell_id_is_refused(text):
    with pytest.raises(ValueError, match="is not a cell id"):
        cells.parse(text)


@given(
    day=st.dates(date(2000, 1, 1), date(2099, 12, 31)),
    cuda=st.sampled_from(["cpu", "cu118", "cu130", "cu132", "rocm6.4"]),
    python=st.sampled_from(["3.9", "3.12", "3.13t", "3.12.3"]),
    bump=st.sampled_from(["", "2.17.0", "2.18.0"]),
    script=st.sampled_from(["", "script:be87e4feef96"]),
)
def test_every_nightly_id_reads_back(day, cuda, python, bump, script):
    built = cells.nightly(day.isoformat(), cuda, python, bump_version=bump, probe=script)
    parsed = cells.parse(built)
    assert (parsed.channel, parsed.key, parsed.version, parsed.cuda) == (
        Channel.NIGHTLY,
        day.strftime("%Y%m%d"),
        bump,
        cuda,
    )
    assert parsed.python == "cp" + "".join(python.split(".")[:2])
    assert parsed.variant == script.replace(":", "-")


@pytest.mark.parametrize(
    ("patterns", "shape", "meets"),
    [
        (["stable-2.15*"], "stable-*-*-cp312", True),
        (["stable-2.15*"], "test-*-*-cp312", False),
        (["stable-2.15*"], "nightly-20261001-*", False),
        (["nightly-202610*"], "nightly-20261001-*", True),
        (["nightly-202610*"], "nightly-20260901-*", False),
        (["*-cu130-*"], "stable-2.15.0-cu126-cp312", False),
        (["*-cu130-*"], "stable-*-*-cp312", True),
        (["[sn]*"], "test-*", False),
        (["[!t]*", "dev-a"], "test-*", False),
        (["stable-2.1?.0-*"], "stable-2.15.0-*-cp312", True),
        ([], "anything", True),  # no --cells: every entry is planned
    ],
)
def test_a_selection_meets_the_shape_of_an_entrys_ids(patterns, shape, meets):
    assert cells.may_match(patterns, shape) is meets


def _masked(text: str, draw_mask) -> str:
    """`text` with some characters turned into "?" and some runs into "*": it still matches."""
    out, i = "", 0
    for start, length, kind in sorted(draw_mask):
        if start < i or start >= len(text):
            continue
        out += text[i:start] + ("*" if kind else "?" * min(length, len(text) - start))
        i = start + (length if kind else min(length, len(text) - start))
    return out + text[i:]


mask = st.lists(st.tuples(st.integers(0, 30), st.integers(0, 5), st.booleans()), max_size=4)


@given(text=st.text("ab-.12", max_size=20), one=mask, other=mask)
def test_two_globs_that_match_one_id_always_meet(text, one, other):
    """Never an index too few: whenever one id matches both the pattern and the shape, planning
    keeps the entry."""
    pattern, shape = _masked(text, one), _masked(text, other)
    assert fnmatch.fnmatchcase(text, pattern) and fnmatch.fnmatchcase(text, shape)
    assert cells.may_match([pattern], shape)
