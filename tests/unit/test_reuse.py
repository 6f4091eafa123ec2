"""The reuse rule as a table: which stored run answers for which asked cell (`reuse.covers`),
and the store's one lookup (what the matrix and the bisection ask) following it over real SQLite.

A URL match counts for a nightly only: its dated file name names one build, while a re-spun
release candidate keeps its file name and so is probed again when its sha256 is not known."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest
from helpers import ScriptedBackend, make_cell, make_run, probe_doc

from torchbisect.bisect.candidates import build_candidates
from torchbisect.bisect.driver import Bisector
from torchbisect.bisect.verdicts import Rule
from torchbisect.model import Cell, Channel, RunStatus
from torchbisect.outcome import Direction
from torchbisect.probe.scripts import probe_version
from torchbisect.store.db import Store
from torchbisect.store.reuse import covers

KEY = dict(probe_version="1+abc", gpu="NVIDIA H200", driver="580.159.04")
FULL = make_cell("nightly-20261001-cu130-cp312", channel=Channel.NIGHTLY)  # the default cases
ONE = dataclasses.replace(FULL, cases=("capture_data_ptr",))


def asked(cell=ONE, **kw):
    return dataclasses.replace(cell, **kw)


@pytest.mark.parametrize(
    ("stored", "wanted", "sha", "answer"),
    [
        (make_run(FULL), asked(), FULL.sha256, True),  # a full run covers one case
        (make_run(ONE), asked(FULL), FULL.sha256, False),  # one case does not cover the default set
        (make_run(ONE), asked(), FULL.sha256, True),
        (
            make_run(FULL),
            asked(cases=("raw_pointer_triton",)),
            FULL.sha256,
            False,
        ),  # not in the run
        (make_run(FULL), asked(), "0" * 64, False),  # other bytes
        (make_run(FULL), asked(), None, True),  # sha unknown before install: the same URL
        (make_run(FULL), asked(url="/wheels/other.whl"), None, False),
        (make_run(FULL), asked(channel=Channel.TEST), None, False),  # an rc's name is not its bytes
        (make_run(FULL), asked(channel=Channel.STABLE), None, False),
        (make_run(FULL), asked(channel=Channel.DEV), None, False),
        (make_run(FULL), asked(url=None), None, False),  # no sha256, no URL: nothing names it
        (make_run(FULL), asked(trials=5), FULL.sha256, False),
        (make_run(FULL), asked(timeout=60.0), FULL.sha256, False),  # a shorter limit is asked again
        # a longer limit cannot change a verdict that finished (the matrix's 120 s, a bisection's
        # 900 s); a case that ran out of time under the shorter one is asked again
        (make_run(asked(FULL, timeout=120.0)), asked(timeout=900.0), FULL.sha256, True),
        (make_run(asked(FULL, timeout=120.0)), asked(FULL, timeout=900.0), FULL.sha256, True),
        (
            make_run(asked(FULL, timeout=120.0), verdict="timeout"),
            asked(timeout=900.0),
            FULL.sha256,
            False,
        ),
        (
            make_run(asked(FULL, timeout=120.0), verdict="timeout"),
            asked(FULL, timeout=900.0),
            FULL.sha256,
            False,
        ),
        (
            make_run(asked(FULL, timeout=120.0), verdict="timeout"),
            asked(FULL, timeout=120.0),
            FULL.sha256,
            True,
        ),  # the same limit: the same answer
        (make_run(FULL), asked(env=(("TORCH_LOGS", "+dynamo"),)), FULL.sha256, False),
        (make_run(FULL), asked(probe="script:be87e4feef96"), FULL.sha256, False),
        (make_run(FULL, status=RunStatus.INFRA_FAILURE), asked(), FULL.sha256, False),
        (make_run(FULL, gpu="NVIDIA A100"), asked(), FULL.sha256, False),
        (make_run(FULL, driver="575.57.08"), asked(), FULL.sha256, False),
        (make_run(FULL, probe_version="2+def"), asked(), FULL.sha256, False),
    ],
)
def test_which_stored_run_answers(stored, wanted, sha, answer):
    assert covers(stored, wanted, wheel_sha256=sha, **KEY) is answer


def test_the_store_lookup_follows_the_same_rule(tmp_path):
    with Store(tmp_path / "s.sqlite") as store:
        store.add(make_run(FULL))
        assert store.find_ok(ONE, wheel_sha256=FULL.sha256, **KEY).cell.id == FULL.id
        assert store.find_ok(asked(trials=5), wheel_sha256=FULL.sha256, **KEY) is None
    with Store(tmp_path / "t.sqlite") as store:
        store.add(make_run(ONE))
        assert store.find_ok(FULL, wheel_sha256=FULL.sha256, **KEY) is None


def test_the_store_lookup_finds_a_nightly_by_its_url_and_nothing_else_by_it(tmp_path):
    """Both ways: a nightly asked without a sha256 gets the run of its URL (whatever id it was
    stored under); a release candidate at the same URL, or a nightly whose sha256 is known and
    differs, is probed again."""
    other_id = dataclasses.replace(FULL, id="nightly-20261001-2.17.0-cu130-cp312")
    with Store(tmp_path / "s.sqlite") as store:
        store.add(make_run(other_id))
        assert store.find_ok(ONE, wheel_sha256=None, **KEY).cell.id == other_id.id
        assert store.find_ok(asked(channel=Channel.TEST), wheel_sha256=None, **KEY) is None
        assert store.find_ok(ONE, wheel_sha256="0" * 64, **KEY) is None


def test_a_cells_own_run_answers_before_a_newer_one_of_another_cell_of_the_same_build(tmp_path):
    """Two entries naming one wheel: each cell's own run answers it, so a rerun with nothing to
    probe stores no copy of the other cell's run under its id (it added one row per shared wheel,
    with the other cell's start time)."""
    twin = dataclasses.replace(FULL, id="dev-b")
    with Store(tmp_path / "s.sqlite") as store:
        store.add(make_run(FULL, started="2026-11-29T10:00:00.000001+00:00"))
        store.add(make_run(twin, started="2026-11-29T10:00:00.000002+00:00"))
        assert store.find_ok(FULL, wheel_sha256=FULL.sha256, **KEY).cell.id == FULL.id
        assert store.find_ok(twin, wheel_sha256=FULL.sha256, **KEY).cell.id == twin.id
        third = dataclasses.replace(FULL, id="dev-c")  # none of its own: the newest answers
        assert store.find_ok(third, wheel_sha256=FULL.sha256, **KEY).cell.id == twin.id


def test_the_bisection_asks_the_same_lookup(store, tmp_path, fake_probes):
    """A nightly the matrix probed under another id (a version-bump date's long id, say) answers
    for the bisection's candidate of the same URL: the bisection installs and probes only the
    others."""
    days = ("2025-08-01", "2025-08-02", "2025-08-03")
    wheels = [
        SimpleNamespace(
            nightly_date=d,
            version=f"2.10.0.dev{d.replace('-', '')}+cpu",
            url=f"http://x/{d}.whl",
            sha256=None,
        )
        for d in days
    ]
    template = Cell(
        id="",
        channel=Channel.NIGHTLY,
        version="",
        cuda="cpu",
        python="3.11",
        cases=("capture_data_ptr",),
    )
    listed = build_candidates(
        wheels,
        older=days[0],
        newer=days[-1],
        older_flag="--good",
        newer_flag="--bad",
        cell_template=template,
    )
    middle = listed.candidates[1].cell
    store.add(
        make_run(
            dataclasses.replace(middle, id="nightly-20250802-2.10.0-cpu-cp311"),
            verdict="not_affected",
            gpu="none",
            driver="",
            probe_version=probe_version(middle.probe),
        )
    )

    def decide(cell):
        verdict = "affected" if cell.date == days[-1] else "not_affected"
        return probe_doc(verdict, cases={"capture_data_ptr": verdict})

    backend = ScriptedBackend(answer=decide)
    Bisector(
        backend=backend,
        store=store,
        rule=Rule(),
        direction=Direction.REGRESSION,
        logs=tmp_path / "logs",
    ).search(listed)
    assert [c.date for c in backend.probed] == [days[0], days[-1]]
