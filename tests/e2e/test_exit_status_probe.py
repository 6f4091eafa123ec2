"""A user's plain `git bisect run` script, in a probes folder of its own (TORCHBISECT_PROBES),
named by matrix.yaml's `probe:`, judges stand-in torch releases through `matrix`, `probe` and
`bisect --find-fix`, with `--probe` and as `--script`, exactly as a user runs them.

Real parts: the command line, the venv backend installing stand-in torch wheels from a flat
folder of wheels (an air-gapped mirror), probes/script.py running the script with each build's
interpreter, execute, the store (SQLite) and the bisection.  The script says a release is
affected from 2.10 until 2.12 fixes it.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from html import unescape
from pathlib import Path

import pytest
from helpers import fake_torch_wheel
from helpers.cli import call

from torchbisect.exits import Exit
from torchbisect.store.db import Store

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("uv") is None, reason="uv is not installed"),
]

PY = f"{sys.version_info.major}.{sys.version_info.minor}"
CP = f"cp{sys.version_info.major}{sys.version_info.minor}"
RELEASES = ("2.9.0", "2.10.0", "2.11.0", "2.12.0", "2.13.0")
SCRIPT = '''"""A stand-in regression: wrong from torch 2.10 until 2.12 fixes it

Exit 0 not affected, 1 affected, 125 cannot tell, as git bisect run reads them.
"""
import sys

REQUIRES_API = "torch.cuda.is_available"

try:
    import torch
except Exception as exc:
    print("cannot tell: torch does not import: %s" % exc)
    sys.exit(125)
minor = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2])
if (2, 10) <= minor < (2, 12):
    print("affected: torch %s gives the wrong answer" % torch.__version__)
    sys.exit(1)
print("not affected: torch %s is right" % torch.__version__)
'''


@pytest.fixture
def world(tmp_path, fake_probes) -> Path:
    for version in RELEASES:
        fake_torch_wheel(tmp_path / "wheels", f"{version}+cpu", git_version=version * 4)
    (tmp_path / "probes").mkdir()
    (tmp_path / "probes" / "wrong_answer.py").write_text(SCRIPT)  # beside the shipped probes
    fake_probes(tmp_path / "probes")
    (tmp_path / "matrix.yaml").write_text(
        f'defaults: {{python: "{PY}", probe: wrong_answer}}\n'
        f"indexes: {{stable: {tmp_path / 'wheels'}}}\n"
        f"stable: {{versions: [{', '.join(RELEASES)}], cuda: cpu}}\n"
    )
    return tmp_path


def common(world: Path) -> list[str]:
    return ["--store", str(world / "results.sqlite"), "--workdir", str(world / "work")]


def bisect(world: Path, *how: str) -> tuple[int, dict]:
    code = call(
        "bisect",
        "--find-fix",
        "--bad",
        "2.10.0",
        "--good",
        "2.13.0",
        "--cuda",
        "cpu",
        "--python",
        PY,
        "--index-url",
        str(world / "wheels"),
        "--backend",
        "venv",
        "--no-github",
        *common(world),
        "--json",
        str(world / "bisect.json"),
        *how,
    )
    return code, json.loads((world / "bisect.json").read_text())


def test_the_matrix_judges_each_release_by_the_script_alone(world, capsys):
    code = call(
        "matrix",
        "--matrix",
        str(world / "matrix.yaml"),
        "--allow-no-gpu",
        "--backend",
        "venv",
        *common(world),
        "--out",
        str(world / "reports"),
    )
    out = capsys.readouterr().out
    assert code == Exit.OK, out
    page = (world / "reports" / "index.html").read_text()  # the page is the script's regression
    assert "A stand-in regression: wrong from torch 2.10 until 2.12 fixes it" in page
    assert "_lazy_clone" not in page
    assert (world / "reports" / "wrong_answer.py").read_text() == SCRIPT  # its check, beside it
    # "Check your own torch" is this script's check, run as the user's own probe: no GPU words
    # for a script that does not say it needs one, never the lazy-clone probe's command
    text = " ".join(re.sub(r"<[^>]+>", " ", unescape(page)).split())
    check = text[text.index("Check your own torch") : text.index("Upstream")]
    assert "Download wrong_answer.py and run python wrong_answer.py" in check
    assert "TORCHBISECT_PROBES=DIR torchbisect probe --probe wrong_answer" in check
    assert "GPU" not in check and "stale_replay" not in check
    with Store(world / "results.sqlite") as store:
        runs = {r.cell.id: r for r in store.latest()}
    assert {cid: (r.cell.probe, r.verdict.value) for cid, r in runs.items()} == {
        f"stable-{v}-cpu-{CP}": (
            "wrong_answer",
            "affected" if v in ("2.10.0", "2.11.0") else "not_affected",
        )
        for v in RELEASES
    }
    (case,) = runs[f"stable-2.10.0-cpu-{CP}"].result.cases
    assert (case.name, case.detail) == (
        "wrong_answer",
        "affected: torch 2.10.0+cpu gives the wrong answer (exit 1)",
    )
    assert f"stable-2.10.0-cpu-{CP}.wrong_answer" in out  # the summary names the probe
    assert (world / "reports" / "logs" / f"stable-2.10.0-cpu-{CP}.wrong_answer.log").is_file()

    # a second run answers from the store: same build, same probe, same fingerprint
    assert (
        call(
            "matrix",
            "--matrix",
            str(world / "matrix.yaml"),
            "--allow-no-gpu",
            "--backend",
            "venv",
            *common(world),
            "--no-report",
            "--out",
            str(world / "reports"),
        )
        == Exit.OK
    )
    assert (
        f"{len(RELEASES)} cells: 0 probed now, {len(RELEASES)} from the store"
        in capsys.readouterr().out
    )


def test_bisect_find_fix_with_the_probe_and_with_the_same_file_as_script(world, capsys):
    code, result = bisect(world, "--probe", "wrong_answer")
    out = capsys.readouterr().out
    assert code == Exit.OK, out
    assert (result["last_bad"]["version"], result["first_good"]["version"]) == (
        "2.11.0+cpu",
        "2.12.0+cpu",
    )
    assert result["case"] == "wrong_answer" and "--probe wrong_answer" in out

    code, result = bisect(world, "--script", f"python {world / 'probes' / 'wrong_answer.py'}")
    out = capsys.readouterr().out
    assert code == Exit.OK, out
    assert (result["last_bad"]["version"], result["first_good"]["version"]) == (
        "2.11.0+cpu",
        "2.12.0+cpu",
    )


def test_probe_runs_the_script_on_one_cell_with_its_exit_status(world, capsys):
    code = call(
        "probe",
        f"stable-2.11.0-cpu-{CP}",
        "--matrix",
        str(world / "matrix.yaml"),
        "--backend",
        "venv",
        "--workdir",
        str(world / "work"),
    )
    out = capsys.readouterr().out
    assert code == Exit.AFFECTED and "affected: torch 2.11.0+cpu gives the wrong answer" in out
    code = call(
        "probe",
        f"stable-2.12.0-cpu-{CP}",
        "--matrix",
        str(world / "matrix.yaml"),
        "--backend",
        "venv",
        "--workdir",
        str(world / "work"),
        "--probe",
        "wrong_answer",
    )
    assert code == Exit.OK


def test_a_release_bisection_over_a_folder_of_wheels_resumes_from_the_store(world, capsys):
    """The folder publishes no sha256: the bisection hashes a wheel file the store has a run of,
    so a repeated (or interrupted) bisection answers from the store.  It probed every build
    again before, though the README says an interrupted bisection resumes."""
    code, first = bisect(world, "--probe", "wrong_answer")
    assert code == Exit.OK, capsys.readouterr().out
    capsys.readouterr()
    with Store(world / "results.sqlite") as store:
        stored = store.count()
    code, again = bisect(world, "--probe", "wrong_answer")
    out = "".join(capsys.readouterr())
    assert code == Exit.OK, out
    assert again["first_good"] == first["first_good"]
    assert f"{first['probes']} already judged in the store" in out
    assert "(probed)" not in out and "(from the store)" in out
    with Store(world / "results.sqlite") as store:
        assert store.count() == stored  # nothing probed again
    # a file changed in place is other bytes: asked again, never answered by the old run
    fake_torch_wheel(world / "wheels", "2.12.0+cpu", git_version="changed" * 4)
    code, _ = bisect(world, "--probe", "wrong_answer")
    out = "".join(capsys.readouterr())
    assert "2.12.0+cpu is GOOD (probed)" in out, out
