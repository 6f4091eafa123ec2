"""A commit's Python files on a nightly's binary: a copy of the nightly's venv whose compiled
files are hard links.

The nightly is installed once by the wrapped backend (the venv backend: its venv is reused across
commits and runs).  For each commit an overlay folder is made beside it — seconds, where a
reinstall would take minutes — and it is that commit's tree on that binary, nothing else:

* the compiled part is hard links, since it is the bulk of the disk and no Python code
  rewrites it: ELF files (torch's libraries, extension modules, CUDA's) and the headers and CMake
  files built with them (`torch/include/`, `torch/share/`, two thirds of torch's files); every
  other file is a *copy*, so a commit whose code rewrites a file of its package at import writes
  into its own overlay, never through a link into the nightly's venv;
* a copied file that names the nightly's venv (a console script's `#!…/bin/python`, activate
  scripts, .pth files) names the overlay instead, so `torchrun` runs the overlay's code;
* the commit's changed `torch/**.py` files are written, its deleted ones removed with their
  bytecode, and a folder left with nothing but bytecode goes too: no namespace package is left
  where the commit has no package;
* a file the nightly installed otherwise than git has it at the nightly's commit (a ROCm wheel
  hipifies some of torch/_inductor) is never replaced by git's copy: a commit changing one is
  an infrastructure failure of that commit.

The probe runs with PYTHONDONTWRITEBYTECODE.  An overlay that cannot `import torch` (the commit's
Python wants a binary the nightly does not have) is an infrastructure failure of that commit:
unknown, never bad.
"""

from __future__ import annotations

import errno
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..backends import probe_env
from ..backends.base import Backend, Prepared, ProbeOutput, note
from ..backends.venv import COMPILE_CACHE, compile_caches
from ..errors import InfraError
from ..model import Cell
from ..utils import proc
from ..utils.words import last_line
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
        # the commit's own compile caches, never its nightly's (link_tree leaves those behind)
        env = {**base.env, **compile_caches(dest), **dict(cell.env), "PYTHONDONTWRITEBYTECODE": "1"}
        try:
            link_tree(base.handle, dest)
            tree = plan.tree()
            overlay_python_files(dest, tree, commit=plan.commit)
            note(
                log,
                f"overlay of {plan.commit[:12]} on {plan.base.id}: {len(tree.write)} "
                f"Python file(s) written, {len(tree.delete)} removed, the rest hard-linked",
            )
            _check_import(python, env, plan, log)
        except BaseException:
            shutil.rmtree(dest, ignore_errors=True)  # no probe will run here: nothing to keep
            raise
        return Prepared(
            cell=cell,
            python=str(python),
            wheel_sha256=base.wheel_sha256,
            env=env,
            seconds_install=time.monotonic() - start,
            handle=dest,
        )

    def probe(
        self, prepared: Prepared, *, gpu: int | str | None, probe_args: list[str], log: Path
    ) -> ProbeOutput:
        return self.inner.probe(prepared, gpu=gpu, probe_args=probe_args, log=log)

    def release(self, prepared: Prepared) -> None:
        if prepared.cell.id in self.plans:
            shutil.rmtree(prepared.handle, ignore_errors=True)
        else:
            self.inner.release(prepared)


def link_tree(source: Path, dest: Path) -> None:
    """A copy of the venv `source` at `dest` (module docstring): folders made anew, compiled
    files hard-linked, the rest copied with `source`'s path rewritten to `dest`'s, links copied
    as links.  Across file systems (no hard link possible) compiled files are copied too."""
    names_venv = (str(Path(source).absolute()).encode(), str(Path(dest).absolute()).encode())
    for folder, dirs, names in os.walk(source):
        here = Path(folder)
        target = dest / here.relative_to(source)
        target.mkdir(parents=True, exist_ok=True)
        if here == Path(source) and COMPILE_CACHE in dirs:
            dirs.remove(COMPILE_CACHE)  # the nightly's compiled kernels stay its own
        for name in [*dirs, *names]:
            src = here / name
            if src.is_symlink():
                os.symlink(os.readlink(src), target / name)
                if name in dirs:
                    dirs.remove(name)  # a link to a folder is copied as a link, not walked
            elif name in names:
                _place(src, target / name, names_venv, built=_built_with_binary(here))


def _built_with_binary(folder: Path) -> bool:
    """Inside torch/include or torch/share of a site-packages folder."""
    parts = folder.parts
    return any(
        parts[i : i + 3]
        in (("site-packages", "torch", "include"), ("site-packages", "torch", "share"))
        for i in range(len(parts) - 2)
    )


def _place(src: Path, dst: Path, names_venv: tuple[bytes, bytes], *, built: bool) -> None:
    with src.open("rb") as fh:
        if built or fh.read(4) == _ELF:
            _link(src, dst)
            return
    old, new = names_venv
    # what names the venv is small text (scripts, .pth, pyvenv.cfg); bytecode holds lengths
    data = src.read_bytes() if src.stat().st_size <= _NAMING and src.suffix != ".pyc" else b""
    if old in data:
        dst.write_bytes(data.replace(old, new))
    else:
        shutil.copyfile(src, dst)
    shutil.copystat(src, dst)  # the mode (scripts), and the mtime that bytecode checks


_ELF = b"\x7fELF"
_NAMING = 1 << 20


def _link(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError as err:
        if err.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK):
            raise
        shutil.copy2(src, dst)


def overlay_python_files(dest: Path, tree: PythonTree, *, commit: str = "") -> None:
    """Replace (never write through) the overlay's copies of the commit's Python files, remove
    its deleted ones and the folders they leave with nothing but bytecode."""
    site = package_root(dest)
    inside = dest.resolve()
    emptied = set()
    for path in (*tree.write, *tree.delete):
        target = site / safe_path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.parent.resolve().is_relative_to(inside):
            raise InfraError(f"{target.parent} leads out of the overlay {dest}")
        _check_as_git_has_it(target, path, tree, commit)
        target.unlink(missing_ok=True)  # drops the copy (or link); the nightly's is untouched
        for stale in (target.parent / "__pycache__").glob(f"{target.stem}.*.pyc"):
            stale.unlink()
        if path in tree.write:
            target.write_bytes(tree.write[path])
        else:
            emptied.add(target.parent)
    for folder in sorted(emptied, key=lambda f: len(f.parts), reverse=True):
        _drop_if_bare(folder, site / "torch")


def _check_as_git_has_it(target: Path, path: str, tree: PythonTree, commit: str) -> None:
    if path in tree.base and target.is_file() and target.read_bytes() != tree.base[path]:
        raise InfraError(
            f"the nightly's {path} is not git's copy at the nightly's own commit (a ROCm wheel "
            f"hipifies some files), so the change of {commit[:12] or 'this commit'} to it cannot "
            "be overlaid: the commit cannot be judged on this binary (unknown, not bad)"
        )


def _drop_if_bare(folder: Path, top: Path) -> None:
    """Remove `folder`, and the folders above it up to `top`, while they hold nothing but
    bytecode: left there, an emptied package imports as a namespace package."""
    while folder != top and folder.is_relative_to(top) and folder.is_dir():
        if any(entry.name != "__pycache__" for entry in folder.iterdir()):
            return
        shutil.rmtree(folder)
        folder = folder.parent


def package_root(venv: Path) -> Path:
    """The site-packages folder of `venv` that holds torch (the folder torch/ paths go under)."""
    found = sorted(venv.glob("lib/python*/site-packages/torch/__init__.py"))
    if not found:
        raise InfraError(f"{venv} holds no torch package to overlay")
    return found[0].parent.parent


def _check_import(python: Path, env: dict[str, str], plan: OverlayPlan, log: Path) -> None:
    done = proc.run(
        [str(python), "-c", "import torch"],
        env=env,
        base_env=probe_env.allowed(),
        timeout=600,
        log=log,
        check=False,
    )
    if done.returncode != 0:
        raise InfraError(
            f"the Python files of {plan.commit[:12]} do not import on the binary of "
            f"{plan.base.id} ({last_line(done.output) or f'exit {done.returncode}'}): the "
            "commit cannot be judged on it (unknown, not bad)"
        )
