"""Issue 53.2, names are names: a probe's name from a store (a merged shard's runs) is looked up
among the probes found, never joined into a path; two names of one regression folder are one
sentence naming both; the site's own file names are reserved.

Real parts: a SQLite store written by the store's own code, `torchbisect report` run as a user
runs it, the files it writes (or does not)."""

from __future__ import annotations

import dataclasses

from helpers import make_cell, make_run
from helpers.cli import one_sentence, torchbisect

from torchbisect.exits import Exit
from torchbisect.store.db import Store

SECRET = "DATABASE_PASSWORD = 'hunter2-not-for-the-page'\n"


def _store(path, *probes: str):
    with Store(path) as store:
        for i, probe in enumerate(probes):
            cell = make_cell(f"dev-{i}", probe=probe)
            run = make_run(cell, verdict="affected")
            result = dataclasses.replace(run.result, probe=probe) if run.result else None
            store.add(dataclasses.replace(run, result=result))
    return path


def _everything(folder) -> str:
    return "\n".join(p.read_text(errors="replace") for p in folder.rglob("*") if p.is_file())


def test_a_shard_naming_its_probe_by_a_path_publishes_no_file_of_the_host(tmp_path):
    # the probes folder is tmp/probes; the path leads out of it to tmp/home/app/settings.py
    (tmp_path / "probes").mkdir()
    (tmp_path / "home" / "app").mkdir(parents=True)
    (tmp_path / "home" / "app" / "settings.py").write_text(SECRET)
    shard = _store(tmp_path / "shard.sqlite", "../home/app/settings")
    store = tmp_path / "results.sqlite"
    merged = torchbisect("merge", store, shard, cwd=tmp_path)
    assert merged.returncode == Exit.OK, merged.stderr
    out = tmp_path / "site"
    done = torchbisect(
        "report",
        "--store",
        store,
        "--out",
        out,
        cwd=tmp_path,
        env_extra={"TORCHBISECT_PROBES": str(tmp_path / "probes")},
    )
    said = one_sentence(done.stderr, done.returncode, Exit.MISTAKE, command="report")
    assert "'../home/app/settings'" in said and "not a probe's name" in said
    assert not (out / "settings.py").exists()
    assert not out.exists() or "hunter2" not in _everything(out)


def test_two_probes_of_one_folder_are_one_sentence_naming_both(tmp_path):
    store = _store(tmp_path / "results.sqlite", "a", "a.")
    out = tmp_path / "site"
    done = torchbisect("report", "--store", store, "--out", out, cwd=tmp_path)
    said = one_sentence(done.stderr, done.returncode, Exit.MISTAKE, command="report")
    assert "'a'" in said and "'a.'" in said and "share one regression folder (a/)" in said
    assert not (out / "a").exists()  # nothing half drawn: no page of one under the other's name


def test_a_probe_named_like_the_sites_own_files_gets_a_folder_of_its_own(tmp_path):
    store = _store(tmp_path / "results.sqlite", "index.html", "regressions.json", "mine")
    out = tmp_path / "site"
    done = torchbisect("report", "--store", store, "--out", out, cwd=tmp_path)
    assert done.returncode == Exit.OK, done.stderr
    assert "Traceback" not in done.stderr and "itself failed" not in done.stderr
    assert (out / "index.html").is_file() and (out / "regressions.json").is_file()
    assert (out / "index.html-probe" / "index.html").is_file()
    assert (out / "regressions.json-probe" / "index.html").is_file()
    index = (out / "index.html").read_text()
    assert 'href="index.html-probe/' in index and 'href="mine/' in index
