"""The SQLite store: what goes in comes back, reruns and merges never duplicate, the skip key only
counts verdicts, and a writer killed with SIGKILL loses nothing it had committed."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from dataclasses import replace

import pytest
from helpers import HELPERS, make_cell, make_run

from torchbisect.errors import ConfigError
from torchbisect.model import RunStatus
from torchbisect.outcome import BisectResult, Direction, NightlyPoint
from torchbisect.store.db import Store


def test_a_run_comes_back_as_it_went_in(store):
    run = make_run(verdict="affected")
    run_id = store.add(run)
    (back,) = store.runs()
    assert back == replace(run, run_id=run_id)
    assert back.result.raw == run.result.raw
    assert back.verdict.value == "affected"


def test_adding_the_same_run_twice_keeps_one_row(store):
    run = make_run()
    assert store.add(run) == store.add(run)
    assert len(store.runs()) == 1


def test_latest_is_the_newest_run_per_cell_and_gpu(store):
    a, b = make_cell("dev-a"), make_cell("dev-b")
    store.add(make_run(a, started="2026-11-01T00:00:00.000000+00:00", verdict="affected"))
    store.add(make_run(a, started="2026-11-02T00:00:00.000000+00:00", verdict="not_affected"))
    store.add(make_run(a, started="2026-11-03T00:00:00.000000+00:00", gpu="NVIDIA B200"))
    store.add(make_run(b, status=RunStatus.INFRA_FAILURE))
    latest = {(r.cell.id, r.gpu): r for r in store.latest()}
    assert set(latest) == {
        ("dev-a", "NVIDIA H200"),
        ("dev-a", "NVIDIA B200"),
        ("dev-b", "NVIDIA H200"),
    }
    assert latest["dev-a", "NVIDIA H200"].verdict.value == "not_affected"
    assert latest["dev-b", "NVIDIA H200"].status is RunStatus.INFRA_FAILURE


def test_the_skip_key_needs_a_verdict_and_every_part_to_match(store):
    cell = make_cell()
    key = dict(
        wheel_sha256=cell.sha256, probe_version="1+abc", gpu="NVIDIA H200", driver="580.159.04"
    )
    store.add(make_run(cell, status=RunStatus.INFRA_FAILURE))
    assert store.find_ok(cell, **key) is None
    assert not store.has_result(cell.id)
    store.add(make_run(cell, started="2026-11-30T00:00:00.000000+00:00"))
    assert store.find_ok(cell, **key).cell.id == cell.id
    assert store.has_result(cell.id)
    for part, other in [
        ("wheel_sha256", "0" * 64),
        ("probe_version", "2+def"),
        ("gpu", "NVIDIA B200"),
        ("driver", "590.1"),
    ]:
        assert store.find_ok(cell, **{**key, part: other}) is None, part


def test_merging_a_shard_twice_adds_nothing_the_second_time(tmp_path, store):
    with Store(tmp_path / "shard.sqlite") as shard:
        shard.add(make_run(make_cell("dev-a")))
        shard.add(make_run(make_cell("dev-b"), status=RunStatus.INFRA_FAILURE))
    store.add(make_run(make_cell("dev-c")))
    assert store.merge_from(tmp_path / "shard.sqlite") == (2, 0)
    assert store.merge_from(tmp_path / "shard.sqlite") == (0, 2)
    assert sorted(r.cell.id for r in store.runs()) == ["dev-a", "dev-b", "dev-c"]


def test_a_json_export_merges_back_into_an_equal_store(tmp_path, store):
    store.add(make_run(make_cell("dev-a"), verdict="affected"))
    store.add(make_run(make_cell("dev-b"), status=RunStatus.INFRA_FAILURE))
    store.add_bisection(_bisection())
    exported = store.export_json(tmp_path / "export.json")
    assert json.loads(exported.read_text())["schema"] == 1
    with Store(tmp_path / "copy.sqlite") as copy:
        assert copy.merge_from(exported) == (2, 0)
        assert copy.merge_from(exported) == (0, 2)
        assert _plain(copy.runs()) == _plain(store.runs())
        assert copy.bisections() == store.bisections() == [_bisection()]


def test_a_bisection_is_stored_once(store):
    assert store.add_bisection(_bisection()) == store.add_bisection(_bisection())
    assert store.bisections() == [_bisection()]


def test_merge_refuses_a_file_that_is_neither_store_nor_export(tmp_path, store):
    junk = tmp_path / "junk.json"
    junk.write_text("[1, 2]")
    with pytest.raises(ConfigError, match="not a torchbisect export"):
        store.merge_from(junk)
    with pytest.raises(ConfigError, match="does not exist"):
        store.merge_from(tmp_path / "missing.sqlite")


def test_a_store_from_a_newer_torchbisect_is_refused(tmp_path):
    path = tmp_path / "new.sqlite"
    db = sqlite3.connect(path)
    db.execute("PRAGMA user_version = 99")
    db.close()
    with pytest.raises(ConfigError, match="newer torchbisect"):
        Store(path)


WRITER = textwrap.dedent("""
    import sys
    sys.path.insert(0, sys.argv[2])
    from helpers import HELPERS, make_cell, make_run
    from torchbisect.store.db import Store
    store = Store(sys.argv[1])
    i = 0
    while True:
        run = make_run(make_cell(f"dev-{i}"), started=f"2026-11-29T10:00:00.{i:06d}+00:00",
                       log_excerpt="x" * 20000)
        store.add(run)
        print(i, flush=True)  # only after the commit
        i += 1
""")


def test_sigkill_mid_write_loses_no_committed_run_and_leaves_a_sound_file(tmp_path):
    path = tmp_path / "killed.sqlite"
    helpers = str(HELPERS.parent)
    committed: set[int] = set()
    for _ in range(3):  # three kills at arbitrary moments, the file reused each time
        child = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path), helpers], stdout=subprocess.PIPE, text=True
        )
        first = child.stdout.readline()  # a commit is done: the kill lands mid-writing
        time.sleep(0.2)
        child.send_signal(signal.SIGKILL)
        out, _ = child.communicate()
        committed |= {int(line) for line in (first + out).split()}
    assert committed
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    db.close()
    with Store(path) as store:
        ids = [r.cell.id for r in store.runs()]
    assert len(ids) == len(set(ids))  # each writer restarts at dev-0: same key, no new row
    assert {f"dev-{i}" for i in committed} <= set(ids)


def _plain(runs):
    return sorted((replace(r, run_id=None) for r in runs), key=lambda r: r.cell.id)


def _bisection() -> BisectResult:
    good = NightlyPoint(date="2026-10-01", version="2.16.0.dev20261001+cu130", verdict="good")
    bad = NightlyPoint(date="2026-10-02", version="2.16.0.dev20261002+cu130", verdict="bad")
    return BisectResult(
        direction=Direction.REGRESSION,
        case="capture_data_ptr",
        cuda="cu130",
        python="3.12",
        before=good,
        after=bad,
        probes=5,
        points=(good, bad),
        finished="2026-11-29T12:00:00+00:00",
    )


def test_the_damage_check_knows_the_columns_the_store_writes():
    """The damage check (store/check.py, which other Pythons load without the package's
    dependencies) and the writer (runs.py) read one spelling of the `runs` columns: a column
    known to one and not the other would call a good store damaged, or let a damaged one
    through."""
    from torchbisect.store import check
    from torchbisect.store.runs import RUN_FIELDS

    assert check._TABLES["runs"] == {"id", *RUN_FIELDS}
