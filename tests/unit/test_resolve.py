"""matrix.yaml + PyTorch-format indexes (served by the test) + the lock → the plan."""

from __future__ import annotations

import time
from collections import Counter
from datetime import date, timedelta
from pathlib import Path

import pytest
from helpers.indexserver import fake_wheel, make_nightly_index, make_release_index, serve, sha256

from torchbisect.bench.nightly_index import daily
from torchbisect.bisect.candidates import build_candidates
from torchbisect.config.matrix import load_matrix
from torchbisect.errors import ConfigError, ResolveError
from torchbisect.index.fetch import Wheel
from torchbisect.model import Cell, Channel
from torchbisect.plan.indexes import nightly_builds
from torchbisect.plan.lock import Lock
from torchbisect.plan.resolve import build_plan, driver_supports

TODAY = date(2026, 11, 29)  # a Sunday
GAPS = [date(2026, 10, 12), date(2026, 11, 2), date(2026, 11, 3)]
BUMP = (date(2026, 11, 16), "2.18.0")
STABLE = {
    "cu121": ["2.3.0", "2.3.1", "2.4.0", "2.5.1"],
    "cu124": ["2.4.0", "2.5.1", "2.6.0"],
    "cu126": ["2.6.0", "2.7.0", "2.8.0", "2.9.0", "2.10.0"],
    "cu130": ["2.9.0", "2.10.0", "2.11.0", "2.12.0", "2.13.0", "2.14.0", "2.14.1", "2.15.0"],
    "cu132": ["2.15.0"],
}
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_28_aarch64", "win_amd64")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A download.pytorch.org look-alike: stable, test and nightly indexes (cu128 has none)."""
    root = tmp_path_factory.mktemp("pytorch")
    make_release_index(root, STABLE, pythons=("cp312", "cp313", "cp313t"), platforms=PLATFORMS)
    make_release_index(
        root,
        {"cu130": ["2.15.0", "2.16.0"], "cu132": ["2.16.0"]},
        channel="test",
        pythons=("cp312", "cp313"),
        write_wheels=True,
    )
    days = daily(date(2026, 9, 20), 71, skip=GAPS)  # 2026-09-20 … 2026-11-29
    for cuda in ("cu130", "cu132"):
        make_nightly_index(
            root, days, cuda=cuda, bump=BUMP, pythons=("cp312", "cp313t"), platforms=PLATFORMS[:2]
        )
    with serve(root) as url:
        yield url, root


@pytest.fixture
def plan_of(site, tmp_path):
    url, _ = site

    def plan(text: str, *, lock: Lock | None = None, **kw):
        matrix = tmp_path / "matrix.yaml"
        matrix.write_text(
            "cuda_tags: [cu121, cu124, cu126, cu128, cu130, cu132]\n"
            f"indexes:\n  stable: {url}/whl/{{cuda}}/\n  test: {url}/whl/test/{{cuda}}/\n"
            f"  nightly: {url}/whl/nightly/{{cuda}}/\n" + text
        )
        args = {
            "python": "3.12",
            "platform": "linux_x86_64",
            "driver": "580.65.06",
            "today": TODAY,
            "lock": lock,
            **kw,
        }
        url.hits.clear()
        return build_plan(load_matrix(matrix), **args)

    return plan


def ids(plan) -> list[str]:
    return [c.id for c in plan.cells]


def test_explicit_stable_versions_become_cells_with_url_and_sha256(plan_of, site):
    plan = plan_of("stable:\n  versions: [2.14.1, 2.15.0]\n  cuda: cu130\n  trials: 5\n")
    assert ids(plan) == ["stable-2.14.1-cu130-cp312", "stable-2.15.0-cu130-cp312"]
    cell = plan.cells[1]
    assert cell.channel is Channel.STABLE and cell.version == "2.15.0+cu130"
    assert (
        cell.url == f"{site[0]}/whl/cu130/torch-2.15.0%2Bcu130-cp312-cp312-"
        "manylinux_2_28_x86_64.whl"
    )
    assert cell.sha256 == sha256(
        fake_wheel("torch-2.15.0+cu130-cp312-cp312-manylinux_2_28_x86_64.whl")
    )
    assert cell.trials == 5 and cell.index_url == f"{site[0]}/whl/cu130/"


def test_auto_picks_per_release_the_newest_tag_it_was_built_for(plan_of):
    plan = plan_of("stable:\n  versions: all from 2.3\n")
    assert ids(plan) == [
        "stable-2.3.0-cu121-cp312",
        "stable-2.3.1-cu121-cp312",
        "stable-2.4.0-cu124-cp312",
        "stable-2.5.1-cu124-cp312",
        "stable-2.6.0-cu126-cp312",
        "stable-2.7.0-cu126-cp312",
        "stable-2.8.0-cu126-cp312",
        "stable-2.9.0-cu130-cp312",
        "stable-2.10.0-cu130-cp312",
        "stable-2.11.0-cu130-cp312",
        "stable-2.12.0-cu130-cp312",
        "stable-2.13.0-cu130-cp312",
        "stable-2.14.0-cu130-cp312",
        "stable-2.14.1-cu130-cp312",
        "stable-2.15.0-cu132-cp312",
    ]
    assert plan.missing == ()


def test_auto_respects_the_driver_and_lists_what_it_cannot_run(plan_of):
    plan = plan_of("stable:\n  versions: all from 2.9 to 2.15\n", driver="550.54.15")
    assert ids(plan)[:2] == ["stable-2.9.0-cu126-cp312", "stable-2.10.0-cu126-cp312"]
    assert [m.what for m in plan.missing] == [
        "2.11.0",
        "2.12.0",
        "2.13.0",
        "2.14.0",
        "2.14.1",
        "2.15.0",
    ]
    assert plan.missing[-1].reason == (
        "built only for cu130, cu132, which need a newer driver than 550.54.15"
    )


def test_without_a_driver_auto_says_what_it_assumed(plan_of):
    notes: list[str] = []
    plan = plan_of("stable:\n  versions: [2.15.0]\n", driver=None, note=notes.append)
    assert ids(plan) == ["stable-2.15.0-cu132-cp312"]
    assert any("no NVIDIA driver found" in n and "--driver" in n for n in notes)


def test_a_stable_version_that_does_not_exist_names_the_closest(plan_of):
    with pytest.raises(ResolveError) as err:
        plan_of("stable:\n  versions: [2.15.1]\n  cuda: cu130\n")
    assert str(err.value).endswith("the closest versions there are 2.15.0, 2.14.1, 2.14.0")
    with pytest.raises(ResolveError, match="torch 2.20.0 is not on the stable indexes"):
        plan_of("stable:\n  versions: [2.20.0]\n")


def test_an_explicit_cuda_tag_without_an_index_is_an_error(plan_of):
    with pytest.raises(ResolveError, match="HTTP 404"):
        plan_of("stable:\n  versions: [2.15.0]\n  cuda: cu128\n")


def test_free_threaded_and_aarch64_wheels_are_chosen_for_such_runners(plan_of):
    plan = plan_of(
        "stable:\n  versions: all from 2.5\n  python: '3.13t'\n", platform="linux_aarch64"
    )
    assert ids(plan)[0] == "stable-2.6.0-cu126-cp313t"
    assert plan.cells[0].url.endswith("-cp313-cp313t-manylinux_2_28_aarch64.whl")
    assert [(m.what, m.reason) for m in plan.missing] == [
        ("2.5.1", "no cp313t wheel for linux_aarch64 among its cu121, cu124 builds")
    ]


def test_current_release_candidates_are_those_newer_than_the_newest_release(plan_of, site):
    plan = plan_of("test: {}\n")
    assert ids(plan) == ["test-2.16.0-cu132-cp312"]
    assert plan.cells[0].url.startswith(f"{site[0]}/whl/test/cu132/")
    assert plan.cells[0].index_url == f"{site[0]}/whl/test/cu132/"


def test_nightlies_of_the_last_60_days_weekly_with_gaps_and_a_version_bump(plan_of):
    plan = plan_of("nightly:\n  last: 60\n  step: 7\n  cuda: cu130\n")
    assert ids(plan) == [
        "nightly-20261005-cu130-cp312",
        "nightly-20261019-cu130-cp312",
        "nightly-20261026-cu130-cp312",
        "nightly-20261109-cu130-cp312",
        "nightly-20261116-2.17.0-cu130-cp312",
        "nightly-20261116-2.18.0-cu130-cp312",
        "nightly-20261123-cu130-cp312",
    ]
    assert [(m.what, m.reason) for m in plan.missing] == [
        ("2026-10-12", "cu130: no nightly was published on this date"),
        ("2026-11-02", "cu130: no nightly was published on this date"),
    ]
    bump = plan.cells[4]
    assert bump.date == "2026-11-16" and bump.version == "2.17.0.dev20261116+cu130"
    assert bump.sha256 is None
    assert bump.url.endswith("%2Bcu130-cp312-cp312-manylinux_2_28_x86_64.whl")


def test_nightly_dates_outside_the_listing_say_why(plan_of):
    plan = plan_of(
        "nightly:\n  dates: [2026-08-01, 2026-11-30]\n  cuda: cu130\n", today=date(2026, 11, 30)
    )
    reasons = [m.reason for m in plan.missing]
    assert reasons[0].startswith(
        "cu130: older than the oldest nightly the index still lists (2026-09-20)"
    )
    assert reasons[1] == "cu130: not published yet (nightlies appear around 07:30 UTC)"


def test_nightly_auto_uses_the_newest_tag_with_builds(plan_of):
    plan = plan_of("nightly:\n  dates: [2026-11-23]\n  python: '3.13t'\n")
    assert ids(plan) == ["nightly-20261123-cu132-cp313t"]


def test_each_index_is_read_once_per_run(plan_of, site):
    plan_of(
        "stable:\n  - versions: all from 2.3\n  - versions: [2.15.0]\n    python: '3.13'\n"
        "test: {}\nnightly:\n  - last: 60\n  - dates: [2026-10-01]\n    python: '3.13t'\n"
    )
    pages = Counter(site[0].hits)
    assert pages and max(pages.values()) == 1
    assert "/whl/nightly/cu132/torch/" in pages and "/whl/cu128/torch/" in pages


def test_a_locked_nightly_is_used_without_the_index_even_after_it_was_pruned(plan_of, site):
    matrix = "nightly:\n  dates: [2026-10-05, 2026-11-16]\n  cuda: cu130\n"
    first = plan_of(matrix)
    lock = Lock.from_plan(first)
    # the index pruned 2026-10-05 meanwhile: only the lock still knows its URL
    again = plan_of(matrix, lock=lock)
    assert "/whl/nightly/cu130/torch/" not in site[0].hits
    assert again == first
    assert Lock.from_plan(again).dumps() == lock.dumps()


def test_offline_resolves_from_the_lock_alone(plan_of, site):
    matrix = "stable:\n  versions: all from 2.14\n"
    lock = Lock.from_plan(plan_of(matrix))

    def no_network(url):
        raise AssertionError(f"offline plan fetched {url}")

    offline = plan_of(matrix, lock=lock, offline=True, fetch=no_network)
    assert ids(offline) == [
        "stable-2.14.0-cu130-cp312",
        "stable-2.14.1-cu130-cp312",
        "stable-2.15.0-cu132-cp312",
    ]
    assert Lock.from_plan(offline).dumps() == lock.dumps()


def test_the_lock_wins_for_stable_but_a_respun_release_candidate_follows_the_index(plan_of):
    stable = plan_of("stable:\n  versions: [2.15.0]\n")
    test = plan_of("test: {}\n")
    old = "0" * 64
    lock = Lock(
        builds={
            **{k: _with_sha(b, old) for k, b in Lock.from_plan(stable).builds.items()},
            **{k: _with_sha(b, old) for k, b in Lock.from_plan(test).builds.items()},
        }
    )
    notes: list[str] = []
    again = plan_of("stable:\n  versions: [2.15.0]\ntest: {}\n", lock=lock, note=notes.append)
    assert again.cells[0].sha256 == old  # the same bytes as before
    assert again.cells[1].sha256 == test.cells[0].sha256 != old  # the re-spin
    assert any("re-spun release candidate" in n for n in notes)


def _with_sha(build, sha):
    from dataclasses import replace

    return replace(build, sha256=sha)


def test_dev_wheels_from_a_path_or_an_https_url(plan_of, tmp_path):
    name = "torch-2.17.0a0+git1234abc-cp312-cp312-linux_x86_64.whl"
    (tmp_path / "wheels").mkdir()
    (tmp_path / "wheels" / name).write_bytes(fake_wheel(name))
    plan = plan_of(
        f"dev:\n  - wheel: wheels/{name}\n  - wheel: https://example.org/{name}\n"
        f"    sha256: {'ab' * 32}\n    name: from-ci\n    cuda: cu130\n"
    )
    local, remote = plan.cells
    assert local.id == "dev-2.17.0a0-git1234abc" and local.url == str(tmp_path / "wheels" / name)
    assert local.sha256 == sha256(fake_wheel(name)) and local.python == "3.12"
    assert (remote.id, remote.sha256, remote.cuda) == ("dev-from-ci", "ab" * 32, "cu130")


def test_a_dev_wheel_for_another_platform_is_an_error(plan_of):
    with pytest.raises(ResolveError, match="does not install on cp312 linux_x86_64"):
        plan_of(
            f"dev:\n  wheel: https://example.org/torch-2.17.0-cp312-cp312-win_amd64.whl\n"
            f"  sha256: {'ab' * 32}\n"
        )


def test_preinstalled_and_entry_settings_reach_the_cell(plan_of):
    plan = plan_of(
        "defaults:\n  env: {A: 1}\n  timeout: 60\nimages:\n  default: img:1\n"
        "  cu130: img:13\nstable:\n  versions: [2.15.0]\n  cuda: cu130\n"
        "  env: {B: two}\n  overlay: true\n"
        "preinstalled:\n  interpreter: /usr/bin/python3\n  cases: [capture_write]\n"
        "  image: nvcr.io/nvidia/pytorch:25.09-py3\n"
    )
    stable, pre = plan.cells
    assert stable.env == (("A", "1"), ("B", "two")) and stable.timeout == 60
    assert stable.base_image == "img:13" and stable.overlay is True
    assert (pre.id, pre.channel, pre.url, pre.python, pre.interpreter) == (
        "preinstalled",
        Channel.PREINSTALLED,
        None,
        "",
        "/usr/bin/python3",
    )
    assert pre.cases == ("capture_write",) and pre.env == (("A", "1"),)
    assert pre.base_image == "nvcr.io/nvidia/pytorch:25.09-py3"


def test_two_entries_making_the_same_cell_are_an_error(plan_of):
    with pytest.raises(ConfigError, match="stable-2.15.0-cu130-cp312"):
        plan_of(
            "stable:\n  - versions: [2.15.0]\n    cuda: cu130\n"
            "  - versions: all from 2.15\n    cuda: cu130\n"
        )


def test_nightly_builds_for_the_bisection_are_sorted_by_date_then_version(site):
    wheels = nightly_builds(
        f"{site[0]}/whl/nightly/cu130/", cuda="cu130", python="3.12", platform="linux_x86_64"
    )
    keys = [(w.nightly_date, w.parsed_version) for w in wheels]
    assert keys == sorted(keys) and len(wheels) == 71 - len(GAPS) + 1
    assert [w.public_version for w in wheels if w.nightly_date == "2026-11-16"] == [
        "2.17.0.dev20261116",
        "2.18.0.dev20261116",
    ]
    assert all({t.platform for t in w.tags} == {"manylinux_2_28_x86_64"} for w in wheels)


def test_the_bisection_names_each_nightly_as_the_matrix_does(plan_of, site):
    """Same wheel, same id, also on the version-bump date: each finds the other's verdict."""
    plan = plan_of("nightly:\n  from: 2026-11-13\n  to: 2026-11-18\n  cuda: cu130\n")
    wheels = nightly_builds(
        f"{site[0]}/whl/nightly/cu130/", cuda="cu130", python="3.12", platform="linux_x86_64"
    )
    template = Cell(id="", channel=Channel.NIGHTLY, version="", cuda="cu130", python="3.12")
    cands = build_candidates(
        wheels,
        older="2026-11-13",
        newer="2026-11-18",
        older_flag="--good",
        newer_flag="--bad",
        cell_template=template,
    )
    matrix = {c.url: c.id for c in plan.cells}
    assert [matrix[c.cell.url] for c in cands.candidates] == [c.cell.id for c in cands.candidates]
    assert "nightly-20261116-2.18.0-cu130-cp312" in matrix.values()
    assert [c.cell.id for c in cands.candidates if c.date == "2026-11-16"] == [
        "nightly-20261116-2.18.0-cu130-cp312"
    ]


@pytest.mark.parametrize(
    ("cuda", "driver", "ok"),
    [
        ("cu126", "525.60.13", True),
        ("cu126", "520.61.05", False),
        ("cu130", "580.65.06", True),
        ("cu132", "575.57.08", False),
        ("cu118", "450.80.02", True),
        ("cpu", "390.1", True),
        ("cu140", "999.1", False),
        ("cu134", None, True),
    ],
)
def test_driver_rules(cuda, driver, ok):
    assert driver_supports(cuda, driver) is ok


@pytest.mark.slow
def test_planning_1000_nightly_dates_reads_the_index_once_and_is_fast(tmp_path):
    """The figure `nox -s bench` reports: 1,000 dates against a local index."""
    first = date(2023, 12, 1)
    days = daily(first, 1000, skip=[first + timedelta(days=d) for d in range(3, 1000, 97)])
    make_nightly_index(tmp_path, days, bump=(days[500], "2.18.0"))
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(
        f"indexes:\n  nightly: {tmp_path}/whl/nightly/{{cuda}}/\n"
        f"nightly:\n  from: {first}\n  to: {days[-1]}\n  cuda: cu130\n"
    )
    calls: list[str] = []

    def fetch(url: str) -> list[Wheel]:
        from torchbisect.index.fetch import fetch_wheels

        calls.append(url)
        return fetch_wheels(url)

    start = time.perf_counter()
    plan = build_plan(
        load_matrix(matrix),
        lock=None,
        python="3.12",
        platform="linux_x86_64",
        driver="580.65.06",
        today=days[-1],
        fetch=fetch,
    )
    seconds = time.perf_counter() - start
    assert len(calls) == 1
    assert len(plan.cells) == len(days) + 1 and len(plan.missing) == 1000 - len(days)
    locked = time.perf_counter()
    again = build_plan(
        load_matrix(matrix),
        lock=Lock.from_plan(plan),
        python="3.12",
        platform="linux_x86_64",
        driver="580.65.06",
        today=days[-1],
        fetch=fetch,
    )
    assert again == plan and len(calls) == 2  # the gaps are looked up again; nothing else
    print(
        f"\nplanned {len(plan.cells)} nightly cells in {seconds:.2f} s "
        f"(with a full lock: {time.perf_counter() - locked:.2f} s)"
    )


def test_the_default_matrix_plans_against_a_mirror(site, tmp_path, repo: Path):
    """The real matrix.yaml, pointed at the test's index: every channel resolves."""
    url, _ = site
    text = (repo / "matrix.yaml").read_text()
    text += (
        f"indexes:\n  stable: {url}/whl/{{cuda}}/\n  test: {url}/whl/test/{{cuda}}/\n"
        f"  nightly: {url}/whl/nightly/{{cuda}}/\n"
    )
    (tmp_path / "matrix.yaml").write_text(text)
    plan = build_plan(
        load_matrix(tmp_path / "matrix.yaml"),
        lock=None,
        python="3.12",
        platform="linux_x86_64",
        driver="580.159.04",
        today=TODAY,
    )
    channels = Counter(c.channel for c in plan.cells)
    assert channels[Channel.STABLE] == 15 and channels[Channel.TEST] == 1
    assert channels[Channel.NIGHTLY] >= 7 and channels[Channel.PREINSTALLED] == 1


def test_an_air_gapped_runner_resolves_from_a_flat_folder_of_wheels(tmp_path):
    """No {cuda} in the index: one folder serves every tag; the local version label decides."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for name in (
        "torch-2.15.0+cu126-cp312-cp312-manylinux_2_28_x86_64.whl",
        "torch-2.15.0+cu130-cp312-cp312-manylinux_2_28_x86_64.whl",
        "torch-2.15.0+cu130-cp312-cp312-win_amd64.whl",
    ):
        (wheels / name).write_bytes(fake_wheel(name))
    (tmp_path / "matrix.yaml").write_text(
        "indexes:\n  stable: wheels\ncuda_tags: [cu126, cu130]\nstable:\n  versions: [2.15.0]\n"
    )
    cfg = load_matrix(tmp_path / "matrix.yaml")
    new, old = (
        build_plan(
            cfg, lock=None, python="3.12", platform="linux_x86_64", driver=driver, today=TODAY
        )
        for driver in ("580.65.06", "550.54.15")
    )
    assert ids(new) == ["stable-2.15.0-cu130-cp312"] and ids(old) == ["stable-2.15.0-cu126-cp312"]
    assert new.cells[0].url == str(
        wheels / "torch-2.15.0+cu130-cp312-cp312-manylinux_2_28_x86_64.whl"
    )
