"""Down to the commit (`bisect --pytorch-repo`): a stand-in PyTorch-shaped clone, stand-in
nightlies built from two of its commits, the real CLI with the venv backend and a `--script`.

The clone's `torch/**.py` files are Python; `csrc/kernels.txt` and `setup.py` are "compiled": a
stand-in nightly's binary is `torch/_C.py`, generated from csrc/kernels.txt at build time (so an
overlay never carries it), beside the commit's Python files and a `torch/version.py` naming a
synthetic `YYYY-MM-DD nightly release (<main sha>)` commit on the `nightly` branch.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import write_wheel
from helpers.cli import call, torchbisect
from helpers.cli import env as cli_env
from helpers.indexserver import serve
from helpers.pytorch_clone import _git, check_out, fast_import

from torchbisect import cells
from torchbisect.bench.synthetic import synthetic_run
from torchbisect.bisect.gitrange import Commit, PythonTree, full_sha, is_python_file, plan
from torchbisect.bisect.overlay import link_tree, overlay_python_files
from torchbisect.errors import ConfigError, InfraError
from torchbisect.exits import Exit
from torchbisect.outcome import BisectResult, Direction, NightlyPoint, Outcome
from torchbisect.page.bisections import bisect_view
from torchbisect.page.view import build_view
from torchbisect.report import render_runs
from torchbisect.report.documents import json_schema
from torchbisect.report.writers.bisection_text import render_markdown, render_text
from torchbisect.store.db import Store

PY = f"{sys.version_info.major}.{sys.version_info.minor}"
TAG = f"cp{sys.version_info.major}{sys.version_info.minor}"
OLD, NEW = "2025-09-01", "2025-09-02"
INIT = (
    "from .version import __version__, git_version\nfrom . import _C\nfrom .feature import BROKEN\n"
)
CHECK = 'python -c "import sys, torch; sys.exit(1 if torch.BROKEN or torch._C.BROKEN else 0)"'
COMPILED = {13: ("csrc/kernels.txt", "fast\n"), 17: ("setup.py", "# build v2\n")}
# the package's console script (`torchrun`): its verdict is the code of the venv it starts
RUN = "import sys\n\n\ndef main():\n    import torch\n    sys.exit(1 if torch.BROKEN else 0)\n"


def history(
    culprit: int | None = None,
    broken_kernel: int | None = None,
    import_breaks: int | None = None,
    extra: dict[int, dict[str, str | None]] | None = None,
    inert: tuple[int, ...] = (),
) -> list[tuple[str, dict[str, str | None]]]:
    """30 commits after the older nightly's: Python ones, and compiled ones at 13 and 17.

    `culprit`: a Python commit that sets torch.feature.BROKEN; `broken_kernel`: the compiled
    commit whose kernels are broken; `import_breaks`: a Python commit whose torch/__init__.py
    imports a kernel only a later binary has (main broken there), put back by the next commit.
    """
    commits = []
    for i in range(1, 31):
        files: dict[str, str | None] = {f"torch/utils/m{i}.py": f"N = {i}\n"}
        if i in COMPILED:
            path, text = COMPILED[i]
            files = {path: text + ("broken\n" if i == broken_kernel else "")}
        if i in inert:
            files = {f"test/test_m{i}.py": "def test(): pass\n", f"docs/m{i}.md": "# doc\n"}
        if i == culprit:
            files["torch/feature.py"] = "BROKEN = True\n"
        if i == import_breaks:
            files["torch/__init__.py"] = INIT + "from ._C import NEW_KERNEL\n"
        if import_breaks is not None and i == import_breaks + 1:
            files["torch/__init__.py"] = INIT
        files.update((extra or {}).get(i, {}))  # None: the file is deleted
        commits.append((f"change {i} ({'compiled' if i in COMPILED else 'python'})", files))
    return commits


def make_clone(
    path: Path,
    commits: list[tuple[str, dict[str, str | None]]],
    start_extra: dict[str, str] | None = None,
) -> list[str]:
    """main: a start commit, then `commits`; nightly: one commit per end.  Returns main shas."""
    path.mkdir(parents=True)
    _git(path, "init", "-q", "-b", "main")
    start = {
        "torch/__init__.py": INIT,
        "torch/feature.py": "BROKEN = False\n",
        "torch/run.py": RUN,
        "csrc/kernels.txt": "ok\n",
        "setup.py": "# build\n",
        **(start_extra or {}),
    }
    shas = fast_import(
        path, [("main", subject, files, None) for subject, files in [("start", start), *commits]]
    )
    check_out(path)
    return shas


def nightly_commit(repo: Path, day: str, main: str) -> str:
    _git(repo, "checkout", "-q", "-B", "nightly")
    _git(repo, "commit", "-q", "--allow-empty", "-m", f"{day} nightly release ({main})")
    sha = _git(repo, "rev-parse", "HEAD")
    _git(repo, "checkout", "-q", "main")
    return sha


def standin_nightly(repo: Path, folder: Path, day: str, main: str) -> Path:
    """The commit's torch/**.py, its binary (torch/_C.py from csrc/kernels.txt) and version.py."""
    version = f"2.10.0.dev{day.replace('-', '')}+cpu"
    git_version = nightly_commit(repo, day, main)
    names = _git(repo, "ls-tree", "-r", "--name-only", main, "torch").split()
    python = [n for n in names if n.endswith(".py")]
    *texts, kernels_text = _show(repo, main, [*python, "csrc/kernels.txt"])
    files = dict(zip(python, texts, strict=True))  # as git has them
    kernels = kernels_text.split()
    files["torch/_C.py"] = f"BROKEN = {'broken' in kernels}\n" + (
        "NEW_KERNEL = 1\n" if "fast" in kernels else ""
    )
    files["torch/version.py"] = f"__version__ = {version!r}\ngit_version = {git_version!r}\n"
    files[f"torch-{version}.dist-info/entry_points.txt"] = (
        "[console_scripts]\ntorchrun = torch.run:main\n"
    )
    return write_wheel(folder, version, files, tag=f"{TAG}-{TAG}-manylinux_2_28_x86_64")


def _show(repo: Path, sha: str, paths: list[str]) -> list[str]:
    """Each path's text at `sha`, read by one `git cat-file --batch`."""
    out = subprocess.run(
        ["git", "-C", str(repo), "cat-file", "--batch"],
        check=True,
        capture_output=True,
        input="".join(f"{sha}:{p}\n" for p in paths).encode(),
    ).stdout
    texts = []
    for _ in paths:
        header, _, out = out.partition(b"\n")
        size = int(header.split()[2])  # "<sha> blob <size>"
        texts.append(out[:size].decode())
        out = out[size + 1 :]
    return texts


def make_world(base: Path, commits, start_extra=None) -> tuple[Path, list[str]]:
    shas = make_clone(base / "pytorch", commits, start_extra)
    (base / "index" / "torch").mkdir(parents=True)
    links = []
    for day, main in ((OLD, shas[0]), (NEW, shas[-1])):
        whl = standin_nightly(base / "pytorch", base / "index" / "wheels", day, main)
        links.append(f'<a href="../wheels/{whl.name.replace("+", "%2B")}">{whl.name}</a><br/>')
    (base / "index" / "torch" / "index.html").write_text(
        "<!DOCTYPE html>\n<html><body>\n" + "\n".join(links) + "\n</body></html>\n"
    )
    return base, shas


def bisect(
    base: Path,
    url: str,
    *extra: str,
    repo: Path | None = None,
    forget: str = "",
    fix: bool = False,
    flip: str = "",
    check: str = CHECK,
) -> subprocess.CompletedProcess:
    """`flip`: a commit on which the script, asked again, answers the other way (flaky)."""
    env = cli_env()
    # --find-fix: the old behaviour is "broken", the fix makes torch.BROKEN true
    check = (
        check.replace("sys.exit(1 if", "sys.exit(0 if").replace("else 0)", "else 1)")
        if fix
        else check
    )
    if flip:
        asked = f'"$(grep -c {flip} {base / "runs.txt"})"'
        again = f'[ "$TORCHBISECT_COMMIT" = {flip} ] && [ {asked} -ge 2 ]'
        check = f"if {again}; then if {check}; then exit 1; else exit 0; fi; fi; {check}"
    ends = ["--bad", OLD, "--good", NEW, "--find-fix"] if fix else ["--good", OLD, "--bad", NEW]
    args = [
        "bisect",
        *ends,
        "--cuda",
        "cpu",
        "--python",
        PY,
        "--index-url",
        url,
        "--backend",
        "venv",
        "--store",
        str(base / "work" / "results.sqlite"),
        "--workdir",
        str(base / "venvs"),
        "--pytorch-repo",
        str(repo or base / "pytorch"),
        "--no-github",
        *(["--forget", forget] if forget else []),
        "--script",
        f'echo "${{TORCHBISECT_COMMIT:-nightly}}" >> {base / "runs.txt"}; {check}',
        "--json",
        str(base / "work" / "bisect.json"),
        *extra,
    ]
    (base / "work").mkdir(exist_ok=True)
    return torchbisect(*args, env=env, cwd=base / "work", timeout=600)


def runs(base: Path) -> list[str]:
    """The commits the script ran on, in order ("nightly" for a nightly itself)."""
    path = base / "runs.txt"
    return path.read_text().split() if path.exists() else []


def short(shas: list[str], *indexes: int) -> list[str]:
    return [shas[i][:12] for i in indexes]


TESTABLE = 12 + 14  # commits 1-12 on the older nightly's binary, 17-30 on the newer one's


# -- fast: the classification and the overlay's files ----------------------------------------


@pytest.mark.parametrize(
    ("path", "python"),
    [
        ("torch/_dynamo/eval_frame.py", True),
        ("torch/version.py", False),
        ("torch/csrc/autograd/engine.cpp", False),
        ("torch/_C/__init__.pyi.in", False),
        ("torchgen/gen.py", False),
        ("tools/setup_helpers/cmake.py", False),
        ("third_party/fbgemm", False),
        ("version.txt", False),
        ("setup.py", False),
        ("torch/_inductor/codegen/triton.py", True),
        ("aten/src/ATen/native/Copy.cpp", False),
        ("torch/csrc/jit/tensorexpr/codegen_external.py", False),
    ],
)
def test_only_python_files_of_the_torch_package_are_python(path, python):
    assert is_python_file(path) is python


def _c(name: str, *paths: str) -> Commit:
    return Commit(sha=name * 40, subject=name, paths=paths)


def test_commits_before_the_first_and_from_the_last_compiled_commit_have_a_binary():
    commits = (
        _c("a", "torch/a.py"),
        _c("b", "csrc/x.cpp"),
        _c("c", "torch/c.py"),
        _c("d", "setup.py"),
        _c("e", "torch/e.py"),
        _c("f", "torch/f.py"),
    )
    assert [t.on for t in plan(commits)] == ["older", "", "", "newer", "newer", "newer"]
    python_only = (_c("a", "torch/a.py"), _c("b", "torch/b.py"), _c("c"))
    assert [t.on for t in plan(python_only)] == ["older", "older", "newer"]


def _venv(tmp_path: Path) -> tuple[Path, Path]:
    """A venv-shaped folder with a torch package, a compiled library and a console script."""
    venv = tmp_path / "venv"
    site = venv / "lib" / f"python{PY}" / "site-packages"
    (site / "torch" / "__pycache__").mkdir(parents=True)
    (site / "torch" / "lib").mkdir()
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (site / "torch" / "__init__.py").write_text("A = 1\n")
    (site / "torch" / "gone.py").write_text("G = 1\n")
    (site / "torch" / "__pycache__" / "__init__.cpython-311.pyc").write_bytes(b"old")
    (site / "torch" / "lib" / "libtorch.so").write_bytes(b"\x7fELF" + b"\0" * 60)
    (site / "torch" / "include" / "ATen").mkdir(parents=True)
    (site / "torch" / "include" / "ATen" / "Tensor.h").write_text("#pragma once\n")
    (venv / "bin").mkdir()
    (venv / "bin" / "python").symlink_to(sys.executable)
    (venv / "bin" / "torchrun").write_text(f"#!{venv}/bin/python\nimport torch\n")
    (venv / "bin" / "torchrun").chmod(0o755)
    return venv, site


def test_the_overlay_replaces_files_and_never_writes_through_a_link(tmp_path):
    venv, site = _venv(tmp_path)
    link_tree(venv, tmp_path / "overlay")
    overlay_python_files(
        tmp_path / "overlay",
        PythonTree(
            write={"torch/__init__.py": b"A = 2\n", "torch/new/mod.py": b"M = 1\n"},
            delete=("torch/gone.py",),
        ),
    )
    out = tmp_path / "overlay" / "lib" / f"python{PY}" / "site-packages" / "torch"
    assert (out / "__init__.py").read_text() == "A = 2\n"
    assert (out / "new" / "mod.py").read_text() == "M = 1\n"
    assert not (out / "gone.py").exists()
    assert not (out / "__pycache__" / "__init__.cpython-311.pyc").exists()
    # the nightly's venv is as it was
    assert (site / "torch" / "__init__.py").read_text() == "A = 1\n"
    assert (site / "torch" / "gone.py").exists()
    assert (site / "torch" / "__pycache__" / "__init__.cpython-311.pyc").read_bytes() == b"old"
    # the compiled part (ELF, the headers built with it) is the same inodes; every other file
    # is a copy of its own
    for part in ("lib/libtorch.so", "include/ATen/Tensor.h"):
        assert (out / part).stat().st_ino == (site / "torch" / part).stat().st_ino
    assert (out / "__init__.py").stat().st_ino != (site / "torch" / "__init__.py").stat().st_ino
    assert (tmp_path / "overlay" / "pyvenv.cfg").stat().st_ino != (
        venv / "pyvenv.cfg"
    ).stat().st_ino
    assert (tmp_path / "overlay" / "bin" / "python").is_symlink()
    with pytest.raises(ValueError):
        overlay_python_files(
            tmp_path / "overlay", PythonTree(write={"torch/../x.py": b""}, delete=())
        )


def test_a_console_script_of_the_overlay_starts_the_overlays_python(tmp_path):
    venv, _ = _venv(tmp_path)
    link_tree(venv, tmp_path / "overlay")
    script = tmp_path / "overlay" / "bin" / "torchrun"
    assert script.read_text() == f"#!{tmp_path / 'overlay'}/bin/python\nimport torch\n"
    assert os.access(script, os.X_OK)
    assert (venv / "bin" / "torchrun").read_text().startswith(f"#!{venv}/bin/python\n")


def test_a_package_the_commit_does_not_have_leaves_no_folder_to_import(tmp_path):
    venv, site = _venv(tmp_path)
    (site / "torch" / "newpkg" / "sub" / "__pycache__").mkdir(parents=True)
    (site / "torch" / "newpkg" / "__init__.py").write_text("")
    (site / "torch" / "newpkg" / "sub" / "__init__.py").write_text("")
    (site / "torch" / "newpkg" / "sub" / "__pycache__" / "__init__.cpython-311.pyc").write_bytes(
        b"pyc"
    )
    link_tree(venv, tmp_path / "overlay")
    overlay_python_files(
        tmp_path / "overlay",
        PythonTree(write={}, delete=("torch/newpkg/__init__.py", "torch/newpkg/sub/__init__.py")),
    )
    out = tmp_path / "overlay" / "lib" / f"python{PY}" / "site-packages"
    assert not (out / "torch" / "newpkg").exists() and (out / "torch" / "lib").is_dir()
    (out / "torch" / "__init__.py").write_text("")
    found = subprocess.run(
        [sys.executable, "-c", "import torch.newpkg"], cwd=out, capture_output=True, text=True
    )
    assert found.returncode == 1 and "No module named 'torch.newpkg'" in found.stderr
    assert (site / "torch" / "newpkg" / "sub" / "__init__.py").is_file()


def test_a_file_the_nightly_installed_otherwise_than_git_is_never_replaced(tmp_path):
    # a ROCm wheel hipifies torch/_inductor/codegen files: git's copy is not the wheel's
    venv, site = _venv(tmp_path)
    (site / "torch" / "hip.py").write_text("HIP = 'hipified'\n")
    link_tree(venv, tmp_path / "overlay")
    with pytest.raises(
        InfraError,
        match=r"the nightly's torch/hip.py is not git's copy at the "
        r"nightly's own commit \(a ROCm wheel hipifies some "
        r"files\), so the change of abcdefabcdef to it",
    ):
        overlay_python_files(
            tmp_path / "overlay",
            PythonTree(
                write={"torch/hip.py": b"HIP = 'cuda, changed'\n"},
                delete=(),
                base={"torch/hip.py": b"HIP = 'cuda'\n"},
            ),
            commit="abcdefabcdef" * 3,
        )
    # a file installed as git has it is replaced as before
    overlay_python_files(
        tmp_path / "overlay",
        PythonTree(
            write={"torch/__init__.py": b"A = 3\n"},
            delete=(),
            base={"torch/__init__.py": b"A = 1\n"},
        ),
    )


# -- slow: the real CLI -------------------------------------------------------------------------

needs_uv = pytest.mark.skipif(shutil.which("uv") is None, reason="uv is not installed")


@pytest.mark.slow
@needs_uv
@pytest.mark.parametrize("culprit", [8, 24], ids=["on-the-older-binary", "on-the-newer-binary"])
def test_a_regression_in_a_python_commit_is_found_exactly(tmp_path, culprit):
    base, shas = make_world(tmp_path, history(culprit=culprit))
    with serve(base / "index") as url:
        done = bisect(base, f"{url}/")
    assert done.returncode == Exit.OK, done.stderr
    nightly = json.loads((base / "work" / "bisect.json").read_text())
    found = nightly["narrowed"]
    assert found["exact"] is True and found["candidates"] == short(shas, culprit)
    assert found["first_bad"]["commit"] == shas[culprit]
    assert found["last_good"]["commit"] == shas[culprit - 1]
    assert found["first_bad"]["date"] == (OLD if culprit < 13 else NEW)
    assert found["commits"] == [f"{shas[culprit]} python change {culprit} (python)"]
    overlays = [r for r in runs(base) if r != "nightly"]
    # --repeat 2 (a script's default): every commit probed is asked twice on the spot, and the
    # commit pair once more each, as the nightly pair is; every run of the script is a probe
    pair = {shas[culprit], shas[culprit - 1]}
    assert {sha: overlays.count(sha) for sha in overlays} == {
        sha: 3 if sha in pair else 2 for sha in overlays
    }
    assert len(overlays) <= 2 * (math.ceil(math.log2(TESTABLE)) + 2) + 2
    assert found["probes"] == len(overlays) + 2  # and the two nightlies, from the store
    assert (
        "bisect: --repeat 2, the default with --script: every nightly or commit judged now "
        "runs the script twice" in done.stderr
    )
    assert done.stdout.splitlines()[0].startswith("the first bad nightly is 2025-09-02")
    assert (
        f"down to the commit: the first bad commit is {shas[culprit][:12]} (exact: the "
        f"commit before it, {shas[culprit - 1][:12]}, is good)" in done.stdout
    )
    assert f"https://github.com/pytorch/pytorch/commit/{shas[culprit]}" in done.stdout
    # the nightly's own venv still holds its own Python files
    feature = list(
        (base / "venvs" / "venvs").glob("nightly-20250901-*/lib/*/site-packages/torch/feature.py")
    )
    assert [f.read_text() for f in feature] == ["BROKEN = False\n"]
    # the site's OSV record opens its GIT range at the commit itself
    site = torchbisect(
        "report",
        "--store",
        base / "work" / "results.sqlite",
        "--out",
        base / "site",
        env=cli_env(),
        timeout=300,
    )
    assert site.returncode == Exit.OK, site.stderr
    osv = json.loads((base / "site" / "affected.json").read_text())
    [git] = [r for r in osv["affected"][0]["ranges"] if r["type"] == "GIT"]
    assert git["events"] == [{"introduced": shas[culprit]}, {"last_affected": shas[-1]}]


@pytest.mark.slow
@needs_uv
def test_a_fix_is_found_down_to_the_commit_too(tmp_path):
    base, shas = make_world(tmp_path, history(culprit=24))
    with serve(base / "index") as url:
        done = bisect(base, f"{url}/", fix=True)
    assert done.returncode == Exit.OK, done.stderr
    found = json.loads((base / "work" / "bisect.json").read_text())["narrowed"]
    assert found["direction"] == "fix" and found["candidates"] == short(shas, 24)
    assert (found["last_bad"]["commit"], found["first_good"]["commit"]) == (shas[23], shas[24])
    assert (
        f"down to the commit: the first fixed commit is {shas[24][:12]} (exact: the commit "
        f"before it, {shas[23][:12]}, is bad)" in done.stdout
    )


@pytest.mark.slow
@needs_uv
def test_a_rerun_reuses_every_commits_stored_verdict(tmp_path):
    base, shas = make_world(tmp_path, history(culprit=5))
    with serve(base / "index") as url:
        first = bisect(base, f"{url}/")
        asked = [r for r in runs(base) if r != "nightly"]
        again = bisect(base, f"{url}/")
    assert first.returncode == again.returncode == Exit.OK, first.stderr + again.stderr
    # only --repeat's re-asks at the nightly pair and the commit pair run again (they are
    # never stored)
    assert [r for r in runs(base) if r != "nightly"][len(asked) :] == [shas[4], shas[5]]
    assert json.loads((base / "work" / "bisect.json").read_text())["narrowed"][
        "candidates"
    ] == short(shas, 5)
    assert f"{shas[5][:12]} is BAD (from the store)" in again.stderr
    # the commits judged (and the two nightlies), from the store; the pair's 2 re-asks now
    assert f"probes:     {len(set(asked)) + 2 + 2} over the commits (2 run now, " in again.stdout


@pytest.mark.slow
@needs_uv
@pytest.mark.parametrize(
    ("flip", "answers"),
    [(8, "bad 1×, good 1×"), (7, "good 1×, bad 1×")],
    ids=["at-the-first-bad-commit", "at-the-last-good-commit"],
)
def test_a_script_that_answers_otherwise_when_asked_again_at_a_commit_is_flaky(
    tmp_path, flip, answers
):
    base, shas = make_world(tmp_path, history(culprit=8))
    with serve(base / "index") as url:
        done = bisect(base, f"{url}/", flip=shas[flip])
    assert done.returncode == Exit.FLAKY, done.stderr
    assert (
        f"--script is flaky: on commit {shas[flip][:12]} on the {OLD} nightly's binary it "
        f"answered {answers} in 2 runs (--repeat 2), so no first bad commit can be "
        "trusted"
    ) in done.stderr
    assert runs(base).count(shas[flip]) == 2
    # no commit is given as the answer, in any form; the nightlies' answer is stored and said
    assert done.stdout == ""
    doc = json.loads((base / "work" / "bisect.json").read_text())
    assert doc["stopped"]["status"] == Exit.FLAKY and "narrowed" not in doc["nightlies"]
    assert doc["range_so_far"].startswith("the nightly bisection is stored and stands")
    # the flaky commit is no answer here either: the points are the nightlies'
    assert shas[flip] not in json.dumps(doc["points"]) + doc["range_so_far"]
    assert (
        f"the nightly bisection is stored and stands (last good {OLD}, first bad {NEW}); "
        "only the commits have no answer"
    ) in done.stderr
    with Store(base / "work" / "results.sqlite") as store:
        [stored] = store.bisections()
    assert (stored.after.date, stored.narrowed) == (NEW, None)


@pytest.mark.slow
@needs_uv
def test_repeat_n_asks_each_commit_of_the_pair_n_times_and_counts_every_run(tmp_path):
    # commit 1 is the first bad one: the pair is the older nightly (asked at the nightly pair
    # already) and commit 1, so only commit 1 is asked again at the commits
    base, shas = make_world(tmp_path, history(culprit=1))
    with serve(base / "index") as url:
        done = bisect(base, f"{url}/", "--repeat", "3")
    assert done.returncode == Exit.OK, done.stderr
    found = json.loads((base / "work" / "bisect.json").read_text())["narrowed"]
    assert found["candidates"] == short(shas, 1)
    overlays = [r for r in runs(base) if r != "nightly"]
    # 3 answers in the search, 2 more as the pair's newer end; every other commit 3
    assert {sha: overlays.count(sha) for sha in overlays} == {
        sha: 5 if sha == shas[1] else 3 for sha in overlays
    }
    assert runs(base).count("nightly") == 2 * 5  # each nightly of the pair: 3 + 2 answers
    assert found["probes"] == len(overlays) + 2  # the re-asks counted; the nightlies stored
    assert (
        f"probes:     {len(overlays) + 2} over the commits ({len(overlays)} run now, 2 from "
        "the store)"
    ) in done.stdout
    assert (
        "(--repeat 3: each judged now runs 3 times, the two that decide the range 2 more)"
        in done.stderr
    )
    assert "the default with --script" not in done.stderr


@pytest.mark.slow
@needs_uv
def test_a_blobless_clone_is_enough_and_a_commits_verdict_can_be_taken_back(tmp_path):
    base, shas = make_world(tmp_path, history(culprit=20))
    _git(base / "pytorch", "config", "uploadpack.allowFilter", "true")
    subprocess.run(
        [
            "git",
            "clone",
            "-q",
            "--no-checkout",
            "--filter=blob:none",
            (base / "pytorch").as_uri(),
            str(base / "blobless"),
        ],
        check=True,
    )
    _git(base / "blobless", "fetch", "-q", "origin", "nightly:nightly")
    with serve(base / "index") as url:
        done = bisect(base, f"{url}/", repo=base / "blobless")
        assert done.returncode == Exit.OK, done.stderr
        assert json.loads((base / "work" / "bisect.json").read_text())["narrowed"][
            "candidates"
        ] == short(shas, 20)
        asked = [r for r in runs(base) if r != "nightly"]
        again = bisect(base, f"{url}/", repo=base / "blobless", forget=shas[20][:10])
    assert again.returncode == Exit.OK, again.stderr
    assert f"forgot 3 stored verdict(s) of {shas[20][:10]}" in again.stdout  # --repeat's too
    assert f"commit-{shas[20][:12]}-on-nightly-20250902-" in again.stdout
    # the forgotten commit is asked again, and no other commit whose verdict is stored (but
    # --repeat's re-asks of the commit pair, last, which are asked whatever is stored)
    new = [r for r in runs(base) if r != "nightly"][len(asked) :]
    searched, reasked = new[:-2], new[-2:]
    assert reasked == [shas[19], shas[20]]
    assert shas[20] in searched and not (set(searched) - {shas[20]}) & set(asked)
    assert "the stored bisection finished" in again.stdout


@pytest.mark.slow
@needs_uv
def test_a_regression_in_a_compiled_commit_narrows_to_the_commits_without_a_binary(tmp_path):
    base, shas = make_world(tmp_path, history(broken_kernel=13))
    with serve(base / "index") as url:
        done = bisect(base, f"{url}/")
    assert done.returncode == Exit.NOT_EXACT, done.stderr
    found = json.loads((base / "work" / "bisect.json").read_text())["narrowed"]
    assert found["exact"] is False
    assert found["candidates"] == short(shas, 13, 14, 15, 16, 17)
    assert found["missing"] == short(shas, 13, 14, 15, 16)  # untestable: no binary has them
    assert found["last_good"]["commit"] == shas[12] and found["first_bad"]["commit"] == shas[17]
    assert [c.split()[1] for c in found["commits"]] == [
        "compiled",
        "python",
        "python",
        "python",
        "compiled",
    ]
    assert "down to the commit: the first bad commit is one of 5: " in done.stdout
    assert (
        f"build: git checkout {shas[13]} && git submodule sync && git submodule update "
        "--init --recursive && python -m pip install -r requirements.txt && python -m pip "
        "install --no-build-isolation -v -e ." in done.stdout
    )
    assert (
        f"compare:    https://github.com/pytorch/pytorch/compare/{shas[12]}...{shas[17]}"
        in done.stdout
    )


@pytest.mark.slow
@needs_uv
def test_a_commit_whose_python_needs_a_newer_binary_is_unknown_never_bad(tmp_path):
    # commit 6 imports a kernel that only the binary of commit 13 on has; 7 puts it back and
    # breaks the feature: the change is in 6 or 7, and 6 is unknown, not the first bad
    base, shas = make_world(tmp_path, history(culprit=7, import_breaks=6))
    with serve(base / "index") as url:
        done = bisect(base, f"{url}/")
    assert done.returncode == Exit.NOT_EXACT, done.stderr
    found = json.loads((base / "work" / "bisect.json").read_text())["narrowed"]
    assert found["candidates"] == short(shas, 6, 7)
    assert found["unknown"] == short(shas, 6)
    six = next(p for p in found["points"] if p["commit"] == shas[6])
    assert six["verdict"] == "unknown" and "do not import" in six["reason"]
    assert shas[6] not in runs(base)  # the script never ran on it
    assert not list((base / "venvs" / "overlays").iterdir())  # every overlay is gone again


NEWPKG = {"torch/newpkg/__init__.py": "", "torch/newpkg/sub/__init__.py": "X = 1\n"}
FOUND = (
    "import importlib.util as u, sys, torch; sys.exit({} if u.find_spec('torch.newpkg') else {})"
)


@pytest.mark.slow
@needs_uv
@pytest.mark.parametrize(
    ("culprit", "start", "change", "check"),
    [
        (22, None, NEWPKG, FOUND.format(1, 0)),  # bad once the package is there
        (5, NEWPKG, dict.fromkeys(NEWPKG), FOUND.format(0, 1)),  # bad once it is gone
    ],
    ids=["added-in-the-newer-stretch", "deleted-in-the-older-stretch"],
)
def test_a_package_a_commit_does_not_have_is_not_in_its_overlay(
    tmp_path, culprit, start, change, check
):
    # the other stretch's overlays delete its files; the folder left behind (its bytecode
    # folders) would import as a namespace package, and every commit would read the same
    base, shas = make_world(tmp_path, history(extra={culprit: change}), start_extra=start)
    with serve(base / "index") as url:
        done = bisect(base, f"{url}/", check=f'python -c "{check}"')
    assert done.returncode == Exit.OK, done.stderr
    found = json.loads((base / "work" / "bisect.json").read_text())["narrowed"]
    assert found["candidates"] == short(shas, culprit)
    assert found["last_good"]["commit"] == shas[culprit - 1]


@pytest.mark.slow
@needs_uv
@pytest.mark.parametrize("culprit", [8, 24], ids=["on-the-older-binary", "on-the-newer-binary"])
def test_a_probe_started_through_the_console_script_runs_the_commits_code(tmp_path, culprit):
    base, shas = make_world(tmp_path, history(culprit=culprit))
    with serve(base / "index") as url:
        done = bisect(base, f"{url}/", check="torchrun")
    assert done.returncode == Exit.OK, done.stderr
    found = json.loads((base / "work" / "bisect.json").read_text())["narrowed"]
    assert found["candidates"] == short(shas, culprit)
    assert found["last_good"]["commit"] == shas[culprit - 1]


REWRITES = (
    "import os\nwith open(os.path.join(os.path.dirname(__file__), 'feature.py'), 'w') "
    "as f:\n    f.write('BROKEN = True\\n')\n" + INIT
)


@pytest.mark.slow
@needs_uv
def test_a_commit_that_rewrites_its_package_at_import_writes_only_its_own_overlay(tmp_path):
    base, shas = make_world(tmp_path, history(extra={8: {"torch/__init__.py": REWRITES}}))
    with serve(base / "index") as url:
        done = bisect(base, f"{url}/")
    assert done.returncode == Exit.OK, done.stderr
    found = json.loads((base / "work" / "bisect.json").read_text())["narrowed"]
    assert found["candidates"] == short(shas, 8)
    assert found["last_good"]["commit"] == shas[7]
    feature = list(
        (base / "venvs" / "venvs").glob("nightly-20250901-*/lib/*/site-packages/torch/feature.py")
    )
    assert [f.read_text() for f in feature] == ["BROKEN = False\n"]


@pytest.mark.slow
@needs_uv
def test_inert_commits_are_never_probed_and_take_the_verdict_before_them(tmp_path):
    inert = (3, 4, 5, 6, 7, 8, 10, 11, 12)
    base, shas = make_world(tmp_path, history(culprit=9, inert=inert))
    with serve(base / "index") as url:
        done = bisect(base, f"{url}/")
    assert done.returncode == Exit.OK, done.stderr
    found = json.loads((base / "work" / "bisect.json").read_text())["narrowed"]
    assert found["exact"] is True and found["candidates"] == short(shas, 9)
    assert found["last_good"]["commit"] == shas[2] and found["first_bad"]["commit"] == shas[9]
    assert [c.split()[1] for c in found["commits"]] == ["inert"] * 6 + ["python"]
    assert not {shas[i] for i in inert} & set(runs(base))
    assert (
        f"down to the commit: the first bad commit is {shas[9][:12]} (exact: the commit "
        f"before it that can change the package, {shas[2][:12]}, is good; the 6 commits "
        "between them are inert)"
    ) in done.stdout
    assert f"inert:      {', '.join(short(shas, *inert[:6]))} (only test/ or docs/" in done.stdout
    assert "30 commits between the pair: 17 testable on a nightly's binary, 9 inert" in done.stderr


@pytest.mark.slow
@needs_uv
def test_inert_commits_among_compiled_ones_are_never_candidates(tmp_path):
    base, shas = make_world(tmp_path, history(broken_kernel=13, inert=(14, 15)))
    with serve(base / "index") as url:
        done = bisect(base, f"{url}/")
    assert done.returncode == Exit.NOT_EXACT, done.stderr
    found = json.loads((base / "work" / "bisect.json").read_text())["narrowed"]
    assert found["candidates"] == short(shas, 13, 16, 17)
    assert found["missing"] == short(shas, 13, 16)
    assert [c.split()[1] for c in found["commits"]] == [
        "compiled",
        "inert",
        "inert",
        "python",
        "compiled",
    ]


# -- fast: the answer as text, JSON and on the page -------------------------------------------


def _narrowed_result() -> BisectResult:
    a, b, c = "a" * 40, "b" * 40, "c" * 40

    def point(sha: str, verdict: str, day: str = OLD) -> NightlyPoint:
        return NightlyPoint(
            date=day,
            version=f"2.10.0.dev{day.replace('-', '')}+cpu",
            verdict=Outcome(verdict),
            commit=sha,
            main_sha=sha,
        )

    commits = BisectResult(
        direction=Direction.REGRESSION,
        case="script",
        cuda="cpu",
        python=PY,
        before=point(a, "good"),
        after=point(c, "bad", NEW),
        probes=5,
        points=(point(a, "good"), point(c, "bad", NEW)),
        candidates=(b[:12], c[:12]),
        missing=(b[:12],),
        compare_url=f"https://github.com/pytorch/pytorch/compare/{a}...{c}",
        commits=(f"{b} compiled Move the copy kernel", f"{c} compiled Bump the kernels"),
        rule="script",
        reproduce="torchbisect bisect --pytorch-repo /clone",
    )
    nightly = BisectResult(
        direction=Direction.REGRESSION,
        case="script",
        cuda="cpu",
        python=PY,
        before=NightlyPoint(date=OLD, version="v1", verdict=Outcome.GOOD, main_sha=a),
        after=NightlyPoint(date=NEW, version="v2", verdict=Outcome.BAD, main_sha=c),
        probes=2,
    )
    return dataclasses.replace(nightly, narrowed=commits)


def test_a_narrowed_answer_reads_back_from_json_and_names_each_candidate():
    result = _narrowed_result()
    data = json.loads(json.dumps(result.to_json()))
    assert data["narrowed"]["candidates"] == ["b" * 12, "c" * 12]
    assert "commit" not in data["last_good"]  # a nightly's point keeps its old shape
    back = BisectResult.from_json(data)
    assert back == result and back.narrowed.unit == "commit" and not back.narrowed.exact
    text = render_text(result, new_runs=0, commit_runs=3)
    assert (
        "down to the commit: the first bad commit is one of 2: bbbbbbbbbbbb, cccccccccccc" in text
    )
    assert (
        f"  bbbbbbbbbbbb compiled Move the copy kernel\n    {'https://github.com/pytorch/'}"
        f"pytorch/commit/{'b' * 40}\n    build: git checkout {'b' * 40} && " in text
    )
    assert "untestable: bbbbbbbbbbbb (no nightly's binary has their compiled part" in text
    assert "probes:     5 over the commits (3 run now, 2 from the store)" in text
    markdown = render_markdown(result)
    assert (
        "**Down to the commit: the first bad commit is one of 2: bbbbbbbbbbbb, cccccccccccc**"
        in markdown
    )
    assert "| `bbbbbbbbbbbb` | compiled | Move the copy kernel |" in markdown
    assert (
        f"[compare](https://github.com/pytorch/pytorch/compare/{'a' * 40}...{'c' * 40})" in markdown
    )


def test_inert_commits_between_the_pair_are_said_in_text_markdown_and_on_the_page():
    a, i1, i2, c = "a" * 40, "1" * 40, "2" * 40, "c" * 40

    def point(sha: str, v: str) -> NightlyPoint:
        return NightlyPoint(date=OLD, version="v", verdict=Outcome(v), commit=sha, main_sha=sha)

    commits = BisectResult(
        direction=Direction.REGRESSION,
        case="script",
        cuda="cpu",
        python=PY,
        before=point(a, "good"),
        after=point(c, "bad"),
        probes=4,
        candidates=(c[:12],),
        commits=(f"{i1} inert Test the copy", f"{i2} inert Document it", f"{c} python Break it"),
        compare_url=f"https://github.com/pytorch/pytorch/compare/{a}...{c}",
    )
    result = dataclasses.replace(_narrowed_result(), narrowed=commits)
    text = render_text(result, new_runs=0, commit_runs=2)
    assert (
        f"down to the commit: the first bad commit is {c[:12]} (exact: the commit before it "
        f"that can change the package, {a[:12]}, is good; the 2 commits between them are "
        "inert)"
    ) in text
    assert f"inert:      {i1[:12]}, {i2[:12]} (only test/ or docs/: they cannot change" in text
    assert "build:" not in text  # exact: no commit to build
    assert f"| `{i1[:12]}` | inert | Test the copy |" in render_markdown(result)
    facts = dict(bisect_view(result).facts)
    assert (
        facts["inert (test/ or docs/ only: took the verdict before them, unprobed)"]
        == f"{i1[:12]}, {i2[:12]}"
    )
    assert facts["commit"].startswith(f"{i1[:12]} (inert) Test the copy")


@pytest.mark.slow
@needs_uv
def test_a_shallow_clone_gives_no_commit_answer_and_says_the_fetch_that_completes_it(tmp_path):
    base, shas = make_world(tmp_path, history(culprit=8))
    for key in ("uploadpack.allowFilter", "uploadpack.allowAnySHA1InWant"):
        _git(base / "pytorch", "config", key, "true")
    shallow = base / "shallow"
    _git(tmp_path, "init", "-q", str(shallow))
    _git(shallow, "remote", "add", "origin", (base / "pytorch").as_uri())
    # what a CI job that fetched the two nightlies' commits holds (and their nightly commits)
    nightlies = _git(base / "pytorch", "log", "-g", "--format=%H %s", "nightly").splitlines()
    wanted = [line.split()[0] for line in nightlies if "nightly release" in line]
    _git(shallow, "fetch", "-q", "--depth", "1", "origin", shas[0], shas[-1], *wanted)
    with serve(base / "index") as url:
        done = bisect(base, f"{url}/", repo=shallow)
    assert done.returncode == Exit.MISTAKE, done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        f"torchbisect bisect: error: --pytorch-repo {shallow} does not hold the history from "
        f"{shas[0][:12]} to {shas[-1][:12]} (the older nightly's main commit is not an ancestor "
        f"of the newer one's there, and the clone is shallow): run `git -C {shallow} fetch "
        "--unshallow origin main` and bisect again; the nightly bisection is stored and will be "
        "reused"
    )
    assert done.stdout == "" and not (base / "work" / "bisect.json").exists()
    assert [r for r in runs(base) if r != "nightly"] == []  # no commit was probed
    with Store(base / "work" / "results.sqlite") as store:
        [stored] = store.bisections()
    assert (stored.after.date, stored.narrowed) == (NEW, None)


def test_only_the_venv_backend_can_overlay_and_it_is_said_before_any_work(tmp_path, capsys):

    def bisect_with(repo: Path) -> int:
        return call(
            "bisect",
            "--good",
            OLD,
            "--bad",
            NEW,
            "--backend",
            "docker",
            "--pytorch-repo",
            str(repo),
            "--index-url",
            "http://127.0.0.1:9/",
            "--store",
            str(tmp_path / "s.sqlite"),
        )

    assert bisect_with(tmp_path) == Exit.MISTAKE
    assert f"--pytorch-repo {tmp_path} is not a git clone of pytorch" in capsys.readouterr().err
    make_clone(tmp_path / "clone", [])
    assert bisect_with(tmp_path / "clone") == Exit.MISTAKE
    assert (
        "--pytorch-repo runs commits as hard-linked copies of a nightly's venv on this "
        "host, which the docker backend cannot: use --backend venv" in capsys.readouterr().err
    )


def test_a_clone_without_a_nightlys_commit_is_one_sentence(tmp_path):
    make_clone(tmp_path / "clone", [])
    with pytest.raises(
        ConfigError,
        match=r"--pytorch-repo .*clone has no commit 0123456789ab "
        r"\(a nightly's main sha\): run `git -C .* fetch",
    ):
        full_sha(tmp_path / "clone", "0123456789abcdef" * 2)


def test_the_page_shows_the_commits_under_the_nightly_bisection_and_no_commit_run_as_a_build():
    view = dict(bisect_view(_narrowed_result()).facts)
    assert view["down to the commit"].startswith("the first bad commit is one of 2")
    assert view["commit candidates"] == (
        "bbbbbbbbbbbb (compiled) Move the copy kernel; cccccccccccc (compiled) Bump the kernels"
    )
    assert view["untestable (no nightly's binary)"] == "b" * 12
    nightly = synthetic_run("2.10.0.dev20250901+cpu", {"capture_data_ptr": (5, 5)})
    overlay = synthetic_run(
        "2.10.0.dev20250901+cpu",
        {"capture_data_ptr": (0, 5)},
        cell_id=cells.commit("b" * 40, nightly.cell.id),
    )
    page = str(build_view([nightly, overlay], [], generated=dt.datetime(2030, 1, 1)))
    assert nightly.cell.id in page and overlay.cell.id not in page


def test_a_rendered_page_carries_the_commit_answer_and_its_results_json_meets_the_schema(tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    result = _narrowed_result()
    runs_ = [
        synthetic_run("2.10.0.dev20250901+cpu", {"capture_data_ptr": (0, 5)}),
        synthetic_run("2.10.0.dev20250902+cpu", {"capture_data_ptr": (5, 5)}),
    ]
    render_runs(
        runs_, [result], tmp_path, generated=dt.datetime(2030, 1, 1, tzinfo=dt.timezone.utc)
    )
    doc = json.loads((tmp_path / "results.json").read_text())
    jsonschema.Draft202012Validator(json_schema("results")).validate(doc)
    assert doc["bisections"][0]["narrowed"]["candidates"] == ["b" * 12, "c" * 12]
    page = (tmp_path / "index.html").read_text()
    assert "down to the commit" in page and "bbbbbbbbbbbb (compiled) Move the copy kernel" in page
