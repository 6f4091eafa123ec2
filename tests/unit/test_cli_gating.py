"""A release checklist gates on torchbisect: exit statuses, JSON shaped like results.json, and one
name and meaning per flag across commands.

`probe` and `matrix` run for real on this interpreter's torch with the `current` backend.  Where a
test needs an "affected" or "not affected" verdict, which only a GPU can give, a stand-in probe
(same command line, same JSON document, exit status to match) answers instead of the real one.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from pathlib import Path

import pytest
from helpers import make_cell, make_run
from helpers.cli import call, one_sentence

from torchbisect.backends import BACKENDS
from torchbisect.cli import COMMANDS
from torchbisect.errors import ConfigError
from torchbisect.exits import Exit

STAND_IN = """PROBE_VERSION = "gate"
import argparse, json, os, sys
p = argparse.ArgumentParser()
p.add_argument("--cases", default="capture_data_ptr"); p.add_argument("--json")
p.add_argument("--trials"); p.add_argument("--timeout")
a = p.parse_args()
verdict = os.environ["TB_VERDICT"]
case = {"verdict": verdict, "detail": "stand-in", "seconds": 0.1}
doc = {"schema": 1, "probe": "stale_replay", "probe_version": PROBE_VERSION, "verdict": verdict,
       "cases": {"capture_data_ptr": case}, "env": {"torch": "2.13.0+cpu", "python": "3.11.7"}}
open(a.json, "w").write(json.dumps(doc)) if a.json else print(json.dumps(doc))
sys.exit({"affected": 1, "not_affected": 0}.get(verdict, 125))
"""
RESULTS_KEYS = {"schema", "generated", "headlines", "models", "cases", "runs", "bisections"}


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """A folder with a preinstalled-only matrix; no GPU is visible, whatever the machine has."""
    pytest.importorskip("torch", reason="the probe needs this interpreter to have torch")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("torchbisect.utils.gpus.list_gpus", lambda: [])
    (tmp_path / "matrix.yaml").write_text("preinstalled: true\n")
    return tmp_path


@pytest.fixture
def stand_in(workdir, monkeypatch, fake_probes):
    folder = workdir / "probes"
    folder.mkdir()
    (folder / "stale_replay.py").write_text(STAND_IN)
    fake_probes(folder)
    return lambda verdict: monkeypatch.setenv("TB_VERDICT", verdict)


def _json_out(capsys) -> dict:
    doc = json.loads(capsys.readouterr().out)  # stdout holds the document and nothing else
    assert set(doc) == RESULTS_KEYS
    return doc


def test_probe_exits_like_the_probe_itself(stand_in, capsys):
    for verdict, status in (("affected", 1), ("not_affected", 0), ("inconclusive", 125)):
        stand_in(verdict)
        assert call("probe", "--interpreter", sys.executable, "--json", "-") == status, verdict
        doc = _json_out(capsys)
        assert [r["verdict"] for r in doc["runs"]] == [verdict]


@pytest.mark.slow
def test_probe_with_the_real_probe_and_no_gpu_cannot_tell(workdir, capsys):
    assert (
        call("probe", "--interpreter", sys.executable, "--json", "out/probe.json")
        == Exit.CANNOT_TELL
    )
    doc = json.loads((workdir / "out" / "probe.json").read_text())
    assert set(doc) == RESULTS_KEYS
    [run] = doc["runs"]
    assert run["verdict"] == "skipped" and run["cell"]["channel"] == "preinstalled"
    assert "skipped" in capsys.readouterr().out


def test_matrix_gates_on_affected_only_when_asked(stand_in, capsys):
    stand_in("affected")
    argv = ["matrix", "--interpreter", sys.executable, "--no-report", "--force"]
    assert call(*argv) == Exit.OK  # the default gates on infrastructure failures only
    capsys.readouterr()
    assert call(*argv, "--fail-on", "affected", "--json", "-") == Exit.AFFECTED
    doc = _json_out(capsys)
    assert doc["runs"][0]["verdict"] == "affected"
    assert doc["headlines"][0]["text"] == (
        "2.13.0 affected without a GPU (releases before 2.13.0 were not tested)"
    )
    # a verdict stored by an earlier run counts too: the gate asks about the builds, not the run
    assert (
        call(
            "matrix", "--interpreter", sys.executable, "--no-report", "--fail-on", "affected,infra"
        )
        == Exit.AFFECTED
    )
    stand_in("not_affected")
    assert call(*argv, "--fail-on", "affected,infra") == Exit.OK


def test_matrix_fail_on_takes_only_what_it_knows(workdir, capsys):
    assert call("matrix", "--fail-on", "broken") == Exit.MISTAKE
    assert "--fail-on" in capsys.readouterr().err


def _pick(cells: str = "", skip: str = ""):
    from torchbisect.run.selection import pick

    plan = tuple(
        make_cell(i)
        for i in (
            "stable-2.15.0-cu130-cp312",
            "stable-2.15.0-cu126-cp312",
            "nightly-20261001-cu130-cp312",
            "preinstalled",
        )
    )
    return [
        c.id
        for c in pick(
            plan, keep=cells, skip=skip, shard_spec=None, overlay=False, matrix=Path("m.yaml")
        )
    ]


def test_cells_and_skip_take_glob_patterns():
    assert _pick("stable-*") == ["stable-2.15.0-cu130-cp312", "stable-2.15.0-cu126-cp312"]
    assert _pick("*-cu130-*,preinstalled") == [
        "stable-2.15.0-cu130-cp312",
        "nightly-20261001-cu130-cp312",
        "preinstalled",
    ]
    assert _pick(skip="*cu126*,nightly-*") == ["stable-2.15.0-cu130-cp312", "preinstalled"]
    assert _pick("stable-*", skip="*cu126*") == ["stable-2.15.0-cu130-cp312"]
    with pytest.raises(ConfigError, match=r"--cells: no cell matches stable-2\.3\.\* in the plan"):
        _pick("stable-2.3.*,preinstalled")
    with pytest.raises(ConfigError, match="--skip: no cell matches rc-"):
        _pick(skip="rc-*")


def test_merge_writes_the_merged_runs_as_results_json(tmp_path, capsys):
    from torchbisect.store.db import Store

    for name, cell in (("a", "dev-a"), ("b", "dev-b")):
        with Store(tmp_path / f"{name}.sqlite") as store:
            store.add(make_run(make_cell(cell)))
    out = str(tmp_path / "all.sqlite")
    assert (
        call("merge", out, str(tmp_path / "a.sqlite"), str(tmp_path / "b.sqlite"), "--json", "-")
        == Exit.OK
    )
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert set(doc) == RESULTS_KEYS
    assert sorted(r["cell"]["id"] for r in doc["runs"]) == ["dev-a", "dev-b"]
    assert "2 runs" in captured.err  # the progress lines moved out of the way


def test_version(capsys):
    assert call("--version") == Exit.OK
    assert capsys.readouterr().out.strip() == "torchbisect 0.1.0"


@pytest.mark.parametrize("command", ["matrix", "probe", "bisect", "bench"])
def test_backend_has_the_same_choices_in_every_command(command, capsys):
    assert (
        call(
            command,
            "--backend",
            "podman",
            *(["--good", "1", "--bad", "2"] if command == "bisect" else []),
        )
        == Exit.MISTAKE
    )
    [line] = [x for x in capsys.readouterr().err.splitlines() if "invalid choice" in x]
    choices = line.split("choose from", 1)[1].replace("'", "").strip(" )")
    assert choices.split(", ") == list(BACKENDS)  # argparse quotes them on some Pythons only


@pytest.mark.parametrize("command", ["matrix", "probe", "bench"])
def test_the_interpreter_flag_is_interpreter_and_python_still_works_with_a_note(command, capsys):
    from torchbisect.cli import _parser

    args = _parser(command)[0].parse_args([command, "--interpreter", sys.executable])
    assert args.interpreter == sys.executable
    old = _parser(command)[0].parse_args([command, "--python", sys.executable])
    assert old.interpreter == sys.executable
    assert "--python PATH is now --interpreter PATH" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["matrix", "probe", "bench"])
@pytest.mark.parametrize(
    ("given", "said"),
    [
        ("/nope/python", "/nope/python: no such file"),
        ("no-such-python-here", "no-such-python-here: no such command on PATH"),
    ],
)
def test_an_interpreter_that_is_not_there_is_a_mistake_not_a_python_without_torch(
    command, given, said, capsys
):
    """It said "has no torch: install torch into it" and exited 125 (issue 49, friction 3)."""
    status = call(command, "--interpreter", given)
    line = one_sentence(capsys.readouterr().err, status, Exit.MISTAKE, command=command)
    assert line.endswith(f"--interpreter {said}; give the path of a python (or a name on PATH)")
    assert "no torch" not in line


@pytest.mark.parametrize("command", ["plan", "bisect"])
def test_python_means_a_version_where_it_is_not_deprecated(command, capsys):
    from torchbisect.cli import _parser

    extra = ["--good", "1", "--bad", "2"] if command == "bisect" else []
    args = _parser(command)[0].parse_args([command, "--python", "3.12", *extra])
    assert args.python == "3.12" and not hasattr(args, "interpreter")
    assert capsys.readouterr().err == ""


def test_the_matrix_page_links_the_upstream_report_of_matrix_yaml(stand_in, workdir):
    stand_in("affected")
    (workdir / "matrix.yaml").write_text(
        "preinstalled: true\nreferences:\n"
        "  upstream: https://github.com/pytorch/pytorch/issues/424242\n"
    )
    assert call("matrix", "--interpreter", sys.executable, "--fail-on", "affected") == Exit.AFFECTED
    assert (
        'href="https://github.com/pytorch/pytorch/issues/424242"'
        in (workdir / "reports" / "index.html").read_text()
    )


def _defaults(flag: str) -> dict[str, object]:
    """Each command's default for `flag`, for the commands that have it."""
    found = {}
    for command in COMMANDS:
        parser = argparse.ArgumentParser()
        importlib.import_module(f"torchbisect.commands.{command}").configure(parser)
        if any(f"--{flag}" in action.option_strings for action in parser._actions):
            found[command] = parser.get_default(flag)
    return found


def test_a_path_left_out_means_the_same_file_in_every_command(tmp_path, monkeypatch):
    """What `matrix` stores, `report`, `plan`, `notify` and `bisect` read without being told; the
    page goes where `matrix` puts its logs; every planning command reads matrix.yaml; in a
    project (a folder with a matrix.yaml) all of it is that folder's, elsewhere the per-user data
    folder's; a one-off `probe` writes nothing it is not told to."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "matrix.yaml").write_text("preinstalled: true\n")
    home = Path(os.environ["XDG_DATA_HOME"]) / "torchbisect"
    for where, base in (("project", Path()), (".", home)):
        monkeypatch.chdir(tmp_path / where)
        stores = _defaults("store")
        assert set(stores) >= {"matrix", "probe", "plan", "report", "notify", "bisect"}
        assert stores.pop("probe") is None
        assert set(stores.values()) == {base / "reports" / "results.sqlite"}
        # bench writes reports/bench/ on a GPU machine only; schema's --out is the schema file
        outs = {c: v for c, v in _defaults("out").items() if c not in ("bench", "schema")}
        assert outs.pop("probe") is None
        assert set(outs) >= {"matrix", "report"} and set(outs.values()) == {base / "reports"}
        matrices = _defaults("matrix")
        assert set(matrices) >= {"matrix", "probe", "plan", "report"}
        assert set(matrices.values()) == {base / "matrix.yaml"}


# -- a gate reads a verdict only from a verdict ---------------------------------------------------


def test_torchbisect_failing_is_its_own_status_never_affected(
    stand_in, workdir, capsys, monkeypatch
):
    """A bug after the probes ran (here: printing the summary table breaks) is one sentence
    naming the traceback's file and status FAILED, which no gate reads as "affected"."""
    FAILED = Exit.FAILED  # noqa: N806

    stand_in("affected")

    def broken(*args, **kwargs):
        raise RuntimeError("something nobody expected\nsecond line")

    monkeypatch.setattr("torchbisect.commands.matrix._summary", broken)
    status = call("matrix", "--interpreter", sys.executable, "--no-report", "--fail-on", "affected")
    assert status == FAILED and FAILED not in (0, 1, 2, 3, 4, 5, 125, 130)
    [line] = [x for x in capsys.readouterr().err.splitlines() if "torchbisect" in x]
    assert line.startswith(
        "torchbisect matrix: torchbisect itself failed (RuntimeError: something nobody expected)"
    )
    trace = Path(line.rsplit(" ", 1)[1])
    try:
        text = trace.read_text()
        assert "Traceback (most recent call last)" in text and "_summary" not in line
        assert "RuntimeError: something nobody expected" in text and "matrix" in text
    finally:
        trace.unlink()


OUTPUT_MISTAKES = [
    (["matrix", "--json", "adir"], "--json adir: is a folder"),
    (["matrix", "--out", "afile"], "--out afile: is a file"),
    (["matrix", "--store", "adir"], "--store adir: is a folder"),
    (["matrix", "--workdir", "afile/work"], "afile is a file, not a folder"),
    (["probe", "--json", "adir"], "--json adir: is a folder"),
    (["probe", "--out", "afile/sub"], "afile is a file, not a folder"),
    (["report", "--out", "afile"], "--out afile: is a file"),
    (["plan", "--json", "adir"], "--json adir: is a folder"),
    (["plan", "--offline", "--lock", "adir"], "--lock adir: is a folder"),
    (["matrix", "--lock", "adir"], "--lock adir: is a folder"),
    (["plan", "--offline", "--github-output", "adir"], "--github-output adir: is a folder"),
    (["merge", "adir", "in.sqlite"], "OUT adir: is a folder"),
    (["merge", "all.sqlite", "in.sqlite", "--json", "afile/x.json"], "is a file, not a folder"),
    (["bisect", "--good", "1", "--bad", "2", "--json", "adir"], "--json adir: is a folder"),
    (["bisect", "--good", "1", "--bad", "2", "--markdown", "adir"], "--markdown adir: is a"),
    (["schema", "--out", "adir"], "--out adir: is a folder"),
    (["bench", "--out", "afile"], "--out afile: is a file"),
    (["notify", "--fix", "--summary-out", "adir"], "--summary-out adir: is a folder"),
]


@pytest.mark.parametrize(
    ("argv", "said"), OUTPUT_MISTAKES, ids=lambda v: " ".join(v) if isinstance(v, list) else ""
)
def test_an_output_path_mistake_is_refused_before_any_work(argv, said, stand_in, workdir, capsys):
    (workdir / "adir").mkdir()
    (workdir / "afile").write_text("keep me")
    (workdir / "in.sqlite").write_bytes(b"")
    before = sorted(p.name for p in workdir.iterdir())
    stand_in("affected")
    assert call(*argv) == Exit.MISTAKE
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"torchbisect {argv[0]}: error: ") and said in line, line
    assert sorted(p.name for p in workdir.iterdir()) == before  # no store, no reports/, no lock
    assert (workdir / "afile").read_text() == "keep me" and not any((workdir / "adir").iterdir())


@pytest.fixture
def unwritable(workdir):
    """A folder this user cannot write in: a read-only one of ours, or (as root, who may write
    anywhere else) /proc/sys, which the kernel keeps read-only in a container."""
    if os.geteuid() != 0:
        locked = workdir / "locked"
        locked.mkdir()
        locked.chmod(0o500)
        yield locked
        locked.chmod(0o700)
    elif not os.access("/proc/sys", os.W_OK):
        yield Path("/proc/sys")
    else:
        pytest.skip("root, and /proc/sys is writable: no folder here refuses this user")


@pytest.mark.parametrize(
    "argv",
    [["report", "--out"], ["plan", "--offline", "--json"], ["matrix", "--store"]],
    ids=lambda v: v[0],
)
def test_an_output_folder_that_is_not_writable_is_refused(argv, unwritable, capsys):
    assert call(*argv, str(unwritable / "torchbisect-out" / "x")) == Exit.MISTAKE
    [line] = capsys.readouterr().err.strip().splitlines()
    assert f"the folder {unwritable} is not writable by this user" in line


def _shard(path: Path, *cells: str) -> Path:
    from torchbisect.store.db import Store

    with Store(path) as store:
        for cell in cells:
            store.add(make_run(make_cell(cell)))
    return path


def test_merge_with_a_missing_input_writes_nothing(tmp_path, capsys):
    a = _shard(tmp_path / "a.sqlite", "dev-a")
    out = tmp_path / "site" / "results.sqlite"
    assert call("merge", str(out), str(a), str(tmp_path / "typo.sqlite")) == Exit.MISTAKE
    [line] = capsys.readouterr().err.strip().splitlines()
    assert "typo.sqlite: no such file, so nothing was merged" in line
    assert "--allow-missing" in line
    assert not out.exists() and not out.parent.exists()


def test_merge_with_a_damaged_input_leaves_out_as_it_was(tmp_path, capsys):
    out = _shard(tmp_path / "out.sqlite", "dev-old")
    before = out.read_bytes()
    a = _shard(tmp_path / "a.sqlite", "dev-a")
    damaged = tmp_path / "b.sqlite"
    damaged.write_bytes(b"SQLite format 3\x00" + b"\xff" * 500)
    assert call("merge", str(out), str(a), str(damaged)) == Exit.MISTAKE
    assert "b.sqlite" in capsys.readouterr().err
    assert out.read_bytes() == before  # a.sqlite was read, but OUT is written only at the end


def test_merge_allows_a_missing_input_only_when_named(tmp_path, capsys):
    a = _shard(tmp_path / "a.sqlite", "dev-a")
    previous = tmp_path / "previous" / "results.sqlite"
    out = tmp_path / "site.sqlite"
    assert (
        call("merge", str(out), str(previous), str(a), "--allow-missing", str(previous)) == Exit.OK
    )
    said = capsys.readouterr().out
    assert "does not exist, which --allow-missing allows" in said and f"{out}: 1 runs" in said
    assert call("merge", str(out), str(a), "--allow-missing", str(previous)) == Exit.MISTAKE
    assert "not among the inputs" in capsys.readouterr().err


GPU_COMMANDS = [
    ["matrix", "--interpreter", sys.executable],
    ["probe"],
    ["bisect", "--good", "1", "--bad", "2"],
]


@pytest.mark.parametrize("argv", GPU_COMMANDS, ids=lambda v: v[0])
def test_require_gpu_without_a_gpu_exits_3_before_anything(
    argv, stand_in, workdir, capsys, monkeypatch
):
    assert call(*argv, "--require-gpu") == Exit.NO_VERDICT
    [line] = capsys.readouterr().err.strip().splitlines()
    assert "no GPU is visible (nvidia-smi lists none) and --require-gpu is given" in line
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert call(*argv) == Exit.NO_VERDICT
    assert (
        "CUDA_VISIBLE_DEVICES='' shows none) and GITHUB_ACTIONS=true implies --require-gpu"
        in capsys.readouterr().err
    )
    assert not (workdir / "reports").exists()


def test_allow_no_gpu_is_the_way_around_the_gpu_gate(stand_in, workdir, monkeypatch):
    stand_in("affected")
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    assert call("probe", "--require-gpu", "--allow-no-gpu") == Exit.AFFECTED
    assert (
        call(
            "matrix",
            "--interpreter",
            sys.executable,
            "--allow-no-gpu",
            "--require-gpu",
            "--backend",
            "current",
            "--no-report",
            "--fail-on",
            "affected",
        )
        == Exit.AFFECTED
    )


def test_a_script_bisection_needs_no_gpu_under_github_actions(workdir, monkeypatch, capsys):
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    (workdir / "index").mkdir()
    status = call(
        "bisect",
        "--good",
        "2025-08-01",
        "--bad",
        "2025-08-03",
        "--script",
        "true",
        "--index-url",
        str(workdir / "index"),
        "--no-github",
    )
    err = capsys.readouterr().err
    assert status != Exit.NO_VERDICT and "GPU" not in err, err


def test_a_command_that_cannot_even_load_is_torchbisect_failing(monkeypatch, capsys):
    def broken(name, *args, **kwargs):
        raise ImportError(f"No module named {name!r} (a broken install)")

    monkeypatch.setattr("importlib.import_module", broken)
    assert call("report") == Exit.FAILED
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("torchbisect report: torchbisect itself failed (ImportError: ")
    Path(line.rsplit(" ", 1)[1]).unlink()


def test_a_file_appended_to_needs_no_writable_folder_around_it(tmp_path, monkeypatch):
    """$GITHUB_OUTPUT and $GITHUB_STEP_SUMMARY are files the runner made, in a folder the job's
    user may not write (act's is read-only for its runner user; the rehearsal meets it for real):
    appending to them is allowed; a file written whole there still is refused (it is written
    beside itself and renamed).  The folder is denied to this user through os.access, since root
    may write anywhere."""
    from torchbisect.cli.options import check_output

    given = tmp_path / "outputcmd.txt"
    given.write_text("")
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: Path(p) != tmp_path and real_access(p, mode))
    check_output(given, "--github-output", "append")
    with pytest.raises(ConfigError, match="the folder .* is not writable by this user"):
        check_output(given, "--json", "file")
    with pytest.raises(ConfigError, match="the folder .* is not writable by this user"):
        check_output(tmp_path / "new.txt", "--github-output", "append")
