"""The README's quick start, run literally on a stock Debian 12: set-up, then the main job;
then the set-up again from inside an activated venv.

Debian 12's python3 is externally managed (PEP 668), as on most GPU clouds' images, and refuses
`pip install` into it; the container has no torch and no GPU.  The set-up and main-job lines are
read from README.md (never copied here), so the test breaks when the README stops working.  The
image comes from `.ci/docker-setup.sh` (a debootstrapped Debian 12: no registry is reachable);
PyPI is reached with the host's CA bundle, for proxies that intercept TLS.
"""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import tarfile
from pathlib import Path

import pytest
from conftest import IN_CI, REPO

IMAGE = os.environ.get("TORCHBISECT_BASE_IMAGE", "torchbisect/base:bookworm")
_CA_IN_BOX = "/etc/torchbisect/ca-bundle.crt"
_COMMAND = re.compile(r"^ {4}(?P<command>\S.*?)\s{2,}#\s*(?P<comment>.*)$")

pytestmark = pytest.mark.docker


def quick_start_lines(readme: str) -> tuple[list[str], str]:
    """(set-up commands, main-job command) from the Quick start's first code block, picked by
    their comments: `# set-up…` and `# main job…`."""
    section = readme.split("\n## Quick start\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"(?:^ {4}\S.*\n)+", section, re.MULTILINE)
    assert block, "README.md's Quick start has no indented code block"
    lines = [_COMMAND.match(line) for line in block[0].splitlines()]
    setup = [m["command"] for m in lines if m and m["comment"].startswith("set-up")]
    main = [m["command"] for m in lines if m and m["comment"].startswith("main job")]
    assert setup and len(main) == 1, "Quick start: expected `# set-up` lines and one `# main job`"
    return setup, main[0]


def test_quick_start_lines_are_found_in_the_readme():
    setup, main = quick_start_lines((REPO / "README.md").read_text(encoding="utf-8"))
    assert main == "nox -s matrix"
    assert not any("--break-system-packages" in line for line in setup)


def test_readme_set_up_and_main_job_on_stock_debian_12(tmp_path):
    _need_image()
    setup, main = quick_start_lines((REPO / "README.md").read_text(encoding="utf-8"))
    out = tmp_path / "out"
    out.mkdir()
    script = "\n".join([
        "set -eu",
        # The premise: this python3 refuses `pip install` (PEP 668), and there is no torch.
        "test -f /usr/lib/python3.11/EXTERNALLY-MANAGED",
        "! python3 -c 'import torch' 2>/dev/null",
        "mkdir ~/torchbisect && tar -C ~/torchbisect -xf /src.tar && cd ~/torchbisect",
        *setup,
        "set +e",
        f"{main} > /out/main.log 2>&1",
        "echo $? > /out/rc",
        "cp reports/index.html reports/results.sqlite /out/ 2>/dev/null",
        # The same set-up from inside an activated venv, in a home of its own, works too.
        "set -e",
        "python3 -m venv /tmp/user-venv && . /tmp/user-venv/bin/activate",
        "export HOME=/tmp/second-home && mkdir $HOME",
        *setup,
        "command -v nox > /out/from-a-venv",
    ])
    proc = _run_in_debian(script, _tracked_files(tmp_path / "src.tar"), out)
    log = (out / "main.log").read_text(encoding="utf-8") if (out / "main.log").exists() else ""
    assert (out / "rc").exists(), \
        f"the README's set-up failed in {IMAGE}:\n{proc.stdout[-4000:]}"
    assert (out / "rc").read_text().strip() == "0", f"`{main}` failed:\n{log[-4000:]}"
    from_a_venv = (out / "from-a-venv").read_text().strip() if proc.returncode == 0 else ""
    assert from_a_venv == "/tmp/second-home/.venvs/nox/bin/nox", \
        f"the README's set-up failed inside an activated venv:\n{proc.stdout[-4000:]}"
    # As documented for a machine without a GPU: one sentence, nothing probed, a page saying why.
    said = " ".join(log.split())
    assert re.search(r"No GPU is visible .*? no torch, so nothing is probed; .*--allow-no-gpu",
                     said), log
    assert "Traceback" not in log
    page = (out / "index.html").read_text(encoding="utf-8")
    assert "no torch, so nothing was probed" in " ".join(page.split())
    with sqlite3.connect(out / "results.sqlite") as db:
        assert db.execute("SELECT count(*) FROM runs").fetchone() == (0,)


def _need_image() -> None:
    found = subprocess.run(["docker", "image", "inspect", IMAGE], capture_output=True)
    if found.returncode != 0:
        why = f"no image {IMAGE}: run .ci/docker-setup.sh to build it offline"
        if IN_CI:
            pytest.fail(why)
        pytest.skip(why)


def _tracked_files(dest: Path) -> Path:
    """The working tree's files that git tracks or would track: what a fresh clone holds once
    they are committed (no .nox, no venvs, no local store)."""
    names = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                           cwd=REPO, capture_output=True,
                           check=True).stdout.decode().split("\0")
    with tarfile.open(dest, "w") as tar:
        for name in filter(None, names):
            if (REPO / name).is_file():
                tar.add(REPO / name, arcname=name, recursive=False)
    return dest


def _ca_bundle() -> Path:
    for candidate in (os.environ.get("PIP_CERT"), os.environ.get("SSL_CERT_FILE"),
                      _pip_config("global.cert"), "/etc/ssl/certs/ca-certificates.crt"):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    pytest.fail("no CA bundle to give the container (PIP_CERT, SSL_CERT_FILE, pip's cert)")


def _pip_config(key: str) -> str | None:
    got = subprocess.run(["python3", "-m", "pip", "config", "get", key], capture_output=True,
                         text=True)
    return got.stdout.strip() or None


def _run_in_debian(script: str, tar: Path, out: Path) -> subprocess.CompletedProcess:
    # Only the CA variables: pip's and uv's own configuration stays as a stock machine has it.
    env = {"PIP_CERT": _CA_IN_BOX, "SSL_CERT_FILE": _CA_IN_BOX}
    command = ["docker", "run", "--rm", "-v", f"{tar}:/src.tar:ro",
               "-v", f"{_ca_bundle()}:{_CA_IN_BOX}:ro", "-v", f"{out}:/out"]
    for key, value in env.items():
        command += ["-e", f"{key}={value}"]
    return subprocess.run([*command, IMAGE, "bash", "-c", script], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=1200)
