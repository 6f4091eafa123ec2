"""End to end with the docker backend on a real engine: `torchbisect matrix --allow-no-gpu` over
the real torch 2.13.0+cpu wheel and a preinstalled entry (an image that already has torch).
Real containers, real installs, the probe's `skipped` verdicts in SQLite; then a run that re-runs
nothing.  The images are the offline ones `.ci/docker-setup.sh` builds."""

from __future__ import annotations

import subprocess

import pytest
from helpers import IN_CI, find_test_wheel
from helpers.cli import local_matrix, torchbisect

from torchbisect.exits import Exit
from torchbisect.model import RunStatus, Verdict
from torchbisect.store.db import Store

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def _matrix(tmp_path, *extra: str) -> subprocess.CompletedProcess:
    return torchbisect(
        *local_matrix(backend="docker"),
        *extra,
        cwd=tmp_path,
        timeout=1200,
    )


def test_the_docker_matrix_stores_skipped_verdicts_then_reruns_nothing(tmp_path):
    wheel = find_test_wheel()
    if wheel is None:
        (pytest.fail if IN_CI else pytest.skip)("no torch 2.13.0+cpu wheel")
    python = wheel.name.split("-")[2].removeprefix("cp")
    (tmp_path / "matrix.yaml").write_text(
        f'defaults:\n  timeout: 900\n  python: "{python[0]}.{python[1:]}"\n'
        "images:\n  cpu: torchbisect/base:bookworm\n"
        f"dev:\n  - wheel: {wheel}\n    cuda: cpu\n    name: torch-2.13-cpu\n"
        "preinstalled:\n  image: torchbisect/base:bookworm-torch\n"
    )
    first = _matrix(tmp_path)
    assert first.returncode == Exit.OK, first.stdout + first.stderr
    with Store(tmp_path / "results.sqlite") as store:
        runs = {r.cell.id: r for r in store.runs()}
    assert set(runs) == {"dev-torch-2.13-cpu", "preinstalled"}
    for run in runs.values():
        assert run.status is RunStatus.OK, run.reason
        assert run.verdict is Verdict.SKIPPED and run.backend == "docker"
        assert {c.verdict for c in run.result.cases} == {Verdict.SKIPPED}
        assert run.result.env["torch"].startswith("2.13.0")
    assert runs["dev-torch-2.13-cpu"].wheel_sha256 and (tmp_path / "reports/index.html").exists()

    again = _matrix(tmp_path)
    assert again.returncode == Exit.OK, again.stdout + again.stderr
    with Store(tmp_path / "results.sqlite") as store:
        assert len(store.runs()) == 2  # nothing was probed again
    assert "2 from the store" in again.stdout + again.stderr
