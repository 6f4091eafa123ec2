"""D7 with the docker backend on a real engine: after kill -9 of `matrix`, the probe's container
does not run on — the watchdog removes it."""

from __future__ import annotations

import signal
import socket
import subprocess

import pytest
from helpers.cli import command
from helpers.runaway import environment, project, wait_until

from torchbisect.exits import Exit

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def test_kill_9_of_a_docker_matrix_leaves_no_container(tmp_path):
    import docker

    client = docker.from_env()
    project(tmp_path)  # the hanging probe
    (tmp_path / "matrix.yaml").write_text(
        "defaults:\n  timeout: 300\npreinstalled:\n  image: torchbisect/base:bookworm-torch\n"
        "  env: {TB_MODE: hang}\n"
    )
    env, _ = environment(tmp_path, "hang")
    argv = command(
        "matrix",
        "--allow-no-gpu",
        "--backend",
        "docker",
        "--store",
        "results.sqlite",
        "--workdir",
        "work",
        "--no-report",
    )
    child = subprocess.Popen(
        argv, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    owner = f"torchbisect.owner={socket.gethostname()}:{child.pid}"

    def boxes(**extra):  # the low-level list: containers vanish while we look, as they should
        labels = [owner, *(f"{k}={v}" for k, v in extra.items())]
        return client.api.containers(all=True, filters={"label": labels})

    try:
        assert wait_until(lambda: boxes(**{"torchbisect.step": "probe"}), 180), (
            "the probe container never started"
        )
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert wait_until(lambda: not boxes(), 60), [b["Names"] for b in boxes()]


def test_two_docker_runs_sharing_a_workdir_give_no_false_failures(tmp_path):
    from torchbisect.store.db import Store

    argv = project(tmp_path, cells=2)
    entries = (tmp_path / "matrix.yaml").read_text().split("dev:\n", 1)[1]
    (tmp_path / "matrix.yaml").write_text(
        "defaults:\n  timeout: 300\n  cuda: cpu\n  python: '3.11'\n"
        f"images:\n  cpu: torchbisect/base:bookworm\ndev:\n{entries}"
    )
    env, _ = environment(tmp_path, "daemon")
    argv[argv.index("venv")] = "docker"
    # one run at a time per store and workdir (runlock): the second queues with --wait
    runs = [
        subprocess.Popen(
            command(*argv, "--force", "--wait"),
            cwd=tmp_path,
            env=env,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        for _ in range(2)
    ]
    outputs = [r.communicate(timeout=600)[0] for r in runs]
    assert [r.returncode for r in runs] == [Exit.OK, Exit.OK], "\n".join(outputs)
    with Store(tmp_path / "results.sqlite") as store:
        assert [r.status.value for r in store.runs()] == ["ok"] * 4
