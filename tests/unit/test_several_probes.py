"""Several probes (several regressions) in one matrix.yaml: `probes:` names them with their own
settings, an entry's `probe:` picks among them, every build is planned once per probe, and a
bad probe is one sentence naming matrix.yaml's line (exit 2)."""

from __future__ import annotations

import dataclasses
from datetime import date
from pathlib import Path

import pytest
from helpers import REPO
from helpers.cli import call

from torchbisect.config.matrix import load_matrix
from torchbisect.exits import Exit
from torchbisect.plan.resolve import build_plan

CUMSUM = REPO / "probes" / "cumsum_64bit.py"
SHIPPED = str(REPO / "probes")


@pytest.fixture
def probes(fake_probes, tmp_path) -> Path:
    """A probes folder with the stand-in stale_replay and the real cumsum_64bit."""
    folder = fake_probes(tmp_path / "probes")
    folder.mkdir()
    (folder / "stale_replay.py").write_bytes(
        (REPO / "tests/helpers/probes/stale_replay.py").read_bytes()
    )
    (folder / "cumsum_64bit.py").write_bytes(CUMSUM.read_bytes())
    return folder


def matrix(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "matrix.yaml"
    path.write_text(text)
    return path


def plan(path: Path):
    return build_plan(
        load_matrix(path),
        lock=None,
        python="3.12",
        platform="linux_x86_64",
        driver=None,
        today=date(2026, 12, 1),
        offline=True,
    )


def cells(path: Path) -> list[tuple[str, str, float, int | None, tuple]]:
    return [(c.id, c.probe, c.timeout, c.trials, c.env) for c in plan(path).cells]


def test_a_matrix_without_probes_reads_as_before(probes, tmp_path):
    path = matrix(tmp_path, "defaults: {probe: stale_replay, trials: 20}\npreinstalled: true\n")
    assert cells(path) == [("preinstalled", "stale_replay", 900.0, 20, ())]
    path = matrix(tmp_path, "preinstalled: true\n")
    assert cells(path) == [("preinstalled", "stale_replay", 900.0, None, ())]


def test_every_build_is_probed_by_every_probe_each_with_its_settings(probes, tmp_path):
    path = matrix(
        tmp_path,
        (
            "defaults: {trials: 20, timeout: 900, env: {A: '1'}}\n"
            "probes:\n"
            "  stale_replay:\n"
            "  cumsum_64bit: {timeout: 300, env: {B: '2'}}\n"
            "preinstalled: {timeout: 1200}\n"
        ),
    )
    assert cells(path) == [
        ("preinstalled", "stale_replay", 1200.0, 20, (("A", "1"),)),
        ("preinstalled", "cumsum_64bit", 300.0, None, (("A", "1"), ("B", "2"))),
    ]  # no trials


def test_an_entry_picks_among_the_probes(probes, tmp_path):
    path = matrix(
        tmp_path,
        (
            "defaults: {cases: [capture_data_ptr]}\n"
            "probes: {stale_replay: {}, cumsum_64bit: {}}\n"
            "preinstalled: {probe: cumsum_64bit}\n"
        ),
    )
    (cell,) = plan(path).cells
    # the script's one case, not stale_replay's: its runs are the ones a bisection reuses
    assert (cell.probe, cell.cases) == ("cumsum_64bit", ())
    path = matrix(tmp_path, "preinstalled: {probe: [stale_replay, cumsum_64bit]}\n")
    assert [c.probe for c in plan(path).cells] == ["stale_replay", "cumsum_64bit"]


def test_a_matrix_naming_no_probe_runs_the_shipped_default(fake_probes, tmp_path):
    # the user's folder holding one script does not make it the default: matrix.yaml names it
    folder = fake_probes(tmp_path / "probes")
    folder.mkdir()
    (folder / "mine.py").write_text("import sys\n")
    assert [c.probe for c in plan(matrix(tmp_path, "preinstalled: true\n")).cells] == [
        "stale_replay"
    ]
    assert [c.probe for c in plan(matrix(tmp_path, "preinstalled: {probe: mine}\n")).cells] == [
        "mine"
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "preinstalled: {probe: nothere}\n",
            "line 1, key `preinstalled.probe`: probe 'nothere' not found: no nothere.py in the "
            "probes "
            "folders searched ({probes} (beside matrix.yaml); {shipped} (shipped with "
            "torchbisect)); "
            "put NAME.py in a `probes/` folder beside matrix.yaml, or name a folder of them in "
            "TORCHBISECT_PROBES (several separated by ':'); the probes found: cumsum_64bit, "
            "stale_replay, unparsable, wrong_type",
        ),
        (
            "probes:\n  cumsum_64bit:\n  unparsable: {}\npreinstalled: true\n",
            "line 3, key `probes.unparsable`: {probes}/unparsable.py:2: the probe is not a Python "
            "file "
            "this tool can read (invalid syntax); fix it or choose another probe",
        ),
        (
            "defaults:\n  trials: 3\n  probe: [cumsum_64bit, wrong_type]\npreinstalled: true\n",
            "line 3, key `defaults.probe`: {probes}/wrong_type.py:1: UPSTREAM_ISSUE must be a "
            "string "
            "literal; the tool reads it without running the probe",
        ),
        (
            "probes: {cumsum_64bit: {}}\ndefaults: {probe: stale_replay}\npreinstalled: true\n",
            "line 2, key `defaults.probe`: probe 'stale_replay' is not among `probes:` "
            "(cumsum_64bit); "
            "list it there (`stale_replay: {}` runs it with the defaults) or pick one of those",
        ),
        (
            "preinstalled:\n  probe: []\n",
            "line 2, key `preinstalled.probe`: expected a probe's name or a list of them, got an "
            "empty "
            "list",
        ),
        (
            "preinstalled:\n  probe: [cumsum_64bit, 7]\n",
            "line 2, key `preinstalled.probe`: expected a name of letters, digits, '.', '_' or "
            "'-', "
            "got 7 (put it in quotes: YAML reads it as a number)",
        ),
        (
            "preinstalled:\n  probe: [cumsum_64bit, ../evil]\n",
            "line 2, key `preinstalled.probe`: expected a list of probe names (a name of letters, "
            "digits, '.', '_' or '-'), got '../evil'",
        ),
        (
            "probes:\n  cumsum_64bit: {timeot: 3}\npreinstalled: true\n",
            "line 2, key `probes.cumsum_64bit.timeot`: unknown key; did you mean `timeout`?",
        ),
    ],
)
def test_a_bad_probe_is_one_sentence_naming_the_matrix_line(
    probes, tmp_path, capsys, text, message
):
    (probes / "unparsable.py").write_text('"""t"""\ndef (:\n')
    (probes / "wrong_type.py").write_text("UPSTREAM_ISSUE = 143486\n")
    path = matrix(tmp_path, text)
    assert call("plan", "--matrix", str(path), "--offline") == Exit.MISTAKE
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (
        f"torchbisect plan: error: {path}, "
        f"{message.replace('{probes}', str(probes)).replace('{shipped}', SHIPPED)}\n"
    )


# --- one build, two probes: two runs that never stand in for each other ---------------------------


def two_probes_of_one_build():
    from helpers import make_cell

    lazy = make_cell("stable-2.15.0-cu132-cp312")
    return lazy, dataclasses.replace(lazy, probe="cumsum_64bit", cases=())


def test_the_store_keeps_each_probes_latest_run_of_a_build(store):
    from helpers import make_run

    lazy, cumsum = two_probes_of_one_build()
    store.add(make_run(lazy, verdict="affected", started="2026-12-01T10:00:00+00:00"))
    store.add(
        make_run(
            cumsum,
            verdict="not_affected",
            started="2026-12-01T11:00:00+00:00",
            probe_version="1+cumsum",
        )
    )
    latest = store.latest()
    assert [(r.cell.id, r.cell.probe, r.verdict.value) for r in latest] == [
        ("stable-2.15.0-cu132-cp312", "cumsum_64bit", "not_affected"),
        ("stable-2.15.0-cu132-cp312", "stale_replay", "affected"),
    ]
    # neither answers for the other, whatever the store holds
    for asked, other in ((lazy, "1+cumsum"), (cumsum, "1+abc")):
        assert (
            store.find_ok(
                asked,
                wheel_sha256=asked.sha256,
                probe_version=other,
                gpu="NVIDIA H200",
                driver="580.159.04",
            )
            is None
        )


def test_a_run_of_both_probes_stores_two_runs_with_two_logs(store, tmp_path):
    from helpers import ScriptedBackend

    from torchbisect.run.progress import summary_table
    from torchbisect.run.schedule import run_cells

    cells = two_probes_of_one_build()
    runs = run_cells(cells, ScriptedBackend(), store=store, gpus=[None], logs_dir=tmp_path)
    assert sorted(r.cell.probe for r in store.runs()) == ["cumsum_64bit", "stale_replay"]
    assert sorted(p.name for p in tmp_path.glob("*.log")) == [
        "stable-2.15.0-cu132-cp312.cumsum_64bit.log",
        "stable-2.15.0-cu132-cp312.log",
    ]
    rows = [str(cell) for cell in summary_table(runs).columns[0].cells]
    assert rows == ["stable-2.15.0-cu132-cp312.cumsum_64bit", "stable-2.15.0-cu132-cp312"]


def test_the_summary_lists_a_channels_builds_oldest_first_by_version():
    """The ids' letters put stable-2.13.0 before stable-2.9.0: a reader took the table's last
    row for the newest release."""
    from helpers import make_cell, make_run

    from torchbisect.model import Channel
    from torchbisect.run.progress import summary_table

    def run(version: str, channel: Channel = Channel.STABLE):
        cell_id = f"{channel.value}-{version}-cpu-cp311"
        return make_run(make_cell(cell_id, channel=channel, version=version))

    runs = [run("2.13.0"), run("2.9.0"), run("2.10.0"), run("2.99.0+cpu", Channel.DEV)]
    rows = [str(cell) for cell in summary_table(runs).columns[0].cells]
    assert rows == [
        "stable-2.9.0-cpu-cp311",
        "stable-2.10.0-cpu-cp311",
        "stable-2.13.0-cpu-cp311",
        "dev-2.99.0+cpu-cpu-cp311",
    ]


def test_plan_lists_a_build_once_per_probe(probes, tmp_path, capsys):
    path = matrix(tmp_path, "probes: {stale_replay: {}, cumsum_64bit: {}}\npreinstalled: true\n")
    assert (
        call("plan", "--matrix", str(path), "--offline", "--store", str(tmp_path / "none.sqlite"))
        == Exit.OK
    )
    rows = [line.split()[0] for line in capsys.readouterr().out.splitlines()[1:3]]
    assert rows == ["preinstalled", "preinstalled.cumsum_64bit"]


def test_probe_asks_which_probe_when_the_matrix_names_several(probes, tmp_path, capsys):
    path = matrix(tmp_path, "probes: {stale_replay: {}, cumsum_64bit: {}}\npreinstalled: true\n")
    assert call("probe", "preinstalled", "--matrix", str(path)) == Exit.MISTAKE
    # the stand-in stale_replay.py beside the matrix is said first (a note), then the error
    assert capsys.readouterr().err.splitlines(keepends=True)[-1] == (
        f"torchbisect probe: error: {path} probes preinstalled with stale_replay, cumsum_64bit: "
        "pick one with --probe NAME, or name the cell with its probe "
        "(preinstalled.stale_replay, preinstalled.cumsum_64bit)\n"
    )
