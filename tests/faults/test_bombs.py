"""E10, E12: every file torchbisect reads is bounded — YAML aliases (a ten-line bomb), nesting in
matrix.yaml, the lock, a store's JSON export — with one sentence naming the file and the bound;
`merge` of a large export streams it, in the memory of one run."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from helpers import make_run
from helpers.cli import torchbisect

from torchbisect.exits import Exit
from torchbisect.store.db import Store
from torchbisect.store.runs import run_to_json

BOMB = """\
a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]
b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]
c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]
d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]
e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]
f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]
g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]
h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g]
i: &i [*h, *h, *h, *h, *h, *h, *h, *h, *h]
stable: {versions: *i}
"""
DEEP = 100_000


def _torchbisect(*args: str, cwd, timeout: float = 120) -> subprocess.CompletedProcess:
    return torchbisect(*args, cwd=cwd, timeout=timeout, env_extra={"NO_COLOR": "1"})


def _one_sentence(done: subprocess.CompletedProcess, *parts: str) -> None:
    err = done.stderr.strip()
    assert done.returncode == Exit.MISTAKE, err
    assert "Traceback" not in err and err.count("\n") == 0, err
    for part in parts:
        assert part in err, err


@pytest.mark.parametrize(
    ("text", "parts"),
    [
        (BOMB, ("matrix.yaml", "expand to more than 100,000 values")),
        ("stable: " + "[" * DEEP + "]" * DEEP + "\n", ("matrix.yaml, line 1", "deeper than 32")),
        (
            "stable:\n" + "".join(" " * (2 * i) + "- \n" for i in range(1, 300)),
            ("matrix.yaml, line", "deeper than 32"),
        ),
        ("a: &a [1, *a]\nstable: {versions: *a}\n", ("matrix.yaml, line 1", "alias of itself")),
    ],
    ids=["alias-bomb", "deep-flow", "deep-block", "self-alias"],
)
def test_a_yaml_bomb_or_deep_matrix_is_one_sentence(tmp_path, text, parts):
    (tmp_path / "matrix.yaml").write_text(text)
    _one_sentence(
        _torchbisect("plan", "--matrix", "matrix.yaml", "--offline", cwd=tmp_path), *parts
    )


def test_a_matrix_file_of_gigabytes_is_not_read(tmp_path):
    with (tmp_path / "matrix.yaml").open("wb") as fh:  # sparse: no disk spent
        fh.truncate(2 * 1024**3)
    _one_sentence(
        _torchbisect("plan", "--matrix", "matrix.yaml", "--offline", cwd=tmp_path),
        "matrix.yaml is larger than 4 MiB",
    )


def test_a_deep_lock_is_one_sentence(tmp_path):
    (tmp_path / "matrix.yaml").write_text("stable: {versions: [2.15.0]}\n")
    (tmp_path / "matrix.lock.json").write_text(
        '{"format": 1, "builds": ' + "[" * DEEP + "]" * DEEP + "}"
    )
    _one_sentence(
        _torchbisect("plan", "--matrix", "matrix.yaml", "--offline", cwd=tmp_path),
        "matrix.lock.json is not a torchbisect lock file",
        "deeper than 8 levels",
    )


def _export(path, runs: int, *, excerpt: int, deep: bool = False) -> None:
    """A store's JSON export of `runs` runs, written run by run as Store.export_json does."""
    template = run_to_json(make_run())
    with path.open("w") as fh:
        fh.write('{"bisections": [], "runs": [')
        for i in range(runs):
            run = {
                **template,
                "started": f"2026-11-30T10:00:00.{i:06d}+00:00",
                "log_excerpt": f"run {i} " + "x" * excerpt,
            }
            fh.write(("," if i else "") + "\n" + json.dumps(run))
        if deep:
            fh.write(",\n" + "[" * DEEP + "]" * DEEP)
        fh.write('\n], "schema": 1}\n')


def test_an_export_entry_nested_deep_is_one_sentence_and_adds_nothing(tmp_path):
    _export(tmp_path / "shard.json", 3, excerpt=10, deep=True)
    done = _torchbisect("merge", "merged.sqlite", "shard.json", cwd=tmp_path)
    _one_sentence(done, "shard.json", "nests deeper than 24 levels")
    with Store(tmp_path / "merged.sqlite") as store:
        assert store.count() == 0  # the runs before it were rolled back with it


MEASURED = (
    "import sys\nfrom torchbisect.cli import main\ntry:\n    code = main()\nfinally:\n"
    # VmHWM: the peak of this process alone (getrusage's maxrss survives fork and exec,
    # so it would report the test runner's own peak)
    "    hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM')]\n"
    "    print('maxrss_kb', hwm[0].split()[1], file=sys.stderr)\nsys.exit(code)\n"
)


def _peak_mb(cwd, *args: str) -> float:
    """`torchbisect ARGS` in a process of its own; the peak of its resident memory, in MB."""
    done = subprocess.run(
        [sys.executable, "-c", MEASURED, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == Exit.OK, done.stderr
    return int(done.stderr.rsplit("maxrss_kb", 1)[1].split()[0]) / 1024


@pytest.mark.slow
def test_merge_of_a_large_export_streams_it_in_the_memory_of_one_run(tmp_path):
    # The floor: the same commands on an export a tenth the size (the interpreter, its imports,
    # SQLite's cache, one run's buffers).  A merge or export that held the whole file would peak
    # at least one copy of it (40 MB) above that; streamed, the peak does not grow with the file
    # (measured: 100 to 1,200 runs of 100 kB, 31 to 32 MB).
    runs, excerpt = 400, 100_000  # a 40 MB export
    peaks = {}
    for name, count in (("floor", runs // 10), ("large", runs)):
        work = tmp_path / name
        work.mkdir()
        _export(work / "shard.json", count, excerpt=excerpt)
        peaks[name] = (
            _peak_mb(work, "merge", "merged.sqlite", "shard.json", "--json", "latest.json"),
            _peak_mb(work, "merge", "again.json", "merged.sqlite"),
        )  # and back out
    large = tmp_path / "large"
    size_mb = (large / "shard.json").stat().st_size / 1e6
    assert size_mb > 40
    for what, floor, peak in zip(("merge", "export"), peaks["floor"], peaks["large"], strict=True):
        assert peak < floor + size_mb / 3, (
            f"{what} peaked at {peak:.0f} MB for {size_mb:.0f} MB, {floor:.0f} MB for a tenth"
        )
    with Store(large / "merged.sqlite") as store:
        assert store.count() == runs
    # the export is the store's runs, whole
    with Store(tmp_path / "check.sqlite") as store:
        assert store.merge_from(large / "again.json") == (runs, 0)
