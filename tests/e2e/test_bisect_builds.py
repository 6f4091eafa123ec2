"""The two exact-wrong answers of the held-out bisection round 3, end to end through the real
`bisect --script` command (uv venvs, a local index served over HTTP): the release bisection must
probe the file `pip install torch==V+<cuda>` installs, and say so.

* Re-spins: 2.10.0 is listed first as a bad build and again as its good re-spin `-3`; pip installs
  the re-spin, so the first bad release is 2.10.1, never 2.10.0.
* Labels: with `--cuda cu124` an unlabelled `torch-2.10.0` (bad) is listed before
  `torch-2.10.0+cu124` (good); the labelled one is the cu124 build, so again 2.10.1 — a yanked
  file, probed (pip installs it for an `==` pin) and said to be yanked.

Each stand-in wheel carries its own file name; the script writes it to a file, so the test asserts
which file was installed, not only the answer.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest
from helpers import write_wheel
from helpers.cli import torchbisect
from helpers.indexserver import serve
from helpers.nightly_world import PY, TAG, env

from torchbisect.exits import Exit

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("uv") is None, reason="uv is not installed"),
]

PLATFORM = "manylinux_2_28_x86_64"
SCRIPT = (
    "python -c \"import sys, torch; open({log!r}, 'a').write(torch.FILE + '\\n'); "
    'sys.exit(1 if torch.BAD else 0)"'
)


def standin(
    folder: Path, version: str, *, bad: bool, build: str = "", requires: tuple[str, ...] = ()
) -> str:
    """A stand-in torch wheel that knows its own file name and whether it is bad."""
    name = f"torch-{version}{'-' + build if build else ''}-{TAG}-{TAG}-{PLATFORM}.whl"
    write_wheel(
        folder,
        version,
        {
            "torch/__init__.py": (
                f"__version__ = {version!r}\nFILE = {name!r}\nBAD = {bad!r}\n"
                "class version:\n    git_version = ''\n"
                "class cuda:\n    @staticmethod\n    def is_available():\n        return False\n"
            )
        },
        tag=f"{TAG}-{TAG}-{PLATFORM}",
        build=build,
        requires=requires,
    )
    return name


def html_index(root: Path, names: list[str]) -> None:
    (root / "torch" / "index.html").write_text(
        "<!DOCTYPE html>\n<html><body>\n"
        + "\n".join(f'<a href="{n.replace("+", "%2B")}">{n}</a><br/>' for n in names)
        + "\n</body></html>\n"
    )


def json_index(root: Path, names: list[str], yanked: dict[str, str]) -> None:
    (root / "torch" / "index.json").write_text(
        json.dumps(
            {
                "meta": {"api-version": "1.1"},
                "name": "torch",
                "files": [
                    {"filename": n, "url": n.replace("+", "%2B"), "hashes": {}}
                    | ({"yanked": yanked[n]} if n in yanked else {})
                    for n in names
                ],
            }
        )
    )
    (root / "torch" / "index.html").write_text("<html><body>torch</body></html>")  # never read


def bisect(
    tmp_path: Path,
    url: str,
    cuda: str,
    *flags: str,
    ends: tuple[str, ...] = ("--good", "2.9.0", "--bad", "2.11.0"),
) -> tuple[subprocess.CompletedProcess, list[str]]:
    log = tmp_path / "installed.txt"
    done = torchbisect(
        "bisect",
        *ends,
        *flags,
        "--cuda",
        cuda,
        "--python",
        PY,
        "--index-url",
        url,
        "--backend",
        "venv",
        "--store",
        tmp_path / "results.sqlite",
        "--workdir",
        tmp_path / "venvs",
        "--no-github",
        "--json",
        tmp_path / "bisect.json",
        "--script",
        SCRIPT.format(log=str(log)),
        "--repeat",
        "1",
        env=env(),
        cwd=tmp_path,
        timeout=600,
    )
    return done, log.read_text().split() if log.exists() else []


def test_a_re_spin_is_the_build_probed_and_named(tmp_path):
    index = tmp_path / "index" / "torch"
    names = [
        standin(index, "2.9.0+cu130", bad=False),
        standin(index, "2.10.0+cu130", bad=True),  # the original, listed first
        standin(index, "2.10.0+cu130", bad=False, build="3"),  # its re-spin
        standin(index, "2.10.1+cu130", bad=True),
        standin(index, "2.11.0+cu130", bad=True),
    ]
    html_index(tmp_path / "index", names)
    with serve(tmp_path / "index") as url:
        done, installed = bisect(tmp_path, f"{url}/", "cu130")
    assert done.returncode == Exit.OK, done.stderr
    result = json.loads((tmp_path / "bisect.json").read_text())
    assert (result["last_good"]["version"], result["last_good"]["build"]) == ("2.10.0+cu130", "3")
    assert result["first_bad"]["version"] == "2.10.1+cu130"
    assert names[2] in installed and names[1] not in installed  # the re-spin, never the original
    assert done.stdout.splitlines()[0] == (
        "the first bad release is 2.10.1+cu130 (exact: the "
        "release before it, 2.10.0+cu130 (build 3), is good)"
    )
    assert "release 2.10.0+cu130: probing its re-spin, build 3" in done.stderr
    assert "2.10.0+cu130 (build 3)" in done.stdout


def test_the_labelled_twin_is_the_cuda_build_asked_for(tmp_path):
    index = tmp_path / "index" / "torch"
    names = [
        standin(index, "2.9.0+cu124", bad=False),
        standin(index, "2.10.0", bad=True),  # unlabelled, listed first
        standin(index, "2.10.0+cu124", bad=False),
        standin(index, "2.10.1+cu124", bad=True),
        standin(index, "2.11.0+cu124", bad=True),
    ]
    json_index(tmp_path / "index", names, yanked={names[3]: "wrong CUDA graphs"})
    with serve(tmp_path / "index") as url:
        done, installed = bisect(tmp_path, f"{url}/", "cu124")
    assert done.returncode == Exit.OK, done.stderr
    result = json.loads((tmp_path / "bisect.json").read_text())
    assert (result["last_good"]["version"], result["first_bad"]["version"]) == (
        "2.10.0+cu124",
        "2.10.1+cu124",
    )
    assert names[2] in installed and names[1] not in installed
    # the yanked first bad is probed, as pip installs it for ==2.10.1, and said to be yanked
    assert result["first_bad"]["yanked"] == "wrong CUDA graphs"
    assert result["yanked"] == {"2.10.1+cu124": "wrong CUDA graphs"}
    assert (
        "yanked:     2.10.1+cu124 (wrong CUDA graphs) (yanked on the index, probed: pip "
        "installs a yanked file for an == pin)"
    ) in done.stdout.splitlines()
    assert done.stdout.splitlines()[0] == (
        "the first bad release is 2.10.1+cu124 (exact: the "
        "release before it, 2.10.0+cu124, is good)"
    )


def runtime(version: str) -> tuple[str, ...]:
    """The CUDA runtime a PyPI torch wheel pins, with a marker that keeps it out of the venv."""
    return (f'nvidia-cuda-runtime-cu12=={version}; sys_platform == "never"',)


def test_cuda_auto_bisects_a_pypi_shaped_index_across_cuda_generations(tmp_path):
    # PyPI holds one unlabelled build a release, of whatever CUDA it was built with: --cuda auto
    # takes that file for each release and names it by the CUDA its metadata pins
    index = tmp_path / "index" / "torch"
    names = [
        standin(index, "2.8.0", bad=True, requires=runtime("12.6.77")),
        standin(index, "2.9.0", bad=True, requires=runtime("12.8.90")),
        standin(index, "2.10.0", bad=False, requires=runtime("12.8.90")),
        standin(index, "2.11.0", bad=False, requires=runtime("12.9.79")),
    ]
    for name in names:  # served beside each file, as PyPI does (PEP 658)
        with zipfile.ZipFile(index / name) as wheel:
            meta = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
            (index / f"{name}.metadata").write_bytes(wheel.read(meta))
    html_index(tmp_path / "index", names)
    with serve(tmp_path / "index") as url:
        done, installed = bisect(
            tmp_path, f"{url}/", "auto", "--find-fix", ends=("--bad", "2.8.0", "--good", "2.11.0")
        )
    assert done.returncode == Exit.OK, done.stderr
    result = json.loads((tmp_path / "bisect.json").read_text())
    assert (result["last_bad"]["version"], result["first_good"]["version"]) == ("2.9.0", "2.10.0")
    assert set(installed) == set(names)  # both ends, then the two between
    assert done.stdout.splitlines()[0].startswith("the first fixed release is 2.10.0")
    for version, cuda in (("2.8.0", "cu126"), ("2.9.0", "cu128"), ("2.11.0", "cu129")):
        assert (
            f"release {version}: its file torch-{version}-{TAG}-{TAG}-{PLATFORM}.whl has no "
            f"CUDA label; its metadata pins {cuda}'s runtime"
        ) in done.stderr


def test_cuda_auto_is_for_releases_only(tmp_path):
    done = torchbisect(
        "bisect",
        "--good",
        "2025-08-01",
        "--bad",
        "2025-08-20",
        "--cuda",
        "auto",
        "--store",
        tmp_path / "r.sqlite",
        "--workdir",
        tmp_path / "w",
        env=env(),
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == Exit.MISTAKE, done.stderr
    assert "--cuda auto chooses each release's build" in done.stderr


def pypi_index(root: Path, names: list[str], *, served: tuple[str, ...]) -> None:
    """A PyPI-shaped page whose anchors declare each wheel's METADATA hash (PEP 714), with the
    .metadata file beside only the wheels in `served`; the rest answer 404."""
    links = []
    for name in names:
        with zipfile.ZipFile(root / "torch" / name) as wheel:
            meta = wheel.read(
                next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
            )
        if name in served:
            (root / "torch" / f"{name}.metadata").write_bytes(meta)
        links.append(
            f'<a href="{name}" data-core-metadata="sha256='
            f'{hashlib.sha256(meta).hexdigest()}">{name}</a><br/>'
        )
    (root / "torch" / "index.html").write_text(
        "<!DOCTYPE html>\n<html><body>\n" + "\n".join(links) + "\n</body></html>\n"
    )


def test_a_release_whose_metadata_answers_404_is_probed_from_its_wheel(tmp_path):
    """Held-out round 5: 2.10.0's .metadata answered 404, its CUDA read "unknown", it was left
    out "without a build for this runner", and 2.11.0 was named the first bad release, exact
    (exit 0).  Its wheel's own METADATA (read with range requests) says cu128: it is probed."""
    index = tmp_path / "index" / "torch"
    names = [
        standin(index, v, bad=bad, requires=runtime("12.8.90"))
        for v, bad in (("2.9.0", False), ("2.10.0", True), ("2.11.0", True))
    ]
    pypi_index(tmp_path / "index", names, served=(names[0], names[2]))
    with serve(tmp_path / "index", ranges=True) as url:
        done, installed = bisect(tmp_path, f"{url}/", "cu128")
    assert done.returncode == Exit.OK, done.stderr
    assert done.stdout.splitlines()[0] == (
        "the first bad release is 2.10.0 (exact: the release before it, 2.9.0, is good)"
    )
    assert names[1] in installed


def test_a_release_whose_cuda_stays_unknown_is_a_candidate_never_an_exact_answer(tmp_path):
    """The same, but 2.10.0's wheel cannot be read either (its METADATA pins no CUDA runtime):
    its CUDA is not known, so it is neither probed as the cu128 build nor left out; the answer
    names both releases it cannot tell apart, with the status for an answer that is not exact."""
    index = tmp_path / "index" / "torch"
    names = [
        standin(index, "2.9.0", bad=False, requires=runtime("12.8.90")),
        standin(index, "2.10.0", bad=True),  # no runtime pin: its CUDA is not known
        standin(index, "2.11.0", bad=True, requires=runtime("12.8.90")),
    ]
    pypi_index(tmp_path / "index", names, served=(names[0], names[2]))
    with serve(tmp_path / "index", ranges=True) as url:
        done, installed = bisect(tmp_path, f"{url}/", "cu128")
    assert done.returncode == Exit.NOT_EXACT, done.stderr
    assert done.stdout.splitlines()[0] == "the first bad release is one of 2: 2.10.0, 2.11.0"
    assert names[1] not in installed and names[2] in installed
    assert (
        "release 2.10.0 stays a candidate but is not probed: CUDA not known: its wheel "
        f"{names[1]} has no CUDA label, and its metadata (the wheel's own METADATA, with "
        "range requests) pins no CUDA runtime"
    ) in done.stderr
    assert "2.10.0 is UNKNOWN, not probed: CUDA not known" in done.stderr
    assert "left out" not in done.stderr and "missing:" not in done.stdout
    # never probed, so never said to be tried (the summary said "(tried, no verdict)")
    assert "unknown:    2.10.0 (no verdict)" in done.stdout.splitlines(), done.stdout
    assert "tried" not in done.stdout
