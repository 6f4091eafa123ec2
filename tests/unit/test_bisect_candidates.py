"""Candidate nightlies between --good and --bad: end parsing, widening, one nightly per date."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from torchbisect.bisect.candidates import build_candidates, parse_end
from torchbisect.cells import nightly as cell_id
from torchbisect.errors import ConfigError
from torchbisect.model import Cell, Channel

TEMPLATE = Cell(
    id="",
    channel=Channel.NIGHTLY,
    version="",
    cuda="cu130",
    python="3.12",
    cases=("capture_data_ptr",),
    trials=3,
)


def wheel(day: str, version: str | None = None):
    stamp = day.replace("-", "")
    version = version or f"2.10.0.dev{stamp}+cu130"
    return SimpleNamespace(
        nightly_date=day,
        version=version,
        sha256=None,
        url=f"https://example.invalid/torch-{version}.whl",
    )


def days(*numbers: int) -> list:
    return [wheel(f"2025-08-{n:02d}") for n in numbers]


def build(wheels, older, newer):
    return build_candidates(
        wheels,
        older=older,
        newer=newer,
        older_flag="--good",
        newer_flag="--bad",
        cell_template=TEMPLATE,
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2025-08-01", "2025-08-01"),
        ("20250801", "2025-08-01"),
        ("2.10.0.dev20250801", "2025-08-01"),
        ("2.10.0.dev20250801+cu128", "2025-08-01"),
    ],
)
def test_parse_end(text, expected):
    assert parse_end(text, "--good") == expected


@pytest.mark.parametrize("text", ["2.9.0", "yesterday-ish", "2025-13-01", "2025-02-30"])
def test_parse_end_rejects_with_the_flag_named(text):
    with pytest.raises(ConfigError, match="--bad"):
        parse_end(text, "--bad")


def test_relative_dates_for_the_scheduled_workflow():
    assert parse_end("today", "--good") > parse_end("3 days ago", "--bad")


def test_candidates_in_date_order_with_cells_and_missing_dates():
    got = build(days(5, 1, 2, 4, 7, 9), "2025-08-02", "2025-08-07")
    assert [c.date for c in got.candidates] == [
        "2025-08-02",
        "2025-08-04",
        "2025-08-05",
        "2025-08-07",
    ]
    assert got.missing == ("2025-08-03", "2025-08-06")
    cell = got.candidates[0].cell
    assert cell.id == "nightly-20250802-cu130-cp312" == cell_id("2025-08-02", "cu130", "3.12")
    assert (cell.version, cell.date, cell.trials) == ("2.10.0.dev20250802+cu130", "2025-08-02", 3)
    assert not got.notes


def test_script_runs_get_their_own_cell_id():
    assert (
        cell_id("2025-08-02", "cu130", "3.12", probe="script:be87e4feef96")
        == "nightly-20250802-cu130-cp312-script-be87e4feef96"
    )
    assert (
        cell_id("2025-08-02", "cu130", "3.12", probe="stale_replay")
        == "nightly-20250802-cu130-cp312"
    )


def test_missing_ends_widen_outward_and_say_so():
    got = build(days(1, 2, 4, 7, 9), "2025-08-03", "2025-08-08")
    assert (got.candidates[0].date, got.candidates[-1].date) == ("2025-08-02", "2025-08-09")
    assert got.notes == (
        "no nightly on 2025-08-03 (--good): using the nearest one, 2025-08-02",
        "no nightly on 2025-08-08 (--bad): using the nearest one, 2025-08-09",
    )


def test_an_end_past_the_index_widens_inward():
    got = build(days(4, 5, 6), "2025-07-01", "2025-08-30")
    assert [c.date for c in got.candidates] == ["2025-08-04", "2025-08-05", "2025-08-06"]
    assert len(got.notes) == 2


def test_version_bump_keeps_the_newer_nightly_of_a_date():
    wheels = [
        *days(1, 2),
        wheel("2025-08-03", "2.10.0.dev20250803+cu130"),
        wheel("2025-08-03", "2.11.0.dev20250803+cu130"),
        *days(4),
    ]
    got = build(wheels, "2025-08-01", "2025-08-04")
    assert got.candidates[2].version == "2.11.0.dev20250803+cu130"
    assert "2025-08-03 has two nightlies" in got.notes[0]
    # the matrix's id of that build: the date's two builds are told apart by their version
    assert got.candidates[2].cell.id == "nightly-20250803-2.11.0-cu130-cp312"
    assert got.candidates[1].cell.id == "nightly-20250802-cu130-cp312"


@pytest.mark.parametrize(
    ("wheels", "older", "newer", "match"),
    [
        (days(1, 2, 3), "2025-08-03", "2025-08-01", "must be older than --bad"),
        ([], "2025-08-01", "2025-08-03", "lists no nightly"),
        (days(4), "2025-08-01", "2025-08-09", "fewer than two"),
    ],
)
def test_unusable_ranges_are_one_sentence(wheels, older, newer, match):
    with pytest.raises(ConfigError, match=match):
        build(wheels, older, newer)
