"""Scheduling: shards partition the plan, the skip key reuses verdicts (never infra failures),
every GPU is used with one cell each at a time, installs run ahead of the probes within the
lookahead, and Ctrl-C stores nothing half-done and releases everything prepared."""

from __future__ import annotations

import os
import signal
import threading

import pytest
from helpers import ScriptedBackend, make_cell, make_run
from hypothesis import given
from hypothesis import strategies as st

from torchbisect.errors import ConfigError, InfraError
from torchbisect.model import Channel, RunStatus
from torchbisect.probe.scripts import probe_version
from torchbisect.run import schedule, selection
from torchbisect.utils.gpus import Gpu

GPUS = (
    Gpu(index=0, name="NVIDIA H200", driver="580.159.04"),
    Gpu(index=1, name="NVIDIA H200", driver="580.159.04"),
)


pytestmark = pytest.mark.usefixtures("fake_probes")


ids = st.lists(st.from_regex(r"[a-z0-9.+-]{1,30}", fullmatch=True), unique=True, max_size=40)


@given(ids=ids, n=st.integers(1, 8))
def test_shards_hold_every_cell_exactly_once(ids, n):
    cells = [make_cell(i) for i in ids]
    shards = [selection.shard(cells, f"{i}/{n}") for i in range(1, n + 1)]
    seen = [c.id for part in shards for c in part]
    assert sorted(seen) == sorted(ids)
    # a cell's shard depends on its id alone, not on which other cells the plan holds
    for i, part in enumerate(shards, start=1):
        assert all(selection.shard([c], f"{i}/{n}") == (c,) for c in part)


def test_shards_are_balanced_enough_on_a_realistic_plan():
    cells = [make_cell(f"nightly-202610{d:02d}-cu130-cp312") for d in range(1, 31)]
    sizes = [len(selection.shard(cells, f"{i}/3")) for i in (1, 2, 3)]
    assert sum(sizes) == 30 and min(sizes) >= 5


@pytest.mark.parametrize("spec", ["0/3", "4/3", "1", "a/b", "1/0", "2/3/4"])
def test_a_bad_shard_is_a_config_error(spec):
    with pytest.raises(ConfigError, match="--shard"):
        selection.parse_shard(spec)


def _stored(store, cell, **kw):
    run = make_run(cell, probe_version=probe_version(cell.probe), **kw)
    store.add(run)
    return run


def test_select_reuses_verdicts_and_retries_infrastructure_failures(store):
    a, b, c = make_cell("dev-a"), make_cell("dev-b"), make_cell("dev-c")
    _stored(store, a)
    _stored(store, b, status=RunStatus.INFRA_FAILURE)
    _stored(store, c, driver="570.1")  # another driver: the verdict may not hold here
    picked = selection.select([a, b, c], store, backend=ScriptedBackend(), gpu=GPUS[0])
    assert [x.id for x in picked.to_run] == ["dev-b", "dev-c"]
    assert [r.cell.id for r in picked.reused] == ["dev-a"]
    forced = selection.select([a, b, c], store, backend=ScriptedBackend(), gpu=GPUS[0], force=True)
    assert len(forced.to_run) == 3


def test_the_same_wheel_under_another_id_is_reused_and_stored_under_that_id(store):
    a = make_cell("dev-a")
    _stored(store, a)
    twin = make_cell("stable-2.99.0-cpu-cp311", sha256=a.sha256)
    picked = selection.select([twin], store, backend=ScriptedBackend(), gpu=GPUS[0])
    assert picked.to_run == () and picked.reused[0].cell == twin
    assert not store.has_result(twin.id) and len(store.runs()) == 1  # a query writes nothing
    kept = selection.keep_reused(picked, store)
    assert store.has_result(twin.id) and len(store.runs()) == 2
    assert kept.reused[0].run_id is not None and kept.reused[0].cell == twin
    assert selection.keep_reused(kept, store) == kept and len(store.runs()) == 2  # stored once


def test_a_nightly_without_a_sha256_reuses_the_run_of_its_url_and_an_rc_does_not(store):
    """The matrix's lookup is the bisection's: a nightly the bisection probed (its sha256 not
    published, so not known before installing) answers for the matrix's cell of that URL; a
    release candidate at a URL once probed is probed again (a re-spun rc keeps its name)."""
    probed = make_cell("nightly-20261001-cu130-cp312", channel=Channel.NIGHTLY)
    _stored(store, probed)
    nightly = make_cell(
        "nightly-20261001-2.17.0-cu130-cp312", channel=Channel.NIGHTLY, url=probed.url, sha256=None
    )
    rc = make_cell("test-2.17.0-cu130-cp312", channel=Channel.TEST, url=probed.url, sha256=None)
    picked = selection.select([nightly, rc], store, backend=ScriptedBackend(), gpu=GPUS[0])
    assert [r.cell.id for r in picked.reused] == [nightly.id]
    assert [c.id for c in picked.to_run] == [rc.id]


def test_every_gpu_probes_one_cell_at_a_time_while_installs_run_ahead(tmp_path, store):
    cells = [make_cell(f"dev-{i}") for i in range(8)]
    backend = ScriptedBackend(install_s=0.05, probe_s=0.15)
    runs = schedule.run_cells(cells, backend, store=store, gpus=GPUS, logs_dir=tmp_path)
    assert sorted(r.cell.id for r in runs) == sorted(c.id for c in cells)
    assert sorted(r.cell.id for r in store.runs()) == sorted(c.id for c in cells)
    assert backend.max_per_gpu == 1
    assert set(backend.gpus_used) == {0, 1}
    assert backend.overlap  # installs ran while probes ran
    # Both GPUs worked at the same time (not one cell after another); how much faster that is
    # is the benchmark's business, not an assert's.
    assert backend.max_probing == len(GPUS)
    assert sorted(backend.released) == sorted(c.id for c in cells)


def test_installs_never_run_more_than_the_lookahead_ahead(tmp_path, store, monkeypatch):
    """Counted against the cells handed to a GPU, as the scheduler hands them (its own thread):
    a probe's thread may note its start after the install its hand-over made room for."""
    cells = [make_cell(f"dev-{i}") for i in range(10)]
    backend = ScriptedBackend(install_s=0.0, probe_s=0.05)
    hand_over = schedule._Runner._submit_probe

    def handed(self, pool, staged, gpu):
        backend._event("handed", staged.cell.id)
        return hand_over(self, pool, staged, gpu)

    monkeypatch.setattr(schedule._Runner, "_submit_probe", handed)
    schedule.run_cells(cells, backend, store=store, gpus=[None], logs_dir=tmp_path, lookahead=3)
    installs = probes = 0
    for _, what, _ in sorted(backend.events):
        installs += what == "install"
        probes += what == "handed"
        assert installs - probes <= 3
    assert installs == probes == 10


def test_an_install_failure_is_stored_and_the_rest_goes_on(tmp_path, store):
    cells = [make_cell(f"dev-{i}") for i in range(4)]
    backend = ScriptedBackend(installs={"dev-1": InfraError("no space left on device")})
    runs = {
        r.cell.id: r
        for r in schedule.run_cells(cells, backend, store=store, gpus=GPUS, logs_dir=tmp_path)
    }
    assert runs["dev-1"].status is RunStatus.INFRA_FAILURE
    assert runs["dev-1"].gpu == "NVIDIA H200"
    assert all(runs[f"dev-{i}"].status is RunStatus.OK for i in (0, 2, 3))


class _CtrlCAtThirdProbe(ScriptedBackend):
    """Ctrl-C arrives while the third probe runs, when the first results are stored: the probe
    that sends it answers only once the main thread has been interrupted, so the moment is
    decided by events, not by a timer racing the work."""

    def __init__(self, interrupted: threading.Event, **kw):
        super().__init__(**kw)
        self.interrupted = interrupted
        self.started = 0

    def probe(self, prepared, **kw):
        with self.lock:
            self.started += 1
            third = self.started == 3
        if third:
            os.kill(os.getpid(), signal.SIGINT)
            assert self.interrupted.wait(60), "the main thread never heard Ctrl-C"
        return super().probe(prepared, **kw)


@pytest.fixture
def ctrl_c():
    """SIGINT raises KeyboardInterrupt in this test whatever the launcher left behind: a shell
    that starts the suite in the background ignores SIGINT, and then Python installs no
    handler of its own."""
    heard = threading.Event()

    def handler(signum, frame):
        heard.set()
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, handler)
    yield heard
    signal.signal(signal.SIGINT, previous)


def test_ctrl_c_stores_nothing_half_done_and_releases_everything(tmp_path, store, ctrl_c):
    cells = [make_cell(f"dev-{i}") for i in range(12)]
    backend = _CtrlCAtThirdProbe(ctrl_c, install_s=0.02, probe_s=0.05)
    with pytest.raises(KeyboardInterrupt):
        schedule.run_cells(cells, backend, store=store, gpus=GPUS, logs_dir=tmp_path)
    stored = [r.cell.id for r in store.runs()]
    probed = {cell for _, what, cell in backend.events if what == "probe"}
    assert 0 < len(stored) < len(cells)
    assert set(stored) <= probed
    installed = {cell for _, what, cell in backend.events if what == "install"}
    assert set(backend.released) == installed  # every prepared cell was released


def test_a_configuration_mistake_stops_the_run_and_releases_what_was_prepared(tmp_path, store):
    cells = [make_cell(f"dev-{i}") for i in range(4)]
    backend = ScriptedBackend(
        installs={"dev-2": ConfigError("no image for preinstalled")}, probe_s=0.05
    )
    with pytest.raises(ConfigError, match="no image"):
        schedule.run_cells(cells, backend, store=store, gpus=[None], logs_dir=tmp_path)
    installed = {c for _, what, c in backend.events if what == "install"} - {"dev-2"}
    assert set(backend.released) == installed
