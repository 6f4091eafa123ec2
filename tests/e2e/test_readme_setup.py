"""The README's quick start, run literally on a stock Debian 12: set-up, then the main job.

Debian 12's python3 is externally managed (PEP 668), as on most GPU clouds' images, and refuses
`pip install` into it; the containers have no GPU.  The set-up and main-job lines are read from
README.md (never copied here), so the test breaks when the README stops working.  Two runs: a
python3 without torch (then the same set-up again from inside an activated venv), and one with
torch in the system python, as in an NGC image.  The images come from `.ci/docker-setup.sh`
(debootstrapped Debian 12: no registry is reachable); PyPI is reached with the host's CA bundle,
for proxies that intercept TLS.
"""

from __future__ import annotations

import os
import re
import subprocess
import tarfile
from pathlib import Path

import pytest
from helpers import IN_CI, REPO, docker_image_exists

from torchbisect.store.db import Store

IMAGE = os.environ.get("TORCHBISECT_BASE_IMAGE", "torchbisect/base:bookworm")
TORCH_IMAGE = f"{IMAGE}-torch"  # the same, with torch 2.13.0+cpu in its system python
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
    setup, main = quick_start_lines((REPO / "README.md").read_text(encoding="utf-8"))
    tar = _tracked_files(tmp_path / "src.tar")

    # No torch: one sentence, nothing probed, a page that says why, exit 0.
    out, proc, log = _quick_start(
        _need_image(IMAGE),
        tar,
        tmp_path / "bare",
        setup,
        main,
        before=["! python3 -c 'import torch' 2>/dev/null"],
        after=[
            "python3 -m venv /tmp/user-venv && . /tmp/user-venv/bin/activate",
            "export HOME=/tmp/second-home && mkdir $HOME",
            *setup,
            "command -v nox > /out/from-a-venv",
        ],
    )
    assert re.search(
        r"No GPU is visible .*? no torch, so nothing is probed; .*--allow-no-gpu",
        " ".join(log.split()),
    ), log
    page = (out / "index.html").read_text(encoding="utf-8")
    assert "no torch, so nothing was probed" in " ".join(page.split())
    assert _stored(out) == []
    from_a_venv = (out / "from-a-venv").read_text().strip() if proc.returncode == 0 else ""
    assert from_a_venv == "/tmp/second-home/.venvs/nox/bin/nox", (
        f"the README's set-up failed inside an activated venv:\n{proc.stdout[-4000:]}"
    )

    # torch in the system python: the set-up keeps it visible, and only it is probed.
    out, _, log = _quick_start(
        _need_image(TORCH_IMAGE),
        tar,
        tmp_path / "torch",
        setup,
        main,
        before=["python3 -c 'import torch'"],
        after=[],
    )
    assert re.search(
        r"No GPU is visible .*?, so only the torch of \S+ is probed", " ".join(log.split())
    ), log
    assert _stored(out) == [("preinstalled", "skipped")]


def _quick_start(
    image: str,
    tar: Path,
    out: Path,
    setup: list[str],
    main: str,
    *,
    before: list[str],
    after: list[str],
):
    """In `image`: `before` (premises), the set-up, the main job (output and status kept in
    `out`), then `after`.  Returns (out, the container's process, the main job's output)."""
    out.mkdir()
    script = "\n".join(
        [
            "set -eu",
            "test -f /usr/lib/python3.11/EXTERNALLY-MANAGED",  # pip refuses the system python
            *before,
            "mkdir ~/torchbisect && tar -C ~/torchbisect -xf /src.tar && cd ~/torchbisect",
            *setup,
            "set +e",
            f"{main} > /out/main.log 2>&1",
            "echo $? > /out/rc",
            "set -e",
            "cp reports/index.html reports/results.sqlite /out/",
            *after,
        ]
    )
    proc = _run_in_debian(image, script, tar, out)
    log = (out / "main.log").read_text(encoding="utf-8") if (out / "main.log").exists() else ""
    assert (out / "rc").exists(), f"the README's set-up failed in {image}:\n{proc.stdout[-4000:]}"
    assert (out / "rc").read_text().strip() == "0", f"`{main}` failed in {image}:\n{log[-4000:]}"
    assert "Traceback" not in log
    return out, proc, log


def _stored(out: Path) -> list[tuple[str, str]]:
    """(cell id, verdict) of every run in the store the main job left."""
    with Store(out / "results.sqlite") as store:
        return [(r.cell.id, r.verdict.value if r.verdict else "") for r in store.runs()]


def _need_image(image: str) -> str:
    if not docker_image_exists(image):
        why = f"no image {image}: run .ci/docker-setup.sh to build it offline"
        if IN_CI:
            pytest.fail(why)
        pytest.skip(why)
    return image


def _tracked_files(dest: Path) -> Path:
    """The working tree's files that git tracks or would track: what a fresh clone holds once
    they are committed (no .nox, no venvs, no local store)."""
    names = (
        subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=REPO,
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .split("\0")
    )
    with tarfile.open(dest, "w") as tar:
        for name in filter(None, names):
            if (REPO / name).is_file():
                tar.add(REPO / name, arcname=name, recursive=False)
    return dest


def _ca_bundle() -> Path:
    for candidate in (
        os.environ.get("PIP_CERT"),
        os.environ.get("SSL_CERT_FILE"),
        _pip_config("global.cert"),
        "/etc/ssl/certs/ca-certificates.crt",
    ):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    pytest.fail("no CA bundle to give the container (PIP_CERT, SSL_CERT_FILE, pip's cert)")


def _pip_config(key: str) -> str | None:
    got = subprocess.run(
        ["python3", "-m", "pip", "config", "get", key], capture_output=True, text=True
    )
    return got.stdout.strip() or None


def _run_in_debian(image: str, script: str, tar: Path, out: Path) -> subprocess.CompletedProcess:
    # Only the CA variables: pip's and uv's own configuration stays as a stock machine has it.
    command = [
        "docker",
        "run",
        "--rm",
        "-v",
        f"{tar}:/src.tar:ro",
        "-v",
        f"{_ca_bundle()}:{_CA_IN_BOX}:ro",
        "-v",
        f"{out}:/out",
        "-e",
        f"PIP_CERT={_CA_IN_BOX}",
        "-e",
        f"SSL_CERT_FILE={_CA_IN_BOX}",
    ]
    return subprocess.run(
        [*command, image, "bash", "-c", script],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=1200,
    )
