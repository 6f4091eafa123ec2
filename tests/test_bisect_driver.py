"""The driver with a fake backend and store: verdicts, resume, prefetch, flaky rule, --script."""

from __future__ import annotations

import json
import sys
import threading
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace

import pytest

from torchbisect import probes
from torchbisect.backends.base import Backend, Prepared, ProbeOutput
from torchbisect.bisect.candidates import build_candidates
from torchbisect.bisect.driver import Bisector
from torchbisect.bisect.search import EndsError
from torchbisect.bisect.verdicts import Rule, ScriptAborted
from torchbisect.errors import InfraError
from torchbisect.model import Cell, Channel, Direction, RunStatus, Verdict
from torchbisect.store import run_from_json, run_to_json

DATES = [f"2025-08-{d:02d}" for d in (1, 2, 3, 5, 6, 7, 8, 10, 11, 12, 13, 14, 15, 16, 18, 19)]


@pytest.fixture(autouse=True)
def fake_probe(tmp_path, monkeypatch):
    """A probes/ folder of our own, so these tests do not depend on the real probe's bytes."""
    folder = tmp_path / "probes"
    folder.mkdir()
    (folder / "stale_replay.py").write_text('PROBE_VERSION = "9"\n')
    monkeypatch.setenv("TORCHBISECT_PROBES", str(folder))
    probes.probe_version.cache_clear()
    yield
    probes.probe_version.cache_clear()


def cands(case="capture_data_ptr", probe="stale_replay", trials=None):
    wheels = [SimpleNamespace(nightly_date=d, version=f"2.10.0.dev{d.replace('-', '')}+cpu",
                              sha256=None, url=f"http://x/{d}.whl") for d in DATES]
    template = Cell(id="", channel=Channel.NIGHTLY, version="", cuda="cpu", python="3.11",
                    cases=(case,), probe=probe, trials=trials)
    return build_candidates(wheels, older=DATES[0], newer=DATES[-1], older_flag="--good",
                            newer_flag="--bad", cell_template=template)


def probe_doc(verdict: Verdict, day: str, case="capture_data_ptr", **extra) -> dict:
    return {"schema": 1, "verdict": verdict.value, "probe": "stale_replay",
            "cases": {case: {"verdict": verdict.value, **extra}},
            "env": {"git_version": f"g{day.replace('-', '')}", "torch_version": day}}


def affected_from(first_bad: str):
    def decide(cell):
        v = Verdict.AFFECTED if cell.date >= first_bad else Verdict.NOT_AFFECTED
        return probe_doc(v, cell.date)
    return decide


class FakeBackend(Backend):
    name = "fake"

    def __init__(self, decide, *, broken=(), stop_after=None, stub_torch=None):
        self.decide = decide
        self.stub_torch = stub_torch
        self.broken = set(broken)
        self.stop_after = stop_after
        self.prepares: list[str] = []
        self.probes: list[str] = []
        self.ready = defaultdict(threading.Event)
        self.waited: dict[str, bool] = {}
        self.wait_for: dict[str, str] = {}

    def check(self):
        pass

    def prepare(self, cell, *, log):
        self.prepares.append(cell.date)
        self.ready[cell.date].set()
        if cell.date in self.broken:
            raise InfraError("download failed: HTTP 404")
        env = {"PYTHONPATH": str(self.stub_torch)} if self.stub_torch else {}
        return Prepared(cell=cell, python=sys.executable, wheel_sha256=f"sha-{cell.date}",
                        env=env)

    def probe(self, prepared, *, gpu, probe_args, log):
        day = prepared.cell.date
        if day in self.wait_for:  # is the next candidate being installed while we probe?
            self.waited[day] = self.ready[self.wait_for[day]].wait(5)
        if self.stop_after is not None and len(self.probes) >= self.stop_after:
            raise KeyboardInterrupt  # stands in for the process being killed
        self.probes.append(day)
        doc = self.decide(prepared.cell)
        return ProbeOutput(json_text=json.dumps(doc), seconds=0.0,
                           exit_code=Verdict(doc["verdict"]).exit_code)


class FakeStore:
    """Keeps runs as the real store does: through their JSON form, so nothing survives that
    the store would lose."""

    def __init__(self):
        self.rows = []

    def add(self, run):
        self.rows.append(run_from_json(json.loads(json.dumps(run_to_json(run)))))

    def runs(self):
        return list(self.rows)


@pytest.fixture
def stub_torch(tmp_path):
    """A `torch` module for --script runs: importing the real one would only be slower."""
    (tmp_path / "stub" / "torch").mkdir(parents=True)
    (tmp_path / "stub" / "torch" / "__init__.py").write_text(
        "class version:\n    git_version = 'abc123def456'\n")
    return tmp_path / "stub"


def bisector(backend, store, tmp_path, rule=None, direction=Direction.REGRESSION):
    return Bisector(backend=backend, store=store, rule=rule or Rule(), direction=direction,
                    logs=tmp_path / "logs")


def test_finds_first_bad_and_stores_every_probe(tmp_path):
    backend, store = FakeBackend(affected_from("2025-08-11")), FakeStore()
    b = bisector(backend, store, tmp_path)
    result = b.search(cands())
    got = (DATES[result.last_good], DATES[result.first_bad])
    assert got == ("2025-08-10", "2025-08-11")
    assert result.probes <= 4 + 2 and b.new_runs == result.probes == len(store.rows)
    assert {r.cell.id for r in store.rows} >= {"nightly-20250801-cpu-cp311",
                                               "nightly-20250819-cpu-cp311"}
    assert all(r.status is RunStatus.OK and r.wheel_sha256.startswith("sha-") for r in store.rows)
    assert b.points[result.first_bad].git_version == "g20250811"


def test_a_rerun_reuses_the_store_and_a_killed_run_resumes(tmp_path):
    store = FakeStore()
    killed = FakeBackend(affected_from("2025-08-11"), stop_after=3)
    with pytest.raises(KeyboardInterrupt):
        bisector(killed, store, tmp_path).search(cands())
    assert len(store.rows) == 3
    again = FakeBackend(affected_from("2025-08-11"))
    b = bisector(again, store, tmp_path)
    result = b.search(cands())
    assert (DATES[result.last_good], DATES[result.first_bad]) == ("2025-08-10", "2025-08-11")
    assert b.new_runs == result.probes - 3
    assert not set(again.probes) & set(killed.probes)  # nothing probed twice
    third = FakeBackend(affected_from("2025-08-11"))
    assert bisector(third, store, tmp_path).search(cands()).first_bad == result.first_bad
    assert third.probes == []


def test_another_script_or_probe_version_does_not_reuse(tmp_path, monkeypatch):
    store = FakeStore()
    bisector(FakeBackend(affected_from("2025-08-11")), store, tmp_path).search(cands())
    (tmp_path / "probes" / "stale_replay.py").write_text('PROBE_VERSION = "10"\n')
    probes.probe_version.cache_clear()
    fresh = FakeBackend(affected_from("2025-08-11"))
    bisector(fresh, store, tmp_path).search(cands())
    assert fresh.probes  # a changed probe script means new evidence


def test_install_failure_is_unknown_stepped_around_and_retried_later(tmp_path):
    store = FakeStore()
    backend = FakeBackend(affected_from("2025-08-11"), broken={"2025-08-10"})
    b = bisector(backend, store, tmp_path)
    result = b.search(cands())
    assert (DATES[result.last_good], DATES[result.first_bad]) == ("2025-08-08", "2025-08-11")
    assert [DATES[i] for i in result.unknown_between] == ["2025-08-10"]
    point = b.points[DATES.index("2025-08-10")]
    assert point.verdict == "unknown" and "HTTP 404" in point.reason
    failed = [r for r in store.rows if r.status is RunStatus.INFRA_FAILURE]
    assert [r.cell.date for r in failed] == ["2025-08-10"]
    healed = FakeBackend(affected_from("2025-08-11"))
    result = bisector(healed, store, tmp_path).search(cands())
    assert healed.probes == ["2025-08-10"]  # only the failed one is tried again
    assert result.exact


def test_ends_are_checked(tmp_path):
    backend = FakeBackend(affected_from("2025-08-01"))
    with pytest.raises(EndsError) as err:
        bisector(backend, FakeStore(), tmp_path).search(cands())
    assert err.value.index == 0


def test_find_fix_searches_for_the_first_good(tmp_path):
    def decide(cell):
        v = Verdict.AFFECTED if cell.date < "2025-08-06" else Verdict.REFUSED
        return probe_doc(v, cell.date)

    b = bisector(FakeBackend(decide), FakeStore(), tmp_path, direction=Direction.FIX)
    result = b.search(cands())
    assert (DATES[result.last_good], DATES[result.first_bad]) == ("2025-08-05", "2025-08-06")
    assert b.points[result.last_good].verdict == "bad"
    assert b.points[result.first_bad].verdict == "good"


def test_next_candidates_install_while_one_is_probed(tmp_path):
    backend = FakeBackend(affected_from("2025-08-11"))
    # while the good end is probed, the bad end must already be installing
    backend.wait_for = {"2025-08-01": "2025-08-19"}
    bisector(backend, FakeStore(), tmp_path).search(cands())
    assert backend.waited == {"2025-08-01": True}
    assert len(backend.prepares) == len(set(backend.prepares))  # each nightly installed once


@pytest.mark.parametrize(("stale", "min_stale", "verdict"), [
    (0, 1, "good"), (1, 1, "bad"), (1, 2, "unknown"), (2, 2, "bad"), (5, 3, "bad"),
])
def test_flaky_rule(stale, min_stale, verdict):
    v = Verdict.AFFECTED if stale else Verdict.NOT_AFFECTED
    run = SimpleNamespace(status=RunStatus.OK, reason="", result=None)
    from torchbisect.model import ProbeResult

    run.result = ProbeResult.from_json(probe_doc(v, "2025-08-01", case="side_stream",
                                                 stale_trials=stale, trials=5))
    judged = Rule(case="side_stream", trials=5, min_stale=min_stale).judge(run)
    assert judged.verdict == verdict
    assert judged.stale_fraction == stale / 5
    assert f"stale on at least {min_stale} of 5 trials" in Rule(case="side_stream", trials=5,
                                                       min_stale=min_stale).describe()


def test_flaky_bisection_keeps_every_stale_fraction(tmp_path):
    def decide(cell):
        stale = 2 if cell.date >= "2025-08-11" else 0
        v = Verdict.AFFECTED if stale else Verdict.NOT_AFFECTED
        return probe_doc(v, cell.date, case="side_stream", stale_trials=stale, trials=4)

    b = bisector(FakeBackend(decide), FakeStore(), tmp_path,
                 rule=Rule(case="side_stream", trials=4, min_stale=1))
    result = b.search(cands(case="side_stream", trials=4))
    assert DATES[result.first_bad] == "2025-08-11"
    assert {p.stale_fraction for p in b.points.values()} == {0.0, 0.5}


@pytest.mark.parametrize(("returncode", "verdict"), [(0, "good"), (1, "bad"), (125, "unknown"),
                                                     (127, "bad")])
def test_script_exit_codes(tmp_path, returncode, verdict, stub_torch):
    script = f'python -c "import sys; sys.exit({returncode})"'
    rule = Rule(script=script)
    store = FakeStore()
    b = bisector(FakeBackend(None, stub_torch=stub_torch), store, tmp_path, rule=rule)
    c = cands(probe=rule.probe_name)
    b._cands = c.candidates
    b._verdict_of(0)
    assert b.points[0].verdict == verdict
    assert store.rows[0].probe_version == rule.probe_name
    assert rule.probe_name.startswith("script:") and len(rule.probe_name) == 19
    assert store.rows[0].result.env == {"git_version": "abc123def456",
                                        "torch_version": "2.10.0.dev20250801+cpu"}


def test_script_above_127_aborts(tmp_path, stub_torch):
    rule = Rule(script="exit 200")
    b = bisector(FakeBackend(None, stub_torch=stub_torch), FakeStore(), tmp_path, rule=rule)
    with pytest.raises(ScriptAborted, match="exited with status 200"):
        b.search(cands(probe=rule.probe_name))


def test_script_sees_the_candidate_environment(tmp_path, stub_torch):
    out = tmp_path / "seen.txt"
    script = ('echo "$TORCHBISECT_DATE $TORCHBISECT_TORCH_VERSION $TORCHBISECT_PYTHON '
              f'$(command -v python)" >> {out}; test "$TORCHBISECT_DATE" != 2025-08-19')
    rule = Rule(script=script)
    b = bisector(FakeBackend(None, stub_torch=stub_torch), FakeStore(), tmp_path, rule=rule)
    result = b.search(cands(probe=rule.probe_name))
    assert DATES[result.first_bad] == "2025-08-19"
    first = out.read_text().splitlines()[0].split()
    bindir = str(Path(sys.executable).parent)
    assert first[:3] == ["2025-08-01", "2.10.0.dev20250801+cpu", sys.executable]
    assert first[3].startswith(bindir)
