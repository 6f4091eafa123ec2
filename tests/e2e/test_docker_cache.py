"""uv's cache volume of the docker backend is pruned: by a docker matrix run when it ends, and by
`torchbisect cache --prune` on demand; a prune that cannot run is one line, never a lost result.

On the real engine, with a volume of the test's own (TORCHBISECT_UV_CACHE_VOLUME; the machine's
shared one is never touched) and the offline base image `torchbisect/base:bookworm`.  The cell is
a stand-in torch wheel carrying 6 MB that does not compress, so the cache visibly holds it.  The
failed prune is a real one: another process holding uv's cache lock (`flock -s`, as a running
`uv pip install` does) past UV_LOCK_TIMEOUT.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import time
import uuid

import pytest
from helpers import write_wheel
from helpers.cli import local_matrix, torchbisect

from torchbisect.backends.container import UV_CACHE
from torchbisect.backends.docker_compile import COMPILE_LABEL
from torchbisect.exits import Exit
from torchbisect.store.db import Store

pytestmark = [pytest.mark.docker, pytest.mark.slow]
BASE = "torchbisect/base:bookworm"
PRUNED = re.compile(
    r"uv cache volume (\S+) pruned \(uv cache prune --ci\): "
    r"([\d.,]+) MB before, ([\d.,]+) MB after"
)


@pytest.fixture
def volume():
    import docker

    client = docker.from_env()
    name = f"torchbisect-test-uv-{uuid.uuid4().hex[:8]}"
    yield name
    for box in client.containers.list(all=True, filters={"label": f"test.volume={name}"}):
        box.remove(force=True)
    with contextlib.suppress(docker.errors.NotFound):
        client.volumes.get(name).remove(force=True)
    for compiled in client.volumes.list(filters={"label": f"{COMPILE_LABEL}={name}"}):
        compiled.remove(force=True)  # the probes' compile caches, named by this deployment


def _matrix_folder(tmp_path):
    wheel = write_wheel(
        tmp_path / "wheels",
        "2.99.0+cpu",
        {
            "torch/__init__.py": "__version__ = '2.99.0+cpu'\nclass cuda:\n    @staticmethod\n"
            "    def is_available():\n        return False\n",
            "torch/ballast.txt": os.urandom(3 * 2**20).hex(),
        },
    )  # 6 MB of hex, ~3 MB zipped
    (tmp_path / "matrix.yaml").write_text(
        'defaults:\n  timeout: 300\n  python: "3.11"\nimages:\n  cpu: ' + BASE + "\n"
        f"dev:\n  - wheel: {wheel}\n    cuda: cpu\n    name: ballast\n"
    )


def _torchbisect(tmp_path, volume, *argv, **env) -> subprocess.CompletedProcess:
    done = torchbisect(
        *argv, cwd=tmp_path, timeout=900, env_extra={"TORCHBISECT_UV_CACHE_VOLUME": volume, **env}
    )
    assert "Traceback" not in done.stdout + done.stderr
    return done


def _matrix(tmp_path, volume, *extra, **env) -> subprocess.CompletedProcess:
    return _torchbisect(
        tmp_path,
        volume,
        *local_matrix(backend="docker"),
        "--fail-on",
        "none",
        *extra,
        **env,
    )


def _in_volume(volume: str, command: str, **kwargs):
    import docker

    return docker.from_env().containers.run(
        BASE,
        ["sh", "-c", command],
        volumes={volume: {"bind": UV_CACHE, "mode": "rw"}},
        labels={"test.volume": volume},
        **kwargs,
    )


def _cached_wheels(volume: str) -> list[str]:
    """The unpacked wheels in the cache (uv keeps each under archive-v0/<id>/)."""
    out = _in_volume(volume, f"ls {UV_CACHE}/archive-v0 2>/dev/null; true", remove=True)
    return out.decode().split()


def _hold_uv_lock(volume: str):
    box = _in_volume(volume, f"exec flock -s {UV_CACHE}/.lock sleep 600", detach=True)
    for _ in range(50):  # until the lock is held: flock has started and sleeps
        if "sleep" in box.top()["Processes"][-1][-1]:
            return box
        time.sleep(0.2)
    raise AssertionError("the lock holder did not start")


def test_a_docker_matrix_run_prunes_the_cache_it_filled_and_keeps_its_result(tmp_path, volume):
    _matrix_folder(tmp_path)
    done = _matrix(tmp_path, volume)
    said = done.stdout + done.stderr
    assert done.returncode == Exit.OK, said
    [(name, before, after)] = PRUNED.findall(said)
    assert name == volume
    assert float(before.replace(",", "")) >= 3.0 > float(after.replace(",", "")), said
    assert _cached_wheels(volume) == []  # the wheel uv had unpacked is gone
    with Store(tmp_path / "results.sqlite") as store:
        assert [r.cell.id for r in store.runs()] == ["dev-ballast"]


def test_a_prune_that_cannot_run_is_one_line_and_the_result_is_stored(tmp_path, volume):
    _matrix_folder(tmp_path)
    holder = _hold_uv_lock(volume)
    try:
        done = _matrix(tmp_path, volume, UV_LOCK_TIMEOUT="3")
        said = done.stdout + done.stderr
    finally:
        holder.remove(force=True)
    assert done.returncode == Exit.OK, said
    [line] = [line for line in said.splitlines() if "not pruned" in line]
    assert line.startswith(f"uv cache volume {volume} not pruned (")
    assert "lock" in line and "`torchbisect cache --prune` prunes it later" in line
    assert not PRUNED.search(said) and _cached_wheels(volume) != []
    with Store(tmp_path / "results.sqlite") as store:
        assert [r.cell.id for r in store.runs()] == ["dev-ballast"]

    # on demand: the same failure is exit 3 in one sentence; once the lock is free, it prunes
    holder = _hold_uv_lock(volume)
    try:
        done = _torchbisect(tmp_path, volume, "cache", "--prune", UV_LOCK_TIMEOUT="3")
        said = done.stdout + done.stderr
    finally:
        holder.remove(force=True)
    assert done.returncode == Exit.NO_VERDICT, said
    assert said.count("\n") == 2 and "lock" in said, said
    assert said.startswith("backend: docker (no run is stored and a Docker engine answers; "), said
    done = _torchbisect(tmp_path, volume, "cache")
    said = done.stdout + done.stderr
    assert done.returncode == Exit.OK, said
    assert re.search(rf"uv cache volume {volume}: [\d.]+ MB", said), said
    done = _torchbisect(tmp_path, volume, "cache", "--prune")
    said = done.stdout + done.stderr
    assert done.returncode == Exit.OK and PRUNED.search(said), said
    assert _cached_wheels(volume) == []


def test_no_volume_is_nothing_to_prune(tmp_path, volume):
    done = _torchbisect(tmp_path, volume, "cache", "--prune")
    said = done.stdout + done.stderr
    assert done.returncode == Exit.OK, said
    assert said.strip().splitlines()[-1] == (
        f"uv cache volume {volume} does not exist: nothing to prune"
    )
    import docker

    with pytest.raises(docker.errors.NotFound):  # and asking made none
        docker.from_env().volumes.get(volume)
