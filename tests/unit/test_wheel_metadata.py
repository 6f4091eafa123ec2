"""The release a user would get is never skipped for a missing side file (issue 53.4), checked on
a PyPI-shaped index served by the test (PEP 503 HTML with `data-core-metadata`, real zip wheels
whose METADATA pins a CUDA runtime, and `.metadata` files beside some of them):

* a `.metadata` that answers 404 is read from the wheel itself — with range requests where the
  server honours them (a few hundred KB of a 3 MB wheel), else from the whole wheel, bounded;
* a served `.metadata` whose sha256 is not the one the page declares is not believed, and said so;
* a wheel that cannot be read either keeps its release a candidate whose CUDA is not known, never
  "missing", never "pins no CUDA"; the plan says the same of it.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import zipfile
from datetime import date
from pathlib import Path

import pytest
from helpers import write_wheel
from helpers.indexserver import serve

from torchbisect.bisect.run import BisectOptions, candidates
from torchbisect.config.matrix import load_matrix
from torchbisect.errors import ConfigError
from torchbisect.index import metadata
from torchbisect.plan.resolve import build_plan

PLATFORM = "manylinux_2_28_x86_64"
TAG = f"cp311-cp311-{PLATFORM}"
RUNTIME = {"cu126": "12.6.77", "cu128": "12.8.90"}
BULK = secrets.token_hex(3 * 2**19)  # 3 MB of a wheel that is not its METADATA


def pins(cuda: str) -> tuple[str, ...]:
    return (f'nvidia-cuda-runtime-cu12=={RUNTIME[cuda]}; sys_platform == "linux"',)


# a .metadata that says 2.9.0 pins CUDA 12.6, where its wheel's own METADATA pins 12.8
WRONG = f"Metadata-Version: 2.1\nName: torch\nVersion: 2.9.0\nRequires-Dist: {pins('cu126')[0]}\n"


def name(version: str) -> str:
    return f"torch-{version}-{TAG}.whl"


def meta_of(wheel: Path) -> bytes:
    with zipfile.ZipFile(wheel) as archive:
        return archive.read(
            next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        )


def site(
    root: Path,
    *,
    served: dict[str, bytes | None],
    garbage: tuple[str, ...] = (),
    cuda: str = "cu128",
    json_page: bool = False,
) -> str:
    """`root/simple/torch/`: an unlabelled wheel per version of `served`, pinning `cuda`'s
    runtime; the page declares the sha256 of each wheel's real METADATA; beside each wheel the
    `.metadata` `served` gives (its real one for b"", none for None).  A version in `garbage`
    is a file that is no zip; `json_page` writes PEP 691 JSON (`core-metadata`) beside the
    HTML.  Returns the index URL's path part."""
    folder = root / "simple" / "torch"
    links, files = [], []
    for version, side in served.items():
        wheel = write_wheel(
            folder,
            version,
            {"torch/__init__.py": "", "torch/_C.so": BULK},
            tag=TAG,
            requires=pins(cuda),
        )
        real = meta_of(wheel)
        if version in garbage:
            wheel.write_bytes(b"<html>not a wheel</html>" * 1000)
        if side is not None:
            (folder / f"{wheel.name}.metadata").write_bytes(side or real)
        links.append(
            f'<a href="{wheel.name}" data-core-metadata="sha256='
            f'{hashlib.sha256(real).hexdigest()}">{wheel.name}</a><br/>'
        )
        files.append(
            {
                "filename": wheel.name,
                "url": wheel.name,
                "hashes": {},
                "core-metadata": {"sha256": hashlib.sha256(real).hexdigest()},
            }
        )
    if json_page:
        (folder / "index.json").write_text(
            json.dumps({"meta": {"api-version": "1.1"}, "name": "torch", "files": files})
        )
    (folder / "index.html").write_text(
        "<!DOCTYPE html>\n<html><body>\n" + "\n".join(links) + "\n</body></html>\n"
    )
    return "/simple/"


def bisect_list(index: str, *, good: str = "2.8.0", bad: str = "2.10.0", cuda: str = "cu128"):
    return candidates(
        BisectOptions(
            good=good, bad=bad, cuda=cuda, python="3.11", platform=PLATFORM, index_url=index
        )
    )


@pytest.mark.parametrize("ranges", [True, False], ids=["ranges", "no-ranges"])
def test_a_404_metadata_at_the_boundary_is_read_from_the_wheel(tmp_path, capsys, ranges):
    """The attack: 2.9.0's .metadata answers 404, so its CUDA read "unknown" and the release
    was left out "without a build for this runner" — and 2.10.0 named the first bad, exact."""
    path = site(tmp_path, served={"2.8.0": b"", "2.9.0": None, "2.10.0": b"", "2.11.0": None})
    with serve(tmp_path, ranges=ranges) as url:
        got = bisect_list(url + path)
        wheel_bytes = (tmp_path / "simple" / "torch" / name("2.9.0")).stat().st_size
        assert url.ranges, "the wheel was asked for by range first"
        # a release outside the ends costs nothing: its wheel is never read
        assert not any("2.11.0" in hit for hit in url.hits), url.hits
        if ranges:  # the zip's end, its directory and METADATA: far less than the wheel
            assert url.sent[0] < wheel_bytes / 4, (url.sent[0], wheel_bytes)
    assert [c.cell.id for c in got.candidates] == [
        "stable-2.8.0-cu128-cp311",
        "stable-2.9.0-cu128-cp311",
        "stable-2.10.0-cu128-cp311",
    ]
    assert got.missing == ()
    how = (
        "with range requests"
        if ranges
        else "in the whole wheel (3.1 MB), downloaded because the server ignores range requests"
    )
    assert (
        f"release 2.9.0: its file {name('2.9.0')} has no CUDA label; its metadata pins "
        "cu128's runtime, so it is the cu128 build (the index serves no .metadata for it "
        "(HTTP 404 File not found); its metadata was read from the wheel's own METADATA, "
        f"{how})"
    ) in got.notes
    said = capsys.readouterr().err
    assert ("ignores range requests: downloading the whole wheel" in said) is not ranges


@pytest.mark.parametrize("json_page", [False, True], ids=["html", "json"])
def test_a_served_metadata_the_page_hash_disowns_is_not_believed(tmp_path, json_page):
    """The attack: the served .metadata pins CUDA 12.6 though the page's data-core-metadata is
    the hash of the wheel's own METADATA (12.8): 2.9.0 was a "cu126 build", left out."""
    wrong = WRONG.encode()
    path = site(tmp_path, served={"2.8.0": b"", "2.9.0": wrong, "2.10.0": b""}, json_page=json_page)
    with serve(tmp_path, ranges=True) as url:
        got = bisect_list(url + path)
    assert [c.cell.id for c in got.candidates][1] == "stable-2.9.0-cu128-cp311"
    assert got.missing == ()
    assert any(
        n.startswith(
            f"release 2.9.0: its file {name('2.9.0')} has no CUDA label; its "
            "metadata pins cu128's runtime"
        )
        and "(the .metadata the index serves does not match the sha256 its page declares for "
        "it (data-core-metadata), so it is not believed; its metadata was read from the "
        "wheel's own METADATA, with range requests)"
        in n
        for n in got.notes
    ), got.notes


def test_a_plan_never_stores_the_cuda_a_disowned_metadata_claims(tmp_path):
    """`cuda: auto` planned (and stored) 2.9.0 as cu126, the CUDA of a file the page disowns."""
    wrong = WRONG.encode()
    path = site(tmp_path, served={"2.8.0": None, "2.9.0": wrong})
    with serve(tmp_path, ranges=True) as url:
        got = plan(tmp_path, url + path, "2.9.0", cuda="auto")
        # a release the matrix does not name costs nothing: its wheel is never read
        assert not any("2.8.0" in hit for hit in url.hits), url.hits
    assert [(c.id, c.cuda) for c in got.cells] == [("stable-2.9.0-cu128-cp311", "cu128")]


def test_an_unreadable_wheel_stays_a_candidate_whose_cuda_is_not_known(tmp_path):
    """No .metadata, and a wheel that is no zip: 2.9.0 is neither "missing" nor said to pin no
    CUDA (its metadata was never read); it is a candidate that cannot be judged."""
    path = site(tmp_path, served={"2.8.0": b"", "2.9.0": None, "2.10.0": b""}, garbage=("2.9.0",))
    with serve(tmp_path, ranges=True) as url:
        got = bisect_list(url + path)
        with pytest.raises(ConfigError) as end:
            bisect_list(url + path, good="2.9.0")
        planned = plan(tmp_path, url + path, "2.8.0, 2.9.0", cuda="cu128")
    assert [(c.version, c.unjudged != "") for c in got.candidates] == [
        ("2.8.0", False),
        ("2.9.0", True),
        ("2.10.0", False),
    ]
    assert got.missing == ()
    why = (
        f"CUDA not known: its wheel {name('2.9.0')} has no CUDA label, and its metadata could "
        "not be read: the index serves no .metadata for it (HTTP 404 File not found); the "
        "wheel itself could not be read (it is not a readable zip archive: File is not a zip "
        "file)"
    )
    assert got.candidates[1].unjudged == why
    assert got.candidates[1].cell.cuda == "unknown"
    assert (
        f"release 2.9.0 stays a candidate but is not probed: {why}; an answer next to it "
        "cannot be exact"
    ) in got.notes
    assert not any("pins no CUDA" in n or "left out" in n for n in got.notes)
    assert str(end.value) == (
        f"--good 2.9.0 cannot be judged as the cu128 build for Python "
        f"3.11: {why}; give an end whose CUDA is known, or --cuda with its "
        "label"
    )
    assert [c.id for c in planned.cells] == ["stable-2.8.0-cu128-cp311"]
    assert {m.what: m.reason for m in planned.missing} == {"2.9.0": f"cu128: {why}"}


def test_a_mirror_without_ranges_is_read_whole_within_its_bound(tmp_path, monkeypatch):
    path = site(tmp_path, served={"2.9.0": None})
    monkeypatch.setattr(metadata, "WHOLE_LIMIT", 2**20)
    with serve(tmp_path) as url:
        found = metadata.read(f"{url}{path}torch/{name('2.9.0')}")
    assert found.text is None
    assert found.source == (
        "the wheel itself could not be read (the server ignores range "
        "requests and the whole wheel is 3.1 MB, over the bound of 1.0 MB)"
    )


def test_the_metadata_member_is_bounded_too(tmp_path, monkeypatch):
    path = site(tmp_path, served={"2.9.0": None})
    monkeypatch.setattr(metadata, "METADATA_LIMIT", 10)
    with serve(tmp_path, ranges=True) as url:
        found = metadata.read(f"{url}{path}torch/{name('2.9.0')}")
    assert found.text is None and "its METADATA is over the bound of" in found.source


def plan(root: Path, index: str, versions: str, *, cuda: str):
    matrix = root / "matrix.yaml"
    matrix.write_text(
        f"stable:\n  versions: [{versions}]\n  cuda: {cuda}\nindexes:\n  stable: {index}\n"
    )
    return build_plan(
        load_matrix(matrix),
        lock=None,
        python="3.11",
        platform=PLATFORM,
        driver="580.65.06",
        today=date(2026, 12, 4),
    )


def test_ranged_reads_are_bounded(tmp_path, monkeypatch):
    path = site(tmp_path, served={"2.9.0": None})
    monkeypatch.setattr(metadata, "_TAIL", 1024)  # the zip's end, not its METADATA
    monkeypatch.setattr(metadata, "_ASKS", 1)
    with serve(tmp_path, ranges=True) as url:
        found = metadata.read(f"{url}{path}torch/{name('2.9.0')}")
    assert found.text is None
    assert found.source == (
        "the wheel itself could not be read (reading its METADATA would take "
        "more than 1 range requests or 67 MB)"
    )


def test_a_passing_failure_is_asked_again_and_a_served_metadata_that_fails_is_said(tmp_path):
    """The .metadata answers 503, then so does the wheel's first ask: the wheel is asked again
    (a 503 heals), its METADATA read, and the 503 of the side file is said, not taken for a 404."""
    path = site(tmp_path, served={"2.9.0": b""})
    with serve(tmp_path, ranges=True, fail_first=2) as url:
        found = metadata.read(f"{url}{path}torch/{name('2.9.0')}")
    assert found.text is not None and pins("cu128")[0] in found.text
    assert found.doubts == ("its .metadata was not read (HTTP 503 Service Unavailable)",)
    assert found.source == "the wheel's own METADATA, with range requests"


def test_cuda_auto_keeps_a_release_whose_cuda_is_not_known_as_a_candidate(tmp_path):
    """--cuda auto over a PyPI-shaped index: the unreadable 2.9.0 was left out under every tag."""
    path = site(tmp_path, served={"2.8.0": b"", "2.9.0": None, "2.10.0": b""}, garbage=("2.9.0",))
    with serve(tmp_path, ranges=True) as url:
        got = bisect_list(url + path, cuda="auto")
    assert [c.cell.id for c in got.candidates] == [
        "stable-2.8.0-cu128-cp311",
        "stable-2.9.0-unknown-cp311",
        "stable-2.10.0-cu128-cp311",
    ]
    assert got.candidates[1].unjudged.startswith("CUDA not known: ")
    assert got.missing == ()
