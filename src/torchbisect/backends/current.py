"""The `current` backend: the interpreter's own torch, nothing installed.

The `preinstalled` cell probes the torch of the interpreter running torchbisect (in an NGC image,
the image's torch).  A wheel cell given to this backend is overlaid on that same interpreter
(`--no-deps` into a venv that sees its site-packages), which is the venv backend's overlay mode.

The preinstalled torch has no wheel sha256, so its fingerprint is
`preinstalled:<version>:<sha256 of its RECORD>`: it changes when torch is reinstalled or upgraded,
and is computed from the package metadata without importing torch (an import takes seconds and
may initialise CUDA in the tool's own process).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import shutil
import sys
from functools import cache
from pathlib import Path

from .. import proc
from ..errors import BackendUnavailable, CommandFailed
from .venv import DEFAULT_WORKDIR, PhaseHook, VenvBackend

_NO_TORCH = 3
# Run by another interpreter, which may be as old as 3.8: stdlib only, no import of torch.
FINGERPRINT_SNIPPET = """\
import hashlib, importlib.metadata as m
try:
    d = m.distribution("torch")
except m.PackageNotFoundError:
    raise SystemExit(3)
text = d.read_text("RECORD") or d.read_text("METADATA") or ""
print("preinstalled:%s:%s" % (d.version, hashlib.sha256(text.encode("utf-8")).hexdigest()))
"""


def torch_fingerprint(python: str | None = None) -> str:
    """The fingerprint of the torch that `python` (default: this interpreter) would import.

    Raises BackendUnavailable when that interpreter has no torch.
    """
    if python is None or _same_interpreter(python):
        return _own_fingerprint()
    return _other_fingerprint(python)


def torch_version(python: str | None = None) -> str | None:
    """The version of the interpreter's torch ("2.13.0+cpu"), or None when it has none."""
    try:
        return torch_fingerprint(python).split(":")[1]
    except BackendUnavailable:
        return None


class CurrentBackend(VenvBackend):
    """Probes this interpreter's torch; overlays wheel cells on it (never a full install)."""

    name = "current"

    def __init__(self, *, workdir: str | Path = DEFAULT_WORKDIR, python: str | None = None,
                 on_phase: PhaseHook | None = None, install_timeout: float = 3600.0):
        super().__init__(workdir=workdir, overlay=True, python=python, on_phase=on_phase,
                         install_timeout=install_timeout)

    def check(self) -> None:
        torch_fingerprint(self.python)


def _own_fingerprint() -> str:
    try:
        dist = importlib.metadata.distribution("torch")
    except importlib.metadata.PackageNotFoundError:
        raise BackendUnavailable(no_torch_message(sys.executable)) from None
    text = dist.read_text("RECORD") or dist.read_text("METADATA") or ""
    return f"preinstalled:{dist.version}:{hashlib.sha256(text.encode('utf-8')).hexdigest()}"


@cache
def _other_fingerprint(python: str) -> str:
    try:
        out = proc.run([python, "-c", FINGERPRINT_SNIPPET], timeout=60).output
    except CommandFailed as err:
        if err.returncode == _NO_TORCH:
            raise BackendUnavailable(no_torch_message(python)) from None
        raise BackendUnavailable(f"cannot read the torch of {python}: {err}") from None
    lines = [line for line in out.splitlines() if line.startswith("preinstalled:")]
    if not lines:
        raise BackendUnavailable(f"cannot read the torch of {python}: it printed no fingerprint")
    return lines[-1].strip()


def no_torch_message(python: str) -> str:
    return (f"the interpreter {python} has no torch: install torch into it, pass "
            "--interpreter with an interpreter that has one, or name a cell of the plan that "
            "installs a wheel (`torchbisect plan` lists them)")


def _same_interpreter(python: str) -> bool:
    # Not samefile(): a venv's python is a symlink to its base, yet sees other site-packages.
    found = shutil.which(python) or python
    return os.path.abspath(found) == os.path.abspath(sys.executable)
