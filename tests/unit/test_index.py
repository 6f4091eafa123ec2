"""Reading wheel indexes: PyTorch-format pages served over HTTP by the test itself."""

from __future__ import annotations

import re
from datetime import date

import pytest
from helpers.indexserver import fake_wheel, make_nightly_index, make_release_index, serve, sha256
from packaging.tags import Tag

from torchbisect.bench.nightly_index import daily
from torchbisect.errors import IndexUnreachable
from torchbisect.index.fetch import (
    PageMissing,
    Wheel,
    default_index,
    fetch_wheels,
    sha256_of,
)
from torchbisect.index.tags import compatible, platform_family
from torchbisect.net import retry


@pytest.fixture(autouse=True)
def _no_backoff(monkeypatch):
    monkeypatch.setattr(retry, "_sleep", lambda seconds: None)


@pytest.fixture
def pytorch(data_dir):
    """The checked-in pages, shaped like download.pytorch.org's, served on 127.0.0.1."""
    with serve(data_dir / "index" / "pytorch") as url:
        yield url


def test_stable_page_decodes_plus_and_reads_fragment_hashes(pytorch):
    wheels = fetch_wheels(f"{pytorch}/whl/cu121/")
    assert len(wheels) == 2 * 5 * 2  # versions × Pythons × platforms
    first = wheels[0]
    assert first.filename == "torch-2.3.0+cu121-cp38-cp38-linux_x86_64.whl"
    assert first.url == f"{pytorch}/whl/cu121/torch-2.3.0%2Bcu121-cp38-cp38-linux_x86_64.whl"
    assert (first.version, first.public_version, first.local) == ("2.3.0+cu121", "2.3.0", "cu121")
    assert first.tags == {Tag("cp38", "cp38", "linux_x86_64")} and first.build == ()
    assert first.nightly_date is None
    assert first.sha256 == sha256(fake_wheel(first.filename))
    assert first.metadata_sha256 and len(first.metadata_sha256) == 64
    unhashed = [w.filename for w in wheels if w.sha256 is None]
    assert unhashed == ["torch-2.3.1+cu121-cp312-cp312-win_amd64.whl"]


def test_nightly_page_has_dates_gaps_and_two_builds_on_the_bump_date(pytorch):
    wheels = fetch_wheels(f"{pytorch}/whl/nightly/cu130")
    assert all(w.sha256 is None for w in wheels)  # nightlies publish no #sha256
    dates = sorted({w.nightly_date for w in wheels})
    assert "2026-09-27" not in dates and "2026-09-28" not in dates
    assert dates[0] == "2026-09-25" and dates[-1] == "2026-10-04"
    on_bump = {w.public_version for w in wheels if w.nightly_date == "2026-10-01"}
    assert on_bump == {"2.17.0.dev20261001", "2.18.0.dev20261001"}
    newest = next(
        w
        for w in wheels
        if w.filename == "torch-2.18.0.dev20261004+cu130-cp312-cp312-manylinux_2_28_x86_64.whl"
    )
    assert sha256_of(newest.url) == sha256(fake_wheel(newest.filename))  # hashed by download


def test_pep691_json_is_used_when_the_server_offers_it(tmp_path):
    make_release_index(tmp_path, {"cu130": ["2.15.0"]}, json_too=True)
    with serve(tmp_path) as url:
        from_html_and_json = fetch_wheels(f"{url}/whl/cu130/")
        (tmp_path / "whl/cu130/torch/index.html").unlink()  # only JSON left to answer
        from_json = fetch_wheels(f"{url}/whl/cu130/")
    assert from_json == from_html_and_json
    assert len(from_json) == 5 * 3 and all(w.sha256 and w.metadata_sha256 for w in from_json)
    assert from_json[0].url.startswith(url) and "%2B" in from_json[0].url


def test_html_is_read_when_no_json_is_offered(tmp_path):
    make_release_index(tmp_path, {"cu130": ["2.15.0"]}, json_too=False)
    with serve(tmp_path) as url:
        assert len(fetch_wheels(f"{url}/whl/cu130/")) == 15


@pytest.mark.parametrize(
    ("python", "platform", "expected"),
    [
        ("3.12", "linux_x86_64", "torch-2.15.0+cu130-cp312-cp312-manylinux_2_28_x86_64.whl"),
        ("3.13", "linux_x86_64", "torch-2.15.0+cu130-cp313-cp313-manylinux_2_28_x86_64.whl"),
        ("3.13t", "linux_x86_64", "torch-2.15.0+cu130-cp313-cp313t-manylinux_2_28_x86_64.whl"),
        (
            "cp313t",
            "manylinux_2_28_aarch64",
            "torch-2.15.0+cu130-cp313-cp313t-manylinux_2_28_aarch64.whl",
        ),
        ("3.12", "linux_aarch64", "torch-2.15.0+cu130-cp312-cp312-manylinux_2_28_aarch64.whl"),
        ("3.10", "win_amd64", "torch-2.15.0+cu130-cp310-cp310-win_amd64.whl"),
    ],
)
def test_compatible_picks_exactly_the_wheel_for_python_and_platform(
    tmp_path, python, platform, expected
):
    make_release_index(tmp_path, {"cu130": ["2.15.0"]})
    wheels = fetch_wheels(str(tmp_path / "whl" / "cu130"))
    assert [w.filename for w in compatible(wheels, python=python, platform=platform)] == [expected]


def test_compatible_knows_pure_stable_abi_and_none_abi_wheels():
    names = [
        "torch-2.7.0-cp312-none-macosx_11_0_arm64.whl",
        "x-1.0-py3-none-any.whl",
        "x-1.0-cp39-abi3-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
        "torch-2.7.0-cp311-cp311-linux_x86_64.whl",
    ]
    wheels = [Wheel.parse(n, n) for n in names]
    mac = compatible(wheels, python="3.12", platform="macosx_14_0_arm64")
    assert [w.filename for w in mac] == names[:2]
    linux = compatible(wheels, python="3.12", platform="linux_x86_64")
    assert [w.filename for w in linux] == names[1:3]
    assert [
        w.filename for w in compatible(wheels, python="3.13t", platform="linux_x86_64")
    ] == names[1:2]  # neither abi3 nor cpXY-none loads on a free-threaded interpreter


def test_platform_family():
    assert platform_family("manylinux_2_28_x86_64") == "linux_x86_64"
    assert platform_family("manylinux2014_aarch64") == "linux_aarch64"
    assert platform_family("musllinux_1_2_x86_64") == "musllinux_x86_64"
    assert platform_family("macosx_10_9_x86_64") == "macosx_x86_64"
    assert platform_family("win_amd64") == "win_amd64"


def test_sha256_from_the_fragment_matches_the_file_and_nightlies_are_hashed_by_download(tmp_path):
    make_release_index(tmp_path, {"cu130": ["2.15.0"]}, write_wheels=True)
    make_nightly_index(tmp_path, [date(2026, 10, 1)], write_wheels=True)
    with serve(tmp_path) as url:
        stable = fetch_wheels(f"{url}/whl/cu130/")[0]
        nightly = fetch_wheels(f"{url}/whl/nightly/cu130/")[0]
        assert stable.sha256 == sha256_of(stable.url)
        assert nightly.sha256 is None
        assert sha256_of(nightly.url) == sha256(fake_wheel(nightly.filename))
        with pytest.raises(PageMissing):
            sha256_of(f"{url}/whl/nope.whl")


def test_local_folder_file_url_and_flat_folder_are_indexes_too(tmp_path, data_dir):
    static = data_dir / "index" / "pytorch" / "whl" / "cu121"
    assert len(fetch_wheels(str(static))) == len(fetch_wheels(static.as_uri())) == 20
    flat = tmp_path / "wheels"
    flat.mkdir()
    for name in (
        "torch-2.15.0+cu130-cp312-cp312-manylinux_2_28_x86_64.whl",
        "numpy-2.0.0-cp312-cp312-manylinux_2_17_x86_64.whl",
        "torch-2.15.0.tar.gz",
    ):
        (flat / name).write_bytes(fake_wheel(name))
    wheels = fetch_wheels(flat.as_uri())
    assert [w.filename for w in wheels] == [
        "torch-2.15.0+cu130-cp312-cp312-manylinux_2_28_x86_64.whl"
    ]
    assert sha256_of(wheels[0].url) == sha256(fake_wheel(wheels[0].filename))
    with pytest.raises(PageMissing):
        fetch_wheels(str(tmp_path / "absent"))


def test_a_server_that_fails_twice_is_retried(tmp_path):
    make_release_index(tmp_path, {"cu130": ["2.15.0"]})
    with serve(tmp_path, fail_first=2) as url:
        assert len(fetch_wheels(f"{url}/whl/cu130/", retries=4)) == 15
        assert len(url.hits) == 3


def test_a_server_that_always_fails_ends_in_one_error_naming_the_url(tmp_path, capsys):
    with serve(tmp_path, fail_always=True) as url:
        with pytest.raises(IndexUnreachable) as err:
            fetch_wheels(f"{url}/whl/cu130/", retries=3)
        assert len(url.hits) == 4
    assert f"{url}/whl/cu130/torch/" in str(err.value) and "HTTP 503" in str(err.value)
    assert "\n" not in str(err.value)
    # No silent waits: each retry says what failed and when the next try comes.
    retries = capsys.readouterr().err.splitlines()
    assert len(retries) == 3 and all("did not answer (HTTP 503" in r for r in retries)
    assert re.search(r"try 2 of 4 in 0\.[4-6] s$", retries[0])  # 0.5 s, jittered ±20 %


def test_a_truncated_page_is_an_error_never_an_empty_listing(tmp_path):
    make_release_index(tmp_path, {"cu130": ["2.15.0"]})
    with serve(tmp_path, truncate_first=100) as url, pytest.raises(IndexUnreachable):
        fetch_wheels(f"{url}/whl/cu130/", retries=2)
    with serve(tmp_path, truncate_first=1) as url:  # one short answer, then a whole one
        assert len(fetch_wheels(f"{url}/whl/cu130/", retries=2)) == 15


def test_html_that_stops_before_its_end_is_an_error(tmp_path):
    page = tmp_path / "whl" / "cu130" / "torch"
    make_release_index(tmp_path, {"cu130": ["2.15.0"]})
    text = (page / "index.html").read_text()
    (page / "index.html").write_text(text[: len(text) // 2])
    with serve(tmp_path) as url, pytest.raises(IndexUnreachable, match="ends before </html>"):
        fetch_wheels(f"{url}/whl/cu130/", retries=1)


def test_a_page_that_is_not_an_index_is_an_error_not_an_empty_listing(tmp_path):
    page = tmp_path / "whl" / "cu130" / "torch"
    page.mkdir(parents=True)
    (page / "index.html").write_text("<html><body><a href='/login'>Sign in</a></body></html>")
    with serve(tmp_path) as url, pytest.raises(IndexUnreachable, match="not a simple-index page"):
        fetch_wheels(f"{url}/whl/cu130/", retries=0)
    (page / "index.html").write_text("<html><body><h1>Links for torch</h1></body></html>")
    assert fetch_wheels(str(tmp_path / "whl" / "cu130")) == []  # empty, but an index page


def test_garbled_json_is_an_error(tmp_path):
    page = tmp_path / "whl" / "cu130" / "torch"
    page.mkdir(parents=True)
    (page / "index.json").write_text('{"meta": {"api-version": "1.0"}, "files": [{"url": 1}]}')
    with serve(tmp_path) as url, pytest.raises(IndexUnreachable, match="not a PEP 691 JSON page"):
        fetch_wheels(f"{url}/whl/cu130/", retries=0)


def test_a_missing_page_is_not_retried(tmp_path):
    with serve(tmp_path) as url:
        with pytest.raises(PageMissing, match="HTTP 404"):
            fetch_wheels(f"{url}/whl/cu999/")
        assert len(url.hits) == 1


def test_a_closed_port_is_unreachable(tmp_path):
    with serve(tmp_path) as url:
        pass  # the server is gone now
    with pytest.raises(IndexUnreachable, match=url):
        fetch_wheels(f"{url}/whl/cu130/", retries=1)


def test_default_indexes():
    assert default_index("stable", "cu130") == "https://download.pytorch.org/whl/cu130/"
    assert default_index("test", "cu126") == "https://download.pytorch.org/whl/test/cu126/"
    assert default_index("nightly", "cpu") == "https://download.pytorch.org/whl/nightly/cpu/"


def test_daily_helper_leaves_gaps():
    days = daily(date(2026, 1, 1), 5, skip=[date(2026, 1, 2)])
    assert [d.day for d in days] == [1, 3, 4, 5]
