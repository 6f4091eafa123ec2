"""Round 6's hostile-input sweep: what each command did with odd flag values and files that
earlier rounds had not tried, and now does.

- A name longer than the file system's limit (255 bytes) or a symbolic link that loops reached
  `open()`, `stat()` or `Path.resolve()` deep inside a command and crashed it (exit 250); now
  one sentence names the flag (or the argument) that gave the path, exit 2.
- Flags checked as the files' keys are: `--driver`, `--python`, `--cuda`, `probe --cases`
  (each was taken as given and failed later, blaming another flag or the infrastructure).
- A runners.yaml or a JSON export of the wrong shape, and a `--store` that is a folder or a
  FIFO, are said as what they are.
- An argument in bytes that are not UTF-8 never ends in Python's status 1 ("affected").
"""

from __future__ import annotations

import os

import pytest
from helpers.cli import call, invoke, one_sentence

from torchbisect.exits import Exit

LONG = "x" * 300  # over NAME_MAX (255) on every file system Linux runs on


@pytest.fixture
def project(tmp_path):
    """A folder with torchbisect's default matrix.yaml and a pair of links that point at each
    other (`loop`)."""
    assert invoke("init", cwd=tmp_path).returncode == Exit.OK
    os.symlink("loop2", tmp_path / "loop")
    os.symlink("loop", tmp_path / "loop2")
    return tmp_path


@pytest.mark.parametrize(
    ("args", "named", "said"),
    [
        (["--matrix", LONG], f"--matrix {LONG}", "too long"),
        (["--lock", LONG], f"--lock {LONG}", "too long"),
        (["--json", f"{LONG}/plan.json"], f"--json {LONG}/plan.json", "too long"),
        (["--previous-lock", LONG], f"--previous-lock {LONG}", "too long"),
        (["--github-output", LONG], f"--github-output {LONG}", "too long"),
        (["--runners", LONG], f"--runners {LONG}", "too long"),
        (["--matrix", "loop"], "--matrix loop", "links loop"),
        (["--runners", "loop"], "--runners loop", "links loop"),
        ([f"--matrix={LONG}"], f"--matrix {LONG}", "too long"),
    ],
)
def test_a_path_too_long_or_looping_is_one_sentence_naming_its_flag(project, args, named, said):
    done = invoke("plan", "--offline", *args, cwd=project)
    line = one_sentence(done.stderr, done.returncode, Exit.MISTAKE, command="plan")
    assert f"error: {named}: " in line, line
    assert said in line and "give another path" in line, line


def test_a_merge_input_that_is_a_link_loop_is_refused_before_anything_is_written(project):
    done = invoke("merge", "merged.sqlite", "loop", cwd=project)
    line = one_sentence(done.stderr, done.returncode, Exit.MISTAKE, command="merge")
    assert "loop: is a link to nothing" in line and "nothing was merged" in line, line
    assert not (project / "merged.sqlite").exists()


@pytest.mark.parametrize("text", ["- name: H200\n", "H200\n"])
def test_a_runners_file_that_is_not_a_mapping_names_its_own_key(project, text):
    """runners.yaml's top level as a list or a word was told matrix.yaml's keys (`stable` and
    `nightly`), which a runners file has no place for."""
    (project / "runners.yaml").write_text(text)
    done = invoke("plan", "--offline", "--runners", "runners.yaml", cwd=project)
    line = one_sentence(done.stderr, done.returncode, Exit.MISTAKE, command="plan")
    assert "runners.yaml, line 1: expected a mapping with the key `kinds`" in line, line
    assert "stable" not in line, line


@pytest.mark.parametrize("command", ["plan", "matrix", "probe"])
@pytest.mark.parametrize("value", ["2.x", "", "nan", "-1", "r580"])
def test_a_driver_that_is_no_version_is_refused_naming_the_flag(project, command, value):
    """`--driver 2.x` was taken as a driver that supports no CUDA at all (`cuda: auto` then had
    no tag to choose), and `matrix`/`probe` ran on with it; runners.yaml's `driver:` is checked."""
    done = invoke(command, "--offline", "--driver", value, cwd=project)
    line = one_sentence(done.stderr, done.returncode, Exit.MISTAKE, command=command)
    assert "argument --driver: expected a driver version such as 580.95.05" in line, line


@pytest.mark.parametrize("value", ['"x"', "null", "{}", "5"])
@pytest.mark.parametrize("key", ["runs", "bisections", "attendance"])
def test_an_export_whose_list_is_not_a_list_is_no_export(tmp_path, key, value):
    """`{"schema": 1, "runs": "x"}` was read as one damaged run, said as Python's
    "AttributeError: 'str' object has no attribute 'get'"."""
    (tmp_path / "shard.json").write_text(f'{{"schema": 1, "{key}": {value}}}')
    done = invoke("merge", "merged.sqlite", "shard.json", cwd=tmp_path)
    line = one_sentence(done.stderr, done.returncode, Exit.MISTAKE, command="merge")
    assert "shard.json is not a torchbisect export" in line, line
    assert f'("{key}" is not a list)' in line, line
    assert "Error" not in line, line
    assert not (tmp_path / "merged.sqlite").exists()


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["bisect", "--good", "2.5.0", "--bad", "2.6.0", "--python", "2.x"], "--python"),
        (["bisect", "--good", "2.5.0", "--bad", "2.6.0", "--python", ""], "--python"),
        (["bisect", "--good", "2.5.0", "--bad", "2.6.0", "--cuda", "130"], "--cuda"),
        (["bisect", "--good", "2.5.0", "--bad", "2.6.0", "--cuda", "12.6"], "--cuda"),
        (["plan", "--offline", "--python", "3"], "--python"),
    ],
)
def test_a_python_or_cuda_that_is_no_tag_is_refused_naming_the_flag(project, args, flag):
    """`bisect --python 2.x` reached the index and blamed the wrong flag: "--good 2.5.0 is not
    on the index for cu130 / Python 2.x"; matrix.yaml's `python:` and `cuda:` were checked."""
    (project / "wheels").mkdir()  # an empty local index: nothing is fetched
    local = ["--index-url", "wheels", "--no-github"] if args[0] == "bisect" else []
    done = invoke(*args, *local, cwd=project)
    line = one_sentence(done.stderr, done.returncode, Exit.MISTAKE, command=args[0])
    assert f"argument {flag}: expected a " in line, line
    assert "--good" not in line, line


NOT_UTF8 = os.fsdecode(b"caf\xe9\xff")  # a file name of Latin-1 bytes, as Python hands it over


def test_a_script_named_in_bytes_that_are_not_utf8_is_one_sentence(project):
    """`bisect --script` of such a name crashed hashing it, and the crash's own report then
    crashed writing the command line: Python's exit status 1, which says "affected"."""
    (project / "wheels").mkdir()
    args = ["--good", "2.5.0", "--bad", "2.6.0", "--index-url", "wheels", "--no-github"]
    done = invoke("bisect", *args, "--script", NOT_UTF8, cwd=project)
    line = one_sentence(done.stderr, done.returncode, Exit.MISTAKE, command="bisect")
    assert "--script 'caf\\udce9\\udcff' holds bytes that are not UTF-8 text" in line, line


def test_a_crash_with_an_argument_that_is_not_utf8_is_still_status_250(
    tmp_path, monkeypatch, capsys
):
    """The report of torchbisect's own failure wrote the command line as strict UTF-8, so an
    argument of other bytes made a second crash, out of the catcher: exit 1, "affected"."""
    from torchbisect.commands import schema

    def broken(args: object) -> int:
        raise RuntimeError("a bug")

    monkeypatch.setattr(schema, "run", broken)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)
    monkeypatch.chdir(tmp_path)
    assert call("schema", "--out", f"{NOT_UTF8}.json") == Exit.FAILED
    err = capsys.readouterr().err
    assert "torchbisect itself failed (RuntimeError: a bug)" in err and "Traceback" not in err
    [kept] = tmp_path.glob("torchbisect-schema-*.traceback.txt")
    assert "caf\\udce9\\udcff.json" in kept.read_text(encoding="utf-8")


@pytest.mark.parametrize("command", ["report", "notify"])
@pytest.mark.parametrize(("name", "said"), [("folder", "is a folder"), ("fifo", "a FIFO")])
def test_a_store_that_is_a_folder_or_a_fifo_is_said_as_such(tmp_path, command, name, said):
    """`report --store DIR` said "no result store at DIR: run `torchbisect matrix` first", as
    if nothing were there; running the matrix would not have helped."""
    (tmp_path / "folder").mkdir()
    os.mkfifo(tmp_path / "fifo")
    extra = ["--fix", "--repo", "a/b"] if command == "notify" else []
    done = invoke(command, *extra, "--store", name, cwd=tmp_path)
    line = one_sentence(done.stderr, done.returncode, Exit.MISTAKE, command=command)
    assert f"--store {name}: " in line and said in line and "not a result store" in line, line
    assert "torchbisect matrix" not in line, line


@pytest.mark.parametrize("cases", ["nan", "capture_write,capture_wrte"])
def test_a_case_the_probe_does_not_declare_is_a_mistake_not_an_infrastructure_failure(
    project, cases
):
    """`probe --cases nan` ran the probe, which exited 128 on the unknown name: "infrastructure
    failure", status 3, with the probe's own list of cases buried in the line."""
    done = invoke("probe", "--offline", "--backend", "current", "--cases", cases, cwd=project)
    line = one_sentence(done.stderr, done.returncode, Exit.MISTAKE, command="probe")
    unknown = cases.rsplit(",", 1)[-1]
    assert f"--cases {cases}: {unknown} is not a case of the probe stale_replay" in line, line
    assert "choose from capture_data_ptr, capture_write," in line, line


@pytest.mark.parametrize("absolute", [False, True], ids=["relative", "absolute"])
def test_a_store_that_is_a_link_to_nothing_is_not_created_through_it(tmp_path, absolute):
    """`merge OUT` with OUT a link to nothing had SQLite create the file where it points, folders
    and all (the sweep made /nonexistent/x).  A link to a store that exists stays that store
    (test_lock_paths).  The absolute target lies in a folder of this test's own: a machine may
    have a /nonexistent of its own (CI's had one), which says nothing about this tool."""
    from torchbisect.errors import ConfigError
    from torchbisect.store.db import Store

    with Store(tmp_path / "input.sqlite"):
        pass
    missing = tmp_path / "elsewhere"
    target = str(missing / "x.sqlite") if absolute else "elsewhere/x.sqlite"
    os.symlink(target, tmp_path / "out.sqlite")
    done = invoke("merge", "out.sqlite", "input.sqlite", cwd=tmp_path)
    line = one_sentence(done.stderr, done.returncode, Exit.MISTAKE, command="merge")
    assert f"out.sqlite is a symbolic link to {target}, which does not exist" in line, line
    assert not missing.exists()
    with pytest.raises(ConfigError, match="does not create a store through a link"):
        Store(tmp_path / "out.sqlite")  # matrix, probe, bisect, report open it so too


@pytest.mark.parametrize(
    ("command", "flag"),
    [
        (["matrix"], "--out"),
        (["matrix"], "--workdir"),
        (["probe"], "--out"),
        (["report"], "--store"),
        (["bisect", "--good", "2.5.0", "--bad", "2.6.0"], "--index-url"),
    ],
)
def test_an_empty_value_is_refused_not_read_as_the_current_folder_or_a_default(
    tmp_path, command, flag
):
    """`--out "$DIR"` with DIR unset wrote the pages into the current folder, and `--index-url
    "$MIRROR"` with MIRROR unset went to pytorch's index, without a word."""
    done = invoke(*command, f"{flag}=", cwd=tmp_path)
    line = one_sentence(done.stderr, done.returncode, Exit.MISTAKE, command=command[0])
    assert f"argument {flag}: is empty" in line, line
    assert os.listdir(tmp_path) == []
