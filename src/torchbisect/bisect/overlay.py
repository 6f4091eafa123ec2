"""A commit's Python files on a nightly's binary: a hard-linked copy of the nightly's venv.

The nightly is installed once by the wrapped backend (the venv backend: its venv is reused across
commits and runs).  For each commit an overlay folder is made beside it with hard links — seconds
and no disk, where a reinstall would take minutes — and the commit's changed `torch/**.py` files
are then *replaced*: the link is removed first and a new file written, so nothing is ever written
through a link into the nightly's venv.  Their stale bytecode goes too, and the probe runs with
PYTHONDONTWRITEBYTECODE.  An overlay that cannot `import torch` (the commit's Python wants a binary
the nightly does not have) is an infrastructure failure of that commit: unknown, never bad.
"""

from __future__ import annotations

import errno
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .. import proc
from ..backends import probe_env
from ..backends.base import Backend, Prepared, ProbeOutput, note
from ..errors import InfraError
from ..model import Cell
from ..words import last_line
from .gitrange import PythonTree, safe_path

COMMIT_VAR = "TORCHBISECT_COMMIT"  # in an overlay cell's env: the commit, for scripts and reuse


@dataclass(frozen=True, kw_only=True)
class OverlayPlan:
    """What a commit's cell runs on: the nightly's cell, and how to get the commit's files."""

    base: Cell  # the nightly whose binary runs the commit
    commit: str
    tree: Callable[[], PythonTree]  # read from the clone when the commit is prepared


class OverlayBackend(Backend):
    """Runs commit cells as overlays on their nightly; any other cell as the wrapped backend."""

    name = "venv-overlay"

    def __init__(self, inner: Backend, workdir: Path, plans: dict[str, OverlayPlan]):
        self.inner = inner
        self.root = Path(workdir).absolute() / "overlays"
        self.plans = plans

    def check(self) -> None:
        self.inner.check()

    def fingerprint(self, cell: Cell) -> str | None:
        plan = self.plans.get(cell.id)
        return self.inner.fingerprint(plan.base if plan else cell)

    def prepare(self, cell: Cell, *, log: Path) -> Prepared:
        plan = self.plans.get(cell.id)
        if plan is None:
            return self.inner.prepare(cell, log=log)
        start = time.monotonic()
        base = self.inner.prepare(plan.base, log=log)
        if not isinstance(base.handle, Path) or not (base.handle / "pyvenv.cfg").is_file():
            raise InfraError(f"{self.inner.name} gave no venv to overlay {plan.commit[:12]} on")
        dest = self.root / cell.id
        shutil.rmtree(dest, ignore_errors=True)
        python = dest / "bin" / "python"
        env = {**base.env, **dict(cell.env), "PYTHONDONTWRITEBYTECODE": "1"}
        try:
            link_tree(base.handle, dest)
            tree = plan.tree()
            overlay_python_files(dest, tree)
            note(log, f"overlay of {plan.commit[:12]} on {plan.base.id}: {len(tree.write)} "
                      f"Python file(s) written, {len(tree.delete)} removed, the rest hard-linked")
            _check_import(python, env, plan, log)
        except BaseException:
            shutil.rmtree(dest, ignore_errors=True)  # no probe will run here: nothing to keep
            raise
        return Prepared(cell=cell, python=str(python), wheel_sha256=base.wheel_sha256, env=env,
                        seconds_install=time.monotonic() - start, handle=dest)

    def probe(self, prepared: Prepared, *, gpu: int | str | None, probe_args: list[str],
              log: Path) -> ProbeOutput:
        return self.inner.probe(prepared, gpu=gpu, probe_args=probe_args, log=log)

    def release(self, prepared: Prepared) -> None:
        if prepared.cell.id in self.plans:
            shutil.rmtree(prepared.handle, ignore_errors=True)
        else:
            self.inner.release(prepared)


def link_tree(source: Path, dest: Path) -> None:
    """`cp -al source dest`: folders made anew, files hard-linked, links copied as links.
    Across file systems (no hard link possible) files are copied."""
    for folder, dirs, names in os.walk(source):
        here = Path(folder)
        target = dest / here.relative_to(source)
        target.mkdir(parents=True, exist_ok=True)
        for name in [*dirs, *names]:
            src = here / name
            if src.is_symlink():
                os.symlink(os.readlink(src), target / name)
                if name in dirs:
                    dirs.remove(name)  # a link to a folder is copied as a link, not walked
            elif name in names:
                _link(src, target / name)


def _link(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError as err:
        if err.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK):
            raise
        shutil.copy2(src, dst)


def overlay_python_files(dest: Path, tree: PythonTree) -> None:
    """Replace (never write through) the overlay's copies of the commit's Python files."""
    site = package_root(dest)
    inside = dest.resolve()
    for path in (*tree.write, *tree.delete):
        target = site / safe_path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.parent.resolve().is_relative_to(inside):
            raise InfraError(f"{target.parent} leads out of the overlay {dest}")
        target.unlink(missing_ok=True)  # drops the link; the nightly's file is untouched
        for stale in (target.parent / "__pycache__").glob(f"{target.stem}.*.pyc"):
            stale.unlink()
        if path in tree.write:
            target.write_bytes(tree.write[path])


def package_root(venv: Path) -> Path:
    """The site-packages folder of `venv` that holds torch (the folder torch/ paths go under)."""
    found = sorted(venv.glob("lib/python*/site-packages/torch/__init__.py"))
    if not found:
        raise InfraError(f"{venv} holds no torch package to overlay")
    return found[0].parent.parent


def _check_import(python: Path, env: dict[str, str], plan: OverlayPlan, log: Path) -> None:
    done = proc.run([str(python), "-c", "import torch"], env=env, base_env=probe_env.allowed(),
                    timeout=600, log=log, check=False)
    if done.returncode != 0:
        raise InfraError(
            f"the Python files of {plan.commit[:12]} do not import on the binary of "
            f"{plan.base.id} ({last_line(done.output) or f'exit {done.returncode}'}): the "
            "commit cannot be judged on it (unknown, not bad)")
