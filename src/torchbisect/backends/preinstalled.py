"""What "preinstalled" means: a torch already there, in an interpreter or an image, not installed.

A `preinstalled` cell names where its torch is in `interpreter` (matrix.yaml's
`preinstalled.interpreter`, see `model.split_interpreter`): an interpreter's name or path, or None
for the default one (the interpreter running torchbisect; `python3` in an image).

Such a torch has no wheel sha256, so its fingerprint is `preinstalled:<version>:<sha256 of its
RECORD>`: it changes when torch is reinstalled or upgraded, and is computed from the package
metadata without importing torch (an import takes seconds and may initialise CUDA in the tool's
own process).  The same snippet answers for another interpreter on this host and, through
`IMAGE_ANSWER`, for an image's python in a container.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.metadata
import os
import shutil
import sys
from functools import cache

from .. import cells
from ..errors import BackendUnavailable, CommandFailed, NoTorch
from ..model import Cell, Channel
from ..utils import proc

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
# `sh -c IMAGE_ANSWER FINGERPRINT_SNIPPET <interpreter or "">` in an image: the fingerprint of its
# python's torch, then that python's path (see `read_image_answer`).
IMAGE_ANSWER = (
    'py=$(command -v "${1:-python3}" || command -v python) && "$py" -c "$0" && echo "$py"'
)


def with_torch_version(cell: Cell, *, python: str) -> Cell:
    """A preinstalled cell with the version (and CUDA tag) of the torch it names, read without
    importing torch, so the store and the report can say which torch it was."""
    if cell.channel is not Channel.PREINSTALLED or cell.version:
        return cell
    version = torch_version(interpreter_of(cell, python)) or ""
    cuda = cells.build_tag(version) or cell.cuda
    return dataclasses.replace(cell, version=version, cuda=cuda)


def interpreter_of(cell: Cell, default: str) -> str:
    """The interpreter on this host whose torch a preinstalled cell tests."""
    return (
        default
        if cell.interpreter is None
        else (shutil.which(cell.interpreter) or cell.interpreter)
    )


def read_image_answer(output: str) -> tuple[str, str] | None:
    """(python, fingerprint) from what `IMAGE_ANSWER` printed; None when it found no torch."""
    lines = output.strip().splitlines()
    if len(lines) < 2 or not lines[-2].startswith("preinstalled:"):
        return None
    return lines[-1].strip(), lines[-2].strip()


def torch_fingerprint(python: str | None = None) -> str:
    """The fingerprint of the torch that `python` (default: this interpreter) would import.

    Raises NoTorch (exit 125, cannot tell) when that interpreter has no torch.
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


def no_torch_message(python: str) -> str:
    if _same_interpreter(python):  # e.g. uvx's or pipx's environment, which nobody installs into
        return (
            f"the interpreter running torchbisect ({python}) has no torch: pass "
            "--interpreter with an interpreter that has one (e.g. --interpreter "
            '"$(command -v python3)"), or name a cell of the plan that installs a wheel '
            "(`torchbisect plan` lists them)"
        )
    return (
        f"the interpreter {python} has no torch: install torch into it, pass "
        "--interpreter with an interpreter that has one, or name a cell of the plan that "
        "installs a wheel (`torchbisect plan` lists them)"
    )


def _own_fingerprint() -> str:
    try:
        dist = importlib.metadata.distribution("torch")
    except importlib.metadata.PackageNotFoundError:
        raise NoTorch(no_torch_message(sys.executable)) from None
    text = dist.read_text("RECORD") or dist.read_text("METADATA") or ""
    return f"preinstalled:{dist.version}:{hashlib.sha256(text.encode('utf-8')).hexdigest()}"


@cache
def _other_fingerprint(python: str) -> str:
    try:
        out = proc.run([python, "-c", FINGERPRINT_SNIPPET], timeout=60).output
    except CommandFailed as err:
        if err.returncode == _NO_TORCH:
            raise NoTorch(no_torch_message(python)) from None
        raise BackendUnavailable(f"cannot read the torch of {python}: {err}") from None
    lines = [line for line in out.splitlines() if line.startswith("preinstalled:")]
    if not lines:
        raise BackendUnavailable(f"cannot read the torch of {python}: it printed no fingerprint")
    return lines[-1].strip()


def _same_interpreter(python: str) -> bool:
    # Not samefile(): a venv's python is a symlink to its base, yet sees other site-packages.
    found = shutil.which(python) or python
    return os.path.abspath(found) == os.path.abspath(sys.executable)
