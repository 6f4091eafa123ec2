"""E11: files are never written through a symbolic link planted in the report, log or work
folders: a whole file (page, log started afresh, marker, lock) replaces the link itself, an
append or a lock file refuses it with one sentence; the link's target is never touched."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers.cli import torchbisect
from helpers.runaway import project

from torchbisect.exits import Exit
from torchbisect.utils import files


def _plant(link: Path, victim: Path) -> None:
    link.parent.mkdir(parents=True, exist_ok=True)
    victim.write_text("precious, not torchbisect's\n")
    link.symlink_to(victim)


@pytest.mark.slow
def test_links_planted_in_the_report_log_and_work_folders_are_never_written_through(tmp_path):
    argv = project(tmp_path)
    argv.remove("--no-report")
    victims = tmp_path / "victims"
    victims.mkdir()
    planted = {
        tmp_path / "reports" / "logs" / "dev-k0.log": victims / "log",
        tmp_path / "reports" / "index.html": victims / "page",
        tmp_path / "reports" / "results.json": victims / "results",
        tmp_path / "work" / "venvs" / "dev-k0" / ".torchbisect-ready.json": victims / "marker",
    }
    for link, victim in planted.items():
        _plant(link, victim)
    env = {**os.environ, "TORCHBISECT_PROBES": str(tmp_path / "probes")}
    done = torchbisect(*argv, cwd=tmp_path, env=env, timeout=300)
    assert done.returncode == Exit.OK, done.stderr
    for link, victim in planted.items():
        assert victim.read_text() == "precious, not torchbisect's\n", link
    for link in list(planted)[:3]:  # replaced by the file itself
        assert not link.is_symlink() and link.stat().st_size > 0, link
    assert "dev-k0" in (tmp_path / "reports" / "logs" / "dev-k0.log").read_text()


def test_an_append_or_a_lock_file_refuses_a_planted_link(tmp_path):
    victim = tmp_path / "victim"
    _plant(tmp_path / "logs" / "cell.log", victim)
    with pytest.raises(files.PlantedLink, match="cell.log is a symbolic link"):
        files.append(tmp_path / "logs" / "cell.log", "a line\n")
    from torchbisect.backends.base import cell_lock

    _plant(tmp_path / "venvs" / "cell.lock", victim)
    with pytest.raises(files.PlantedLink), cell_lock(tmp_path / "venvs" / "cell.lock"):
        pass
    with pytest.raises(files.PlantedLink):
        files.open_new(tmp_path / "logs" / "cell.log").close()
    assert victim.read_text() == "precious, not torchbisect's\n"


def test_a_whole_file_replaces_a_planted_link_and_leaves_its_target(tmp_path):
    victim = tmp_path / "victim"
    _plant(tmp_path / "out" / "index.html", victim)
    files.write_all({tmp_path / "out" / "index.html": "new page\n"})
    assert victim.read_text() == "precious, not torchbisect's\n"
    assert (tmp_path / "out" / "index.html").read_text() == "new page\n"
    assert not (tmp_path / "out" / "index.html").is_symlink()


def test_a_link_planted_where_the_run_lock_goes_is_refused_and_left_alone(tmp_path):
    victim = tmp_path / "victim"
    _plant(tmp_path / "reports" / "results.sqlite.lock", victim)
    (tmp_path / "matrix.yaml").write_text("stable: {versions: [2.15.0]}\n")
    done = torchbisect(
        "matrix",
        "--allow-no-gpu",
        "--offline",
        "--store",
        "reports/results.sqlite",
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == Exit.NO_VERDICT, done.stderr
    assert "results.sqlite.lock is a symbolic link" in done.stderr, done.stderr
    assert victim.read_text() == "precious, not torchbisect's\n"


def test_a_json_flags_file_replaces_a_planted_link_and_a_pipe_is_written_into(tmp_path):
    """`--json OUT` (plan, matrix, probe, bisect …): a link at OUT is replaced by the document,
    its target left alone; a pipe or a device named as a path is written into as it is."""
    import threading

    from torchbisect.cli.options import write_text

    victim = tmp_path / "victim"
    _plant(tmp_path / "out" / "plan.json", victim)
    write_text(tmp_path / "out" / "plan.json", '{"schema": 1}\n')
    assert victim.read_text() == "precious, not torchbisect's\n"
    assert not (tmp_path / "out" / "plan.json").is_symlink()
    assert (tmp_path / "out" / "plan.json").read_text() == '{"schema": 1}\n'
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()))
    reader.start()
    write_text(fifo, '{"schema": 1}\n')
    reader.join(10)
    assert got == ['{"schema": 1}\n'] and fifo.is_fifo()
    write_text("/dev/null", "{}\n")
    assert Path("/dev/null").is_char_device()


@pytest.mark.parametrize("planted", ["reports", "reports/logs"])
@pytest.mark.parametrize(
    "argv",
    [
        ("matrix", "--allow-no-gpu", "--backend", "venv", "--offline"),
        ("probe", "--probe", "stale_replay"),
        ("report",),
    ],
    ids=lambda argv: argv[0],
)
def test_a_report_folder_or_its_logs_folder_that_is_a_link_is_refused_before_any_work(
    tmp_path, argv, planted
):
    """A link at --out or at --out/logs was followed: matrix wrote every cell's log into the
    link's target, then refused the link only when drawing the page (exit 2 after the work)."""
    from helpers.cli import invoke, one_sentence

    victim = tmp_path / "victim"
    victim.mkdir()
    (tmp_path / "reports").mkdir()
    if planted == "reports":
        (tmp_path / "reports").rmdir()
    (tmp_path / planted).symlink_to(victim)
    done = invoke(*argv, "--out", "reports", cwd=tmp_path)
    line = one_sentence(done.stderr, done.returncode, Exit.MISTAKE, command=argv[0])
    assert f"--out reports: {planted} is a symbolic link (to {victim})" in line, line
    assert list(victim.iterdir()) == []


def test_a_json_flag_naming_an_open_stream_writes_into_it_and_keeps_the_name(tmp_path):
    """`--json /dev/stdout > file`: /dev/stdout is a link to /proc/self/fd/1, which stats as
    the regular file it is redirected to; it was replaced by a file of its own (as root)."""
    from torchbisect.cli.options import write_text

    target = tmp_path / "redirected.json"
    with open(target, "w") as stream:
        name = tmp_path / "stdout"
        name.symlink_to(f"/proc/self/fd/{stream.fileno()}")
        write_text(name, '{"schema": 1}\n')
        assert name.is_symlink()
    assert target.read_text() == '{"schema": 1}\n'
