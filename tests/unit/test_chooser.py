"""One chooser of "the file that is build V on this runner" (index/choose.py), checked through
what each path plans, locks or bisects from a local index served by the test (PEP 503 HTML and
PEP 691 JSON): re-spins (-1, -2, -9, -10), labelled and unlabelled twins, yanked files, wheels for
other Pythons, manylinux_2_28 next to manylinux2014 on an older glibc; and the CUDA of a build read
from the real METADATA of PyPI releases of each CUDA generation (tests/data/index/metadata/)."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pytest
from helpers import DATA
from helpers.indexserver import fake_wheel, serve

from torchbisect.bisect.run import BisectOptions, candidates
from torchbisect.config.matrix import load_matrix
from torchbisect.errors import ConfigError
from torchbisect.index.choose import Chooser
from torchbisect.index.cuda import UNKNOWN, pinned_cuda
from torchbisect.index.fetch import fetch_wheels
from torchbisect.index.tags import compatible
from torchbisect.model import Channel
from torchbisect.plan.lock import Lock
from torchbisect.plan.resolve import build_plan

METADATA = DATA / "index" / "metadata"
REAL = {  # a real METADATA of each CUDA generation → the CUDA its runtime pin says
    "torch-2.3.0-cp311-cp311-manylinux1_x86_64.whl": "cu121",
    "torch-2.5.0-cp311-cp311-manylinux1_x86_64.whl": "cu124",
    "torch-2.7.1-cp311-cp311-manylinux_2_28_x86_64.whl": "cu126",
    "torch-2.9.0-cp312-cp312-manylinux_2_28_x86_64.whl": "cu128",
    "torch-2.10.0-3-cp311-cp311-manylinux_2_28_x86_64.whl": "cu128",
    "torch-2.11.0-cp311-cp311-manylinux_2_28_x86_64.whl": "cu130",
}
M28, M2014 = "manylinux_2_28_x86_64", "manylinux2014_x86_64"
OLD_GLIBC = "manylinux_2_17_x86_64"  # a runner with glibc 2.17


def _whl(version: str, *, build: str = "", python: str = "cp311", platform: str = M2014) -> str:
    return f"torch-{version}{'-' + build if build else ''}-{python}-{python}-{platform}.whl"


# (file, yanked reason or None, the real METADATA served beside it), in page order
FILES = [
    (
        _whl("2.3.0", platform="manylinux1_x86_64"),
        None,
        "torch-2.3.0-cp311-cp311-manylinux1_x86_64.whl",
    ),
    (
        _whl("2.5.0", platform="manylinux1_x86_64"),
        None,
        "torch-2.5.0-cp311-cp311-manylinux1_x86_64.whl",
    ),
    (_whl("2.7.1+cu124"), "broken CUDA graphs", None),
    (_whl("2.9.0+cu124", build="1"), "", None),  # a yanked re-spin: the original stands
    (_whl("2.9.0+cu124"), None, None),
    # an unlabelled twin listed first: the label wins, as `pip install torch==2.10.0` picks it
    (_whl("2.10.0"), None, "torch-2.10.0-3-cp311-cp311-manylinux_2_28_x86_64.whl"),
    (_whl("2.10.0+cu124"), None, None),
    (_whl("2.10.0+cu124", build="1"), None, None),
    (_whl("2.10.0+cu124", build="2"), None, None),
    (_whl("2.10.0+cu124", build="10"), None, None),
    (_whl("2.10.0+cu124", build="9"), None, None),
    (_whl("2.11.0+cu124", python="cp312"), None, None),  # another Python's only
    (_whl("2.12.0+cu124", platform=M28), None, None),
    (_whl("2.12.0+cu124"), None, None),  # manylinux2014
    (_whl("2.13.0+cu124", platform=M28), None, None),  # manylinux_2_28 only
]


def write_index(root: Path, *, json_page: bool) -> None:
    """`root/simple/torch/` as HTML (data-yanked) or PEP 691 JSON (yanked), files beside it."""
    page = root / "simple" / "torch"
    page.mkdir(parents=True)
    for name, _, meta in FILES:
        (page / name).write_bytes(fake_wheel(name))
        if meta:
            (page / f"{name}.metadata").write_text((METADATA / f"{meta}.metadata").read_text())
    if json_page:
        files = [
            {"filename": n, "url": n.replace("+", "%2B"), "hashes": {}}
            | ({"yanked": y or True} if y is not None else {})
            for n, y, _ in FILES
        ]
        (page / "index.json").write_text(
            json.dumps({"meta": {"api-version": "1.1"}, "name": "torch", "files": files})
        )
        (page / "index.html").write_text("<html><body>torch</body></html>")  # never read
        return
    links = [
        f'<a href="{n.replace("+", "%2B")}"'
        + (f' data-yanked="{y}"' if y is not None else "")
        + f">{n}</a><br/>"
        for n, y, _ in FILES
    ]
    (page / "index.html").write_text(
        "<!DOCTYPE html>\n<html><body>\n" + "\n".join(links) + "\n</body></html>\n"
    )


@pytest.fixture(params=["html", "json"])
def index(request, tmp_path):
    write_index(tmp_path / "site", json_page=request.param == "json")
    with serve(tmp_path / "site") as url:
        yield f"{url}/simple/"


def name(url: str) -> str:
    return url.rsplit("/", 1)[-1].replace("%2B", "+")


@pytest.mark.parametrize(("fixture", "cuda"), sorted(REAL.items()))
def test_a_builds_cuda_is_the_runtime_its_real_metadata_pins(fixture, cuda):
    assert pinned_cuda((METADATA / f"{fixture}.metadata").read_text()) == cuda


def test_a_runtime_pin_of_thousands_of_digits_is_no_cuda():
    """int() refuses 5,000 digits: a hostile .metadata ended the command with status 250."""
    text = (
        "Metadata-Version: 2.1\nName: torch\nVersion: 2.9.0\n"
        f"Requires-Dist: nvidia-cuda-runtime-cu12=={'1' * 5000}.8.90\n"
    )
    assert pinned_cuda(text) is None


def test_metadata_that_pins_no_cuda_runtime_says_unknown():
    from torchbisect.index.choose import Unsure
    from torchbisect.index.metadata import SIDE_FILE, Found

    chooser = Chooser(
        read=lambda _: Found(
            text="Metadata-Version: 2.1\nName: torch\nVersion: 2.3.0\n", source=SIDE_FILE
        )
    )
    wheels = fetch_wheels_of([_whl("2.3.0")])
    assert chooser.cuda_of(wheels[0]) == UNKNOWN
    picked = chooser.pick(wheels, cuda="cu121", python="3.11")
    # the file pip would install stays that version's build, of a CUDA not known: never missing
    assert picked == Unsure(
        wheel=wheels[0],
        why=(
            f"CUDA not known: its wheel {_whl('2.3.0')} has no CUDA label, and its metadata (the "
            ".metadata file the index serves beside it) pins no CUDA runtime"
        ),
    )


def fetch_wheels_of(names: list[str]):
    from torchbisect.index.pages import Wheel

    return [Wheel.parse(n, f"https://example.invalid/{n}") for n in names]


def test_the_chooser_takes_the_file_pip_installs(index):
    listed = fetch_wheels(index)
    builds = Chooser().builds(listed, cuda="cu124", python="3.11", platform=OLD_GLIBC)
    assert {v: w.filename for v, w in builds.chosen.items()} == {
        "2.5.0": _whl("2.5.0", platform="manylinux1_x86_64"),  # unlabelled, its metadata: cu124
        "2.7.1": _whl("2.7.1+cu124"),  # only a yanked file: taken, as pip does for ==
        "2.9.0": _whl("2.9.0+cu124"),  # the yanked re-spin is passed over
        "2.10.0": _whl("2.10.0+cu124", build="10"),  # -10 after -9: a number, not text
        "2.12.0": _whl("2.12.0+cu124"),  # glibc 2.17: manylinux2014, not manylinux_2_28
    }
    assert builds.chosen["2.7.1"].yanked == "broken CUDA graphs"
    assert builds.chosen["2.9.0"].yanked is None and builds.chosen["2.10.0"].build == (10, "")
    assert builds.skipped == {
        "2.3.0": (
            f"its wheel {_whl('2.3.0', platform='manylinux1_x86_64')} is a cu121 build "
            "(its metadata pins that CUDA)"
        ),
        "2.11.0": f"no cp311 wheel for {OLD_GLIBC}",
        "2.13.0": f"no cp311 wheel for {OLD_GLIBC}",
    }
    newer = Chooser().builds(listed, cuda="cu124", python="3.11", platform=M28)
    # glibc 2.28: the runner's most preferred tag
    assert newer.chosen["2.12.0"].filename == _whl("2.12.0+cu124", platform=M28)
    assert newer.chosen["2.13.0"].filename == _whl("2.13.0+cu124", platform=M28)


def test_yanked_files_are_read_from_both_page_kinds(index):
    yanked = {w.filename: w.yanked for w in fetch_wheels(index) if w.yanked is not None}
    assert yanked == {_whl("2.7.1+cu124"): "broken CUDA graphs", _whl("2.9.0+cu124", build="1"): ""}


def test_manylinux_glibc_is_compared_with_the_runners():
    wheels = fetch_wheels_of([_whl("2.12.0+cu124", platform=M28), _whl("2.12.0+cu124")])
    assert [w.filename for w in compatible(wheels, python="3.11", platform=OLD_GLIBC)] == [
        _whl("2.12.0+cu124")
    ]
    assert len(compatible(wheels, python="3.11", platform="manylinux2014_x86_64")) == 1
    assert len(compatible(wheels, python="3.11", platform="manylinux_2_28_x86_64")) == 2
    assert len(compatible(wheels, python="3.11", platform="linux_x86_64")) == 2  # glibc unsaid


def plan(
    index: str, tmp_path: Path, versions: str, *, cuda: str = "cu124", platform: str = OLD_GLIBC
):
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(
        f"stable:\n  versions: [{versions}]\n  cuda: {cuda}\nindexes:\n  stable: {index}\n"
    )
    return build_plan(
        load_matrix(matrix),
        lock=None,
        python="3.11",
        platform=platform,
        driver="580.65.06",
        today=date(2026, 12, 4),
    )


def test_plan_locks_the_file_pip_installs_and_says_what_it_skipped(index, tmp_path):
    got = plan(index, tmp_path, "2.3.0, 2.5.0, 2.7.1, 2.9.0, 2.10.0, 2.11.0, 2.12.0")
    cells = {c.id: c for c in got.cells}
    assert list(cells) == [
        "stable-2.5.0-cu124-cp311",
        "stable-2.7.1-cu124-cp311",
        "stable-2.9.0-cu124-cp311",
        "stable-2.10.0-10-cu124-cp311",
        "stable-2.12.0-cu124-cp311",
    ]
    locked = Lock.from_plan(got).builds
    assert {k: b.filename for k, b in locked.items()} == {
        "stable-2.5.0-cu124-cp311": _whl("2.5.0", platform="manylinux1_x86_64"),
        "stable-2.7.1-cu124-cp311": _whl("2.7.1+cu124"),
        "stable-2.9.0-cu124-cp311": _whl("2.9.0+cu124"),
        "stable-2.10.0-10-cu124-cp311": _whl("2.10.0+cu124", build="10"),
        "stable-2.12.0-cu124-cp311": _whl("2.12.0+cu124"),
    }
    assert cells["stable-2.7.1-cu124-cp311"].yanked == "broken CUDA graphs"
    assert locked["stable-2.7.1-cu124-cp311"].yanked == "broken CUDA graphs"
    assert '"yanked": "broken CUDA graphs"' in Lock(builds=locked).dumps()
    assert cells["stable-2.5.0-cu124-cp311"].cuda == "cu124"
    missing = {m.what: m.reason for m in got.missing}
    assert missing == {
        "2.3.0": f"cu124: its wheel {_whl('2.3.0', platform='manylinux1_x86_64')} is a cu121 "
        "build (its metadata pins that CUDA)",
        "2.11.0": f"no cp311 wheel for {OLD_GLIBC} among its cu124 builds",
    }


def test_an_unlabelled_wheel_is_planned_as_the_cuda_its_metadata_pins(index, tmp_path):
    """A PyPI-shaped index: with `cuda: auto` 2.3.0 is the cu121 build it is, never cu128."""
    got = plan(index, tmp_path, "2.3.0, 2.5.0", cuda="auto")
    assert [(c.id, c.cuda) for c in got.cells] == [
        ("stable-2.3.0-cu121-cp311", "cu121"),
        ("stable-2.5.0-cu124-cp311", "cu124"),
    ]
    assert name(got.cells[0].url) == _whl("2.3.0", platform="manylinux1_x86_64")


def test_bisect_probes_each_releases_pip_file_and_says_what_it_skipped(index):
    options = BisectOptions(
        good="2.9.0", bad="2.12.0", cuda="cu124", python="3.11", platform=OLD_GLIBC, index_url=index
    )
    got = candidates(options)
    assert [(c.cell.id, c.wheel.filename) for c in got.candidates] == [
        ("stable-2.9.0-cu124-cp311", _whl("2.9.0+cu124")),
        ("stable-2.10.0-10-cu124-cp311", _whl("2.10.0+cu124", build="10")),
        ("stable-2.12.0-cu124-cp311", _whl("2.12.0+cu124")),
    ]
    assert got.missing == ("2.11.0",)
    assert f"release 2.11.0 is left out: no cp311 wheel for {OLD_GLIBC}" in got.notes
    assert got.candidates[1].label == "release 2.10.0+cu124, build 10"
    yanked = candidates(
        BisectOptions(
            good="2.5.0",
            bad="2.9.0",
            cuda="cu124",
            python="3.11",
            platform=OLD_GLIBC,
            index_url=index,
        )
    )
    assert [c.cell.yanked for c in yanked.candidates] == [None, "broken CUDA graphs", None]
    assert (
        f"release 2.5.0: its file {_whl('2.5.0', platform='manylinux1_x86_64')} has no CUDA "
        "label; its metadata pins cu124's runtime, so it is the cu124 build"
    ) in yanked.notes
    assert (
        "release 2.7.1+cu124 is yanked on the index (broken CUDA graphs); it is probed, as "
        "pip installs a yanked file for an == pin"
    ) in yanked.notes


def test_an_end_without_a_build_here_is_one_sentence(index):
    options = BisectOptions(
        good="2.3.0", bad="2.10.0", cuda="cu124", python="3.11", platform=OLD_GLIBC, index_url=index
    )
    with pytest.raises(ConfigError) as err:
        candidates(options)
    assert str(err.value) == (
        "--good 2.3.0 has no build for this runner on the index (cu124, Python 3.11): its wheel "
        f"{_whl('2.3.0', platform='manylinux1_x86_64')} is a cu121 build (its metadata pins "
        "that CUDA)"
    )


def test_a_lock_read_offline_keeps_the_cuda_and_the_yank(index, tmp_path):
    got = plan(index, tmp_path, "2.5.0, 2.7.1")
    lock = Lock.from_plan(got)
    matrix = tmp_path / "matrix.yaml"
    again = build_plan(
        load_matrix(matrix),
        lock=lock,
        python="3.11",
        platform=OLD_GLIBC,
        driver="580.65.06",
        today=date(2026, 12, 4),
        offline=True,
    )
    assert [(c.id, c.yanked) for c in again.cells] == [
        ("stable-2.5.0-cu124-cp311", None),
        ("stable-2.7.1-cu124-cp311", "broken CUDA graphs"),
    ]
    assert all(c.channel is Channel.STABLE for c in again.cells)


def test_a_nightly_re_spin_is_chosen_by_its_build_number(tmp_path):
    """The nightly path sorted by file name, so `-9-` came after `-10-`, and `-1-` before `-2-`."""
    from torchbisect.bisect.candidates import build_candidates
    from torchbisect.model import Cell
    from torchbisect.plan.indexes import nightly_builds

    page = tmp_path / "site" / "torch"
    page.mkdir(parents=True)
    names = [
        _whl(f"2.10.0.dev2025080{d}+cu130", build=b)
        for d, b in (("1", ""), ("1", "9"), ("1", "10"), ("2", "1"), ("2", "2"), ("3", ""))
    ]
    links = "".join(f'<a href="{n.replace("+", "%2B")}">{n}</a><br/>' for n in names)
    (page / "index.html").write_text(f"<html><body>{links}</body></html>")
    with serve(tmp_path / "site") as url:
        wheels = nightly_builds(f"{url}/", cuda="cu130", python="3.11", platform=OLD_GLIBC)
    assert [w.filename for w in wheels] == [names[2], names[4], names[5]]
    template = Cell(id="", channel=Channel.NIGHTLY, version="", cuda="cu130", python="3.11")
    got = build_candidates(
        wheels,
        older="2025-08-01",
        newer="2025-08-03",
        older_flag="--good",
        newer_flag="--bad",
        cell_template=template,
    )
    assert [c.cell.id for c in got.candidates] == [
        "nightly-20250801-10-cu130-cp311",
        "nightly-20250802-2-cu130-cp311",
        "nightly-20250803-cu130-cp311",
    ]


def test_the_page_row_names_a_re_spin_and_marks_a_yanked_file():
    import dataclasses

    from torchbisect.bench.synthetic import synthetic_run
    from torchbisect.page.rows import build_row

    run = synthetic_run("2.10.0+cu130", cell_id="stable-2.10.0-3-cu130-cp312")
    run = dataclasses.replace(run, cell=dataclasses.replace(run.cell, yanked="broken wheel"))
    row = build_row(run, ())
    assert (row.label, row.sub) == ("2.10.0", "cu130 · py3.12 · build 3 · yanked")
    assert ("yanked", "broken wheel") in row.facts
    assert run.cell.to_json()["yanked"] == "broken wheel"


def test_a_pypi_shaped_folder_plans_each_wheel_as_the_cuda_its_own_metadata_pins(tmp_path):
    """The issue's case: a 2.3.0 wheel without a +cu label, its METADATA pinning CUDA 12.1,
    planned from a local folder with `cuda: cu128`, was the cell stable-2.3.0-cu128-cp311."""
    from helpers import write_wheel

    folder = tmp_path / "wheels"
    for fixture in (
        "torch-2.3.0-cp311-cp311-manylinux1_x86_64.whl",
        "torch-2.7.1-cp311-cp311-manylinux_2_28_x86_64.whl",
    ):
        text = (METADATA / f"{fixture}.metadata").read_text()
        requires = tuple(
            line.split(": ", 1)[1]
            for line in text.splitlines()
            if line.startswith("Requires-Dist: ")
        )
        version, tag = fixture[len("torch-") : -len(".whl")].split("-", 1)
        write_wheel(folder, version, {"torch/__init__.py": ""}, tag=tag, requires=requires)

    def planned(cuda: str):
        return plan(str(folder), tmp_path, "2.3.0, 2.7.1", cuda=cuda, platform=M28)

    got = planned("cu128")
    assert got.cells == ()
    assert {m.what: m.reason for m in got.missing} == {
        "2.3.0": "cu128: its wheel torch-2.3.0-cp311-cp311-manylinux1_x86_64.whl is a cu121 "
        "build (its metadata pins that CUDA)",
        "2.7.1": "cu128: its wheel torch-2.7.1-cp311-cp311-manylinux_2_28_x86_64.whl is a cu126 "
        "build (its metadata pins that CUDA)",
    }
    auto = planned("auto")
    assert [(c.id, name(c.url)) for c in auto.cells] == [
        ("stable-2.3.0-cu121-cp311", "torch-2.3.0-cp311-cp311-manylinux1_x86_64.whl"),
        ("stable-2.7.1-cu126-cp311", "torch-2.7.1-cp311-cp311-manylinux_2_28_x86_64.whl"),
    ]
    assert [(c.id, c.cuda) for c in planned("cu121").cells] == [
        ("stable-2.3.0-cu121-cp311", "cu121")
    ]


def test_a_release_answer_names_its_missing_releases_and_the_re_spin():
    from torchbisect.outcome import BisectResult, Direction, NightlyPoint, Outcome
    from torchbisect.report.writers.bisection_text import render_text

    good = NightlyPoint(date="", version="2.10.0+cu130", verdict=Outcome.GOOD, build="3")
    bad = NightlyPoint(date="", version="2.12.0+cu130", verdict=Outcome.BAD, yanked="")
    result = BisectResult(
        direction=Direction.REGRESSION,
        case="c",
        cuda="cu130",
        python="3.11",
        before=good,
        after=bad,
        probes=3,
        points=(good, bad),
        missing=("2.11.0",),
    )
    text = render_text(result, new_runs=3).splitlines()
    assert text[0] == (
        "the first bad release is 2.12.0+cu130 (exact: the release before it, "
        "2.10.0+cu130 (build 3), is good)"
    )
    assert "missing:    2.11.0 (listed on the index without a build for this runner)" in text
    assert (
        "yanked:     2.12.0+cu130 (yanked on the index, probed: pip installs a yanked file "
        "for an == pin)"
    ) in text
    doc = result.to_json()
    assert (doc["last_good"]["build"], doc["first_bad"]["yanked"], doc["yanked"]) == (
        "3",
        "",
        {"2.12.0+cu130": ""},
    )
    assert "build" not in doc["first_bad"] and "yanked" not in doc["last_good"]
    assert BisectResult.from_json(doc).before == good
