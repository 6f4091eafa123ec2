"""Issue 53.6: bounds everywhere input comes from elsewhere, and links below the folders the tool
writes or prunes.

Each attack of the round is one test, against the real command or the real component: a store in
WAL mode whose application id was cleared (half its runs merged without a word), an ownership mark
with a NUL or of gigabytes (read whole, then a traceback), a regression folder or a `venvs/`
swapped for a link (written or pruned through)."""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest
from helpers import fake_torch_wheel, make_cell, make_run
from helpers.cli import one_sentence, torchbisect

from torchbisect.exits import Exit
from torchbisect.store.db import Store


def _tb(cwd: Path, *argv: str | Path) -> subprocess.CompletedProcess:
    return torchbisect(*argv, cwd=cwd, timeout=300)


def test_a_wal_store_without_the_tools_id_and_without_its_wal_is_refused(tmp_path):
    """Its runs since the last checkpoint are in the -wal left behind: merged alone, half its
    runs went in with exit 0 and no word."""
    live = tmp_path / "live" / "store.sqlite"
    with Store(live) as store:
        for i in range(24):
            store.add(make_run(make_cell(f"dev-a{i}")))
    other = sqlite3.connect(live, isolation_level=None)  # another program's store, in WAL mode
    other.execute("PRAGMA application_id = 0")
    other.execute("PRAGMA journal_mode = WAL")
    reader = sqlite3.connect(live, isolation_level=None)
    reader.execute("BEGIN")  # a reader: no checkpoint can finish meanwhile
    reader.execute("SELECT count(*) FROM runs").fetchall()
    with Store(live) as store:
        for i in range(24):
            store.add(make_run(make_cell(f"dev-b{i}")))
        shutil.copyfile(live, tmp_path / "alone.sqlite")  # the file, without its -wal
    reader.close()
    other.close()
    done = _tb(tmp_path, "merge", "site.sqlite", "alone.sqlite")
    line = one_sentence(done.stderr, done.returncode, Exit.MISTAKE)
    assert (
        "alone.sqlite is in WAL mode without its alone.sqlite-wal and was not written by "
        "this torchbisect"
        in line
        and "nothing was merged" in line
    ), line
    assert not (tmp_path / "site.sqlite").exists()


# -- ownership marks and links below the folders the tool writes or prunes ----------------------


def _two_regressions(tmp_path: Path) -> Path:
    """A store of two probes' runs: `report` draws a folder per regression under --out."""
    store = tmp_path / "results.sqlite"
    with Store(store) as opened:
        opened.add(make_run(make_cell("dev-a")))
        opened.add(make_run(make_cell("dev-b", probe="cumsum_64bit")))
    return store


def _site(tmp_path: Path) -> Path:
    store = _two_regressions(tmp_path)
    done = _tb(tmp_path, "report", "--store", store, "--out", "site")
    assert done.returncode == Exit.OK, done.stderr
    return tmp_path / "site"


def test_a_regression_folder_swapped_for_a_link_is_never_written_through(tmp_path):
    site = _site(tmp_path)
    folders = [p for p in site.iterdir() if p.is_dir() and (p / "index.html").is_file()]
    assert len(folders) == 2, sorted(site.iterdir())
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "index.html").write_text("precious")
    shutil.rmtree(folders[0])
    folders[0].symlink_to(victim, target_is_directory=True)
    done = _tb(tmp_path, "report", "--store", "results.sqlite", "--out", "site")
    line = one_sentence(done.stderr, done.returncode, Exit.NO_VERDICT)
    assert f"{folders[0].relative_to(tmp_path)} is a symbolic link" in line, line
    assert sorted(p.name for p in victim.iterdir()) == ["index.html"]
    assert (victim / "index.html").read_text() == "precious"


def test_a_mark_naming_a_file_with_a_nul_is_read_as_naming_nothing(tmp_path):
    site = _site(tmp_path)
    mark = site / ".torchbisect-owned"
    mark.write_text(mark.read_text() + "gone\x00.html\n")
    done = _tb(tmp_path, "report", "--store", "results.sqlite", "--out", "site")
    assert done.returncode == Exit.OK, done.stderr  # was a ValueError, exit 250


def test_a_mark_of_gigabytes_is_refused_without_reading_it(tmp_path):
    site = _site(tmp_path)
    mark = site / ".torchbisect-owned"
    head = mark.read_text()
    with mark.open("r+b") as fh:  # sparse: no disk, but read whole it was 2 GiB in memory
        fh.truncate(2 * 1024**3)
        fh.write(head.encode())
    done = _tb(tmp_path, "report", "--store", "results.sqlite", "--out", "site")
    line = one_sentence(done.stderr, done.returncode, Exit.MISTAKE)
    assert "is larger than any mark torchbisect writes" in line, line


def test_cache_prune_removes_nothing_through_a_venvs_swapped_for_a_link_after_its_check(
    tmp_path, monkeypatch
):
    from torchbisect.backends import venv
    from torchbisect.utils import owned

    work = tmp_path / "work"
    owned.claim(work / "venvs", "venvs", cache=True)
    (work / "venvs" / "dev-a").mkdir()
    victim = tmp_path / "victim"
    (victim / "dev-a").mkdir(parents=True)
    (victim / "dev-a" / "precious.txt").write_text("keep me")
    real_lock = venv.cell_lock

    @contextlib.contextmanager
    def swap_then_lock(path: Path):
        """The moment between the check (ours, a real folder) and the removal."""
        venvs = work / "venvs"
        if not owned.is_link(venvs):
            venvs.rename(work / "venvs-checked")
            venvs.symlink_to(victim, target_is_directory=True)
        with real_lock(work / "venvs-checked" / path.name):
            yield

    monkeypatch.setattr(venv, "cell_lock", swap_then_lock)
    with pytest.raises(owned.NotOurs, match="became a symbolic link"):
        venv.prune(work)
    assert (victim / "dev-a" / "precious.txt").read_text() == "keep me"


# -- probe files ---------------------------------------------------------------------------------

_PROBE_HEAD = '"""A probe."""\nPROBE_VERSION = "1"\n'


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ("# padding\n" * 1_200_000, "the probe is larger than 1 MiB"),  # 12 MB
        ("x = " + "-" * 100_000 + "1\n", "the probe is not a Python file this tool can read"),
        ("x = " + "1+" * 100_000 + "1\n", "the probe is not a Python file this tool can read"),
    ],
    ids=["12 MB", "deep unary", "deep sum"],
)
def test_a_probe_file_too_large_or_too_deep_is_one_sentence(tmp_path, body, said):
    """Read at every `plan` and `report`: a 12 MB probe cost gigabytes of syntax tree, and an
    expression nested thousands deep ended in a RecursionError or a MemoryError (250)."""
    probes = tmp_path / "probes"
    probes.mkdir()
    (probes / "stale_replay.py").write_text(_PROBE_HEAD + body)
    wheel = fake_torch_wheel(tmp_path / "wheels", "2.99.0+cpu")
    (tmp_path / "matrix.yaml").write_text(f"dev:\n  - wheel: {wheel}\n    name: k0\n")
    done = torchbisect(
        "plan",
        "--matrix",
        "matrix.yaml",
        cwd=tmp_path,
        env_extra={"TORCHBISECT_PROBES": str(probes)},
        timeout=300,
    )
    line = one_sentence(done.stderr, done.returncode, Exit.MISTAKE)
    assert "stale_replay.py" in line and said in line, line


# -- numbers from an index: build tags, metadata pins ---------------------------------------------


def test_a_build_tag_of_thousands_of_digits_is_no_wheel_name(tmp_path):
    """The re-spin `torch-2.98.2+cpu-<4,000 digits>-…whl` was planned as the release's build:
    its cell id, and so its log's and venv's names, carried the 4,000 digits (250 when written).
    A number no wheel name needs makes the file no wheel; the release's own build is planned."""
    folder = tmp_path / "whl" / "cpu" / "torch"
    folder.mkdir(parents=True)
    names = [
        "torch-2.98.2%2Bcpu-cp311-cp311-linux_x86_64.whl",
        f"torch-2.98.2%2Bcpu-{'1' * 4000}-cp311-cp311-linux_x86_64.whl",
        f"torch-2.98.2%2Bcpu-{'1' * 5000}-cp311-cp311-linux_x86_64.whl",
    ]
    (folder / "index.html").write_text(
        "<!DOCTYPE html><html><body>\n"
        + "\n".join(
            f'<a href="{n}#sha256={c * 64}">{n.replace("%2B", "+")}</a>'
            for n, c in zip(names, "abc", strict=True)
        )
        + "\n</body></html>\n"
    )
    (tmp_path / "matrix.yaml").write_text(
        f"indexes:\n  stable: {(tmp_path / 'whl' / 'cpu').as_uri()}/\ndefaults:\n"
        "  python: '3.11'\n  cuda: cpu\nstable:\n  versions: [2.98.2]\n"
    )
    done = _tb(tmp_path, "plan", "--matrix", "matrix.yaml")
    assert done.returncode == Exit.OK, done.stderr
    assert "stable-2.98.2-cpu-cp311 " in done.stdout and "1" * 30 not in done.stdout


def test_a_metadata_pin_of_thousands_of_digits_pins_no_cuda():
    from torchbisect.index.cuda import pinned_cuda

    metadata = (
        "Metadata-Version: 2.1\nName: torch\nVersion: 2.9.0\n"
        f"Requires-Dist: nvidia-cuda-runtime-cu12=={'1' * 5000}.8.90\n\n"
    )
    assert pinned_cuda(metadata) is None  # was a ValueError past Python's 4,300 digits: 250
    assert pinned_cuda(metadata.replace("1" * 5000, "12")) == "cu128"


def test_a_release_of_thousands_of_digits_is_no_release(tmp_path):
    """`--good 111…1.0` (5,000 digits) ended in Python's int-string limit: a ValueError, 250."""
    done = _tb(
        tmp_path,
        "bisect",
        "--good",
        f"{'1' * 5000}.0",
        "--bad",
        "2.11.0",
        "--cuda",
        "cu130",
        "--script",
        "true",
        "--store",
        "r.sqlite",
        "--workdir",
        "work",
        "--no-github",
        "--index-url",
        "http://127.0.0.1:9/",
    )
    line = one_sentence(done.stderr, done.returncode, Exit.MISTAKE)
    assert "--good" in line, line
