"""What a first run downloads beside the torch wheels: the CUDA libraries and triton a wheel's
metadata pins, read from a real local index serving a real torch METADATA (tests/data/index/
metadata/), counted once per pinned file, none for overlay cells, unknown when not served."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from helpers import DATA as TEST_DATA
from helpers import REPO
from helpers.cli import call
from helpers.indexserver import make_release_index, serve

from torchbisect.exits import Exit
from torchbisect.plan.deps import pins

DATA = TEST_DATA / "index" / "metadata"
METADATA = (DATA / "torch-2.9.0-cp312-cp312-manylinux_2_28_x86_64.whl.metadata").read_text()
TORCH = 899_738_273  # bytes of PyPI's torch 2.9.0 cp312 x86_64 wheel (a sparse stand-in here)
LIBRARY = 200_000_000  # each CUDA library, as the PEP 691 pages below say
TRITON = 160_000_000  # the triton file (a sparse file; its page gives no size: a HEAD tells)
DOCS = REPO / "docs" / "running.md"
MATRIX = """\
stable:
  - {{versions: [2.9.0, 2.9.1], cuda: cu126}}
  - {{versions: [2.9.0], cuda: cu128}}
  - {{versions: [2.8.0], cuda: cu126, overlay: true}}
indexes:
  stable: {url}/whl/{{cuda}}/
defaults:
  python: '3.12'
"""


def _pinned() -> dict[str, str]:
    found = re.findall(
        r"^Requires-Dist: ((?:nvidia-[\w-]+|triton))==([\w.]+);", METADATA, re.MULTILINE
    )
    return dict(found)


def make_site(root: Path) -> None:
    """download.pytorch.org's shape: per CUDA tag a torch page (HTML, no sizes) with each
    wheel's .metadata beside it, and a page per dependency on the same index."""
    make_release_index(
        root,
        {"cu126": ["2.8.0", "2.9.0", "2.9.1"], "cu128": ["2.9.0"]},
        pythons=("cp312",),
        write_wheels=True,
    )
    for tag in ("cu126", "cu128"):
        folder = root / "whl" / tag
        for wheel in folder.glob("torch-*.whl"):
            os.truncate(wheel, TORCH)  # HEAD answers the real size; nothing is written
            wheel.with_name(wheel.name + ".metadata").write_text(METADATA, encoding="utf-8")
        for name, version in _pinned().items():
            page = folder / name
            page.mkdir()
            stem = f"{name.replace('-', '_')}-{version}"
            if name == "triton":  # an HTML page without sizes, the file really there
                files = [f"{stem}-cp312-cp312-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl"]
                (page / "index.html").write_text(
                    "<html><body>"
                    + "".join(f'<a href="{f}">{f}</a>' for f in files)
                    + "</body></html>\n"
                )
                with (page / files[0]).open("wb") as fh:
                    fh.truncate(TRITON)
                continue
            files = [f"{stem}-py3-none-manylinux_2_27_{arch}.whl" for arch in ("x86_64", "aarch64")]
            (page / "index.json").write_text(
                json.dumps(
                    {
                        "meta": {"api-version": "1.1"},
                        "name": name,
                        "files": [
                            {"filename": f, "url": f, "hashes": {}, "size": LIBRARY} for f in files
                        ],
                    }
                )
            )


@pytest.fixture
def site(tmp_path):
    make_site(tmp_path / "site")
    with serve(tmp_path / "site") as url:
        (tmp_path / "matrix.yaml").write_text(MATRIX.format(url=url))
        yield tmp_path, url


def plan(folder: Path, *extra: str) -> int:
    return call(
        "plan",
        "--matrix",
        str(folder / "matrix.yaml"),
        "--driver",
        "580.65.06",
        "--platform",
        "linux_x86_64",
        "--store",
        str(folder / "results.sqlite"),
        *extra,
    )


def cost_lines(out: str) -> list[str]:
    """The lines plan prints about what the run costs: per CUDA tag, then the sentence."""
    lines = out.splitlines()
    first = next(i for i, line in enumerate(lines) if re.match(r"cu\d+: ", line))
    return lines[first:]


def test_the_real_metadata_pins_fifteen_cuda_libraries_and_triton_on_linux_x86_64():
    found = pins(METADATA, python="3.12", platform="linux_x86_64")
    assert {d.name: d.version for d in found} == _pinned()
    assert len([d for d in found if d.name.startswith("nvidia-")]) == 15
    assert "nvidia-cudnn-cu12" in _pinned() and "triton" in _pinned()
    # the markers say Linux x86_64 only: aarch64 and Windows pull in none of them
    assert pins(METADATA, python="3.12", platform="linux_aarch64") == ()
    assert pins(METADATA, python="3.12", platform="win_amd64") == ()


def test_a_requirement_without_an_exact_pin_is_kept_as_unknown():
    text = (
        "Metadata-Version: 2.4\nName: torch\nVersion: 2.99\n"
        "Requires-Dist: nvidia-cublas-cu12>=12.8\nRequires-Dist: filelock\n"
    )
    assert [(d.name, d.version) for d in pins(text, python="3.12", platform="linux_x86_64")] == [
        ("nvidia-cublas-cu12", None)
    ]
    assert pins("<html>a login page</html>", python="3.12", platform="linux_x86_64") is None


def test_the_docs_example_is_what_plan_prints(site, capsys):
    """docs/running.md shows the lines of this plan; they cannot drift from the code."""
    folder, _ = site
    assert plan(folder) == Exit.OK
    printed = cost_lines(capsys.readouterr().out)
    block = DOCS.read_text().split("<!-- plan cost example -->\n", 1)[1].split("\n\n", 1)[0]
    assert [line[4:] for line in block.splitlines()] == printed
    assert all(len(line) <= 80 for line in printed[:-1])


def test_cells_of_one_tag_share_their_pins_and_tags_are_counted_apart(site, capsys):
    folder, _ = site
    assert plan(folder) == Exit.OK
    printed = cost_lines(capsys.readouterr().out)
    libraries = 15 * LIBRARY / 1e9
    # 2.9.0 and 2.9.1 pin the same files: counted once; cu128's index has its own files
    assert printed[:3] == [
        f"cu126: 3 torch wheels {3 * TORCH / 1e9:.1f} GB + 15 CUDA libraries {libraries:.1f} GB "
        f"+ triton {TRITON / 1e9:.1f} GB",
        "  1 wheel --no-deps over an image: no CUDA libraries",
        f"cu128: 1 torch wheel {TORCH / 1e9:.1f} GB + 15 CUDA libraries {libraries:.1f} GB + "
        f"triton {TRITON / 1e9:.1f} GB",
    ]
    lock = json.loads((folder / "matrix.lock.json").read_text())["builds"]
    deps = {d["name"]: d for d in lock["stable-2.9.0-cu126-cp312"]["deps"]}
    assert deps["nvidia-cublas-cu12"]["size"] == LIBRARY
    assert deps["triton"]["size"] == TRITON  # from a HEAD: the page gives none
    assert deps["nvidia-cublas-cu12"]["url"].endswith(
        "/whl/cu126/nvidia-cublas-cu12/nvidia_cublas_cu12-12.8.4.1-py3-none-manylinux_2_27_"
        "x86_64.whl"
    )
    assert "deps" not in lock["stable-2.8.0-cu126-cp312"]  # overlay: nothing asked


def test_plan_json_has_the_same_figures(site, capsys):
    folder, _ = site
    assert plan(folder, "--json", "-") == Exit.OK
    cost = json.loads(capsys.readouterr().out)["cost"]
    cu126 = cost["by_cuda"][0]
    assert (
        cu126["tag"],
        cu126["wheels"],
        cu126["libraries"],
        cu126["triton"],
        cu126["overlay"],
    ) == ("cu126", 3, 15, 1, 1)
    assert cost["download_bytes"] == 4 * TORCH + 2 * (15 * LIBRARY + TRITON)


def test_a_replan_with_the_lock_asks_nothing(site, capsys):
    folder, url = site
    assert plan(folder) == Exit.OK
    first = capsys.readouterr().out
    url.hits.clear()
    assert plan(folder) == Exit.OK
    assert all(hit.endswith("/torch/") for hit in url.hits), url.hits  # the pages resolve reads
    assert cost_lines(capsys.readouterr().out) == cost_lines(first)


def test_aarch64_pulls_in_none_of_the_linux_x86_64_pins(site, capsys):
    folder, url = site
    assert plan(folder, "--platform", "linux_aarch64") == Exit.OK
    printed = cost_lines(capsys.readouterr().out)
    assert printed[0].startswith("cu126: 3 torch wheels ") and "CUDA" not in printed[0]
    assert not any("/nvidia-" in hit for hit in url.hits)


@pytest.mark.parametrize("metadata", ["garbage", "huge", "missing", "not utf-8"])
def test_metadata_that_cannot_be_read_leaves_the_libraries_unknown(site, capsys, metadata):
    folder, _ = site
    for path in (folder / "site").rglob("torch-*.metadata"):
        if metadata == "missing":
            path.unlink()
        elif metadata == "huge":
            path.write_text(METADATA + "X-Padding: " + "x" * (5 << 20) + "\n")
        elif metadata == "not utf-8":
            path.write_bytes(b"\xff\xfe" + METADATA.encode("utf-16-le"))
        else:
            path.write_text("<html><body>Sign in to continue</body></html>\n")
    assert plan(folder) == Exit.OK
    out = capsys.readouterr()
    printed = cost_lines(out.out)
    assert printed[1:3] == [
        "  2 wheels without metadata: CUDA libraries unknown",
        "  1 wheel --no-deps over an image: no CUDA libraries",
    ]
    assert printed[4] == "  1 wheel without metadata: CUDA libraries unknown"
    assert "plus the CUDA libraries of 3 wheels, unknown" in printed[-1]
    # the server may say the client hung up on a huge file; torchbisect says no traceback
    assert "Traceback" not in out.out and "torchbisect" not in out.err


def test_offline_without_learned_deps_says_them_unknown_and_still_plans(site, capsys):
    folder, url = site
    assert plan(folder) == Exit.OK
    path = folder / "matrix.lock.json"
    doc = json.loads(path.read_text())
    for build in doc["builds"].values():
        build.pop("deps", None)
    path.write_text(json.dumps(doc))  # a lock written before deps were kept
    url.hits.clear()
    capsys.readouterr()
    assert plan(folder, "--offline") == Exit.OK
    assert url.hits == []
    assert "plus the CUDA libraries of 3 wheels, unknown" in capsys.readouterr().out


def test_a_pep691_torch_page_gives_the_sizes_of_its_files(tmp_path):
    from torchbisect.index.fetch import fetch_wheels

    make_release_index(tmp_path, {"cu126": ["2.9.0"]}, pythons=("cp312",), json_too=True)
    page = tmp_path / "whl" / "cu126" / "torch" / "index.json"
    doc = json.loads(page.read_text())
    for i, f in enumerate(doc["files"]):
        f["size"] = 1000 + i if i else "big"
    page.write_text(json.dumps(doc))
    with serve(tmp_path) as url:
        sizes = [w.size for w in fetch_wheels(f"{url}/whl/cu126/")]
    assert sizes[0] is None and sizes[1:] == [1000 + i for i in range(1, len(sizes))]
