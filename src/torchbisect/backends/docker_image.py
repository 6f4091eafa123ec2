"""The images the docker backend runs: base images (pulled when missing) and runner images.

A runner image is `containers/Dockerfile` on a base image: python3 with venv, and uv (the host's
own uv binary when it runs in the engine's containers, else installed with pip through the host's
CA bundle).  It is tagged by a hash of the Dockerfile, the base image id and uv, so it is built
once per base image and reused until one of them changes.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import InfraError
from ..utils import files
from ..utils.proc import run as run_command
from .base import note
from .wheels import sha256_file

RUNNER_REPO = "torchbisect/runner"


def containers_dir() -> Path:
    """`$TORCHBISECT_CONTAINERS`, else the checkout's `containers/` (an editable install)."""
    env = os.environ.get("TORCHBISECT_CONTAINERS")
    return Path(env) if env else Path(__file__).resolve().parents[3] / "containers"


def default_base_image(cuda: str) -> str:
    """The `nvidia/cuda` base image for a CUDA tag; X.Y.0 asks the least of the host driver."""
    if not cuda.startswith("cu") or not cuda[2:].isdigit():
        return "ubuntu:24.04"  # cpu wheels, or an unknown tag: nothing CUDA-specific is needed
    major, minor = int(cuda[2:-1]), int(cuda[-1])
    ubuntu = "24.04" if (major, minor) >= (12, 5) else "22.04"
    return f"nvidia/cuda:{major}.{minor}.0-base-ubuntu{ubuntu}"


def host_ca_bundle() -> Path | None:
    """The CA bundle this host's tools are told to trust (a TLS-intercepting proxy needs it)."""
    for var in ("SSL_CERT_FILE", "PIP_CERT", "REQUESTS_CA_BUNDLE"):
        if os.environ.get(var) and Path(os.environ[var]).is_file():
            return Path(os.environ[var])
    listing = run_command([sys.executable, "-m", "pip", "config", "list"], check=False).output
    for line in listing.splitlines():
        key, _, value = line.partition("=")
        if key.endswith(".cert") and Path(value.strip("'\"")).is_file():
            return Path(value.strip("'\""))
    return None


class RunnerImages:
    """Base and runner images of one engine; parallel cell preparations share one build."""

    def __init__(self, client: Callable[[], Any], *, ca_bundle: Path | None, timeout: float):
        self._client = client
        self.ca_bundle = ca_bundle
        self.timeout = timeout
        self._runners: dict[str, str] = {}  # base image → runner tag
        self._lock = threading.Lock()

    def ensure(self, image: str, log: Path | None) -> Any:
        """The image, pulled if it is not here; InfraError when it cannot be had."""
        import docker

        try:
            return self._client().images.get(image)
        except docker.errors.ImageNotFound:
            pass
        if log:
            note(log, f"pulling {image}")
        try:
            return self._client().images.pull(image)
        except docker.errors.APIError as exc:
            raise InfraError(
                f"the image {image} is not here and cannot be pulled "
                f"({exc.explanation or exc}): pull or build it first"
            ) from None

    def runner(self, base: str, log: Path) -> str:
        """The runner image tag for `base`, built on first use."""
        with self._lock:  # cells prepared in parallel share one build
            if base not in self._runners:
                self._runners[base] = self._build_runner(base, log)
            return self._runners[base]

    def used(self) -> list[str]:
        """The runner images this run has prepared cells in."""
        with self._lock:
            return list(self._runners.values())

    def newest_runner(self) -> str | None:
        """A runner image on this engine to run uv in: one this run used, else the newest."""
        if used := self.used():
            return used[-1]
        found = self._client().images.list(name=RUNNER_REPO)
        found.sort(key=lambda image: image.attrs.get("Created", ""), reverse=True)
        return next((image.tags[0] for image in found if image.tags), None)

    def _build_runner(self, base: str, log: Path) -> str:
        import docker

        base_id = self.ensure(base, log).id
        dockerfile = (containers_dir() / "Dockerfile").read_bytes()
        uv = _linux_uv(self._client())
        key = hashlib.sha256(dockerfile + f"\n{base}\n{base_id}\n".encode())
        key.update(sha256_file(uv).encode() if uv else b"pip")
        tag = f"{RUNNER_REPO}:{key.hexdigest()[:16]}"
        if self._client().images.list(name=tag):
            return tag
        note(log, f"building {tag} from {base}")
        with tempfile.TemporaryDirectory(prefix="torchbisect-build-") as ctx:
            (Path(ctx) / "Dockerfile").write_bytes(dockerfile)
            (Path(ctx) / "uv").write_bytes(uv.read_bytes() if uv else b"")
            (Path(ctx) / "ca-bundle.crt").write_bytes(
                self.ca_bundle.read_bytes() if self.ca_bundle else b""
            )
            try:
                stream = self._client().api.build(
                    path=ctx,
                    tag=tag,
                    buildargs={"BASE_IMAGE": base},
                    rm=True,
                    forcerm=True,
                    pull=False,
                    decode=True,
                    timeout=self.timeout,
                    labels={"torchbisect.base": base},
                )
                with files.open_append(log) as out:
                    for chunk in stream:
                        out.write(chunk.get("stream", ""))
                        if "error" in chunk:
                            raise InfraError(chunk["error"].strip())
            except (InfraError, docker.errors.APIError) as exc:
                raise InfraError(
                    f"building the runner image on {base} failed: {exc}; see {log}"
                ) from None
        return tag


def _linux_uv(client: Any) -> Path | None:
    """A uv binary from this host that runs in the engine's containers, if there is one."""
    if sys.platform != "linux" or client.info().get("Architecture") != os.uname().machine:
        return None
    candidates = [shutil.which("uv")]
    with contextlib.suppress(ImportError, FileNotFoundError):
        import uv

        candidates.insert(0, uv.find_uv_bin())
    for found in filter(None, candidates):
        path = Path(found).resolve()
        with path.open("rb") as fh:
            if fh.read(4) == b"\x7fELF":  # not a shell shim (pyenv, asdf …)
                return path
    return None
