"""Which shard of which runner kind reported in which run: stored once, merged with the shards,
kept by exports, and absent (not an error, not a change) in a store written before it existed."""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3

import pytest
from helpers import make_run

from torchbisect.errors import ConfigError
from torchbisect.model import Attendance
from torchbisect.store.db import Store


def attended(
    kind="H200", shard="1/2", run="7-1", started="2026-12-01T09:40:00+00:00", **more
) -> Attendance:
    values = dict(
        kind=kind,
        shard=shard,
        run=run,
        gpu="NVIDIA H200",
        host="gpu-runner-3",
        started=started,
        finished="2026-12-01T10:05:00+00:00",
        cells=12,
        probed=3,
        reused=8,
        failed=1,
    )
    return Attendance(**{**values, **more})


def test_attendance_comes_back_oldest_first_and_once_per_shard_and_run(store):
    late = attended(shard="2/2", started="2026-12-01T09:50:00+00:00")
    early = attended()
    store.add_attendance(late)
    store.add_attendance(early)
    store.add_attendance(replace_probed(early, 99))  # the same shard of the same run again
    assert store.attendance() == [early, late]


def replace_probed(a: Attendance, probed: int) -> Attendance:
    return Attendance(**{**a.to_json(), "probed": probed})


def test_merging_shards_keeps_every_kinds_attendance_once(tmp_path, store):
    for name, a in (
        ("h200.sqlite", attended()),
        ("gb300.sqlite", attended(kind="GB300", shard="1/1", gpu="NVIDIA GB300")),
    ):
        with Store(tmp_path / name) as shard:
            shard.add(make_run(gpu=a.gpu))
            shard.add_attendance(a)
    for _ in range(2):  # merging the same shard twice adds nothing
        store.merge_from(tmp_path / "h200.sqlite")
        store.merge_from(tmp_path / "gb300.sqlite")
    assert sorted(a.kind for a in store.attendance()) == ["GB300", "H200"]
    assert store.count() == 2


def test_an_export_keeps_attendance_and_merges_it_back(tmp_path, store):
    store.add(make_run())
    store.add_attendance(attended())
    exported = store.export_json(tmp_path / "export.json")
    assert json.loads(exported.read_text())["attendance"] == [attended().to_json()]
    with Store(tmp_path / "copy.sqlite") as copy:
        copy.merge_from(exported)
        assert copy.attendance() == [attended()]


def test_an_older_store_reads_as_nothing_reported_and_is_not_changed(tmp_path, store):
    store.add(make_run())
    store.close()
    old = tmp_path / "old.sqlite"
    shutil.copy(store.path, old)
    before = hashlib.sha256(old.read_bytes()).hexdigest()
    with Store(old) as opened:
        assert opened.attendance() == []
        assert len(opened.runs()) == 1
    with Store(old, read_only=True) as opened:
        assert opened.attendance() == []
    assert hashlib.sha256(old.read_bytes()).hexdigest() == before
    with Store(tmp_path / "merged.sqlite") as merged:  # an older shard merges as before
        assert merged.merge_from(old) == (1, 0)
        assert merged.attendance() == []


def test_a_damaged_attendance_row_is_one_sentence_naming_the_row(store):
    store.add_attendance(attended())
    db = sqlite3.connect(store.path)
    db.execute("UPDATE attendance SET doc_json = ?", (json.dumps({"kind": "H200"}),))
    db.commit()
    db.close()
    with pytest.raises(ConfigError, match=r"damaged row \(`attendance` id 1: ValueError"):
        store.attendance()


def test_an_export_with_a_wrongly_typed_attendance_entry_adds_nothing(tmp_path, store):
    doc = {
        "schema": 1,
        "bisections": [],
        "runs": [],
        "attendance": [{**attended().to_json(), "cells": "12"}],
    }
    path = tmp_path / "export.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ConfigError, match="has a damaged entry"):
        store.merge_from(path)
    assert store.attendance() == []
