"""The `venv` backend: one uv virtual environment per cell, on this host.

Under the work directory (default `.torchbisect/`):
  venvs/<cell id>/   the cell's venv, reused while its ready-marker names the same wheel sha256
  downloads/         wheels of https URLs whose sha256 the plan does not know (hashed, then deleted)
  probe-json/        a folder per probe run: the probe's copy it runs and the JSON
                     document it writes, read back and deleted

Each venv keeps its build's compile caches inside it, `<venv>/compile-cache/{inductor,triton}`
(TORCHINDUCTOR_CACHE_DIR, TRITON_CACHE_DIR in the probe's environment; a cell's `env:` still
wins): a rerun of a build that has run before (a bisection's re-ask, `--repeat`, `--force`) finds
the kernels it compiled, and no other build ever reads them, since two builds are two venvs and a
venv made anew for another wheel starts with none.  Left to their defaults, every build on the
host would share /tmp/torchinductor_<user> and ~/.triton/cache.

Full install: `uv venv --python <cell python>`, then `uv pip install "torch @ <url>#sha256=<sha>"`:
uv downloads through its cache, which every venv and process on the host shares (set UV_CACHE_DIR
to move it), and refuses a wheel whose sha256 is not the cell's.  Nightly and test builds add
their index as an extra index, for pytorch-triton; `--torch-backend` is never used, since it only
knows the stable indexes.  Overlay: the venv sees the site-packages of the interpreter that has
the CUDA libraries (`--system-site-packages`) and only the torch wheel goes in (`--no-deps`).
The preinstalled cell needs no venv: it runs that interpreter as it is.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import time
import uuid
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

from ..errors import BackendUnavailable, InfraError
from ..model import Cell, Channel
from ..probe.scripts import snapshot
from ..utils import files, owned, proc
from ..utils.words import count, megabytes, visible
from . import probe_env
from .base import (
    Backend,
    BackendOptions,
    Capabilities,
    Prepared,
    ProbeOutput,
    cell_lock,
    host_python,
    note,
    read_document,
)
from .preinstalled import interpreter_of, torch_fingerprint
from .wheels import cell_wheel, discard, extra_index, local_wheel, sha256_file

_MARKER = ".torchbisect-ready.json"
COMPILE_CACHE = "compile-cache"  # inside each venv: that build's Inductor and Triton caches
_TAIL_LINES = 40


class VenvBackend(Backend):
    name = "venv"
    label = "the venv backend"
    can = Capabilities(
        commit_overlays=True,
        keeps_in_workdir=True,
        keeps="a venv per cell under the work folder, and uv's cache on this host",
    )

    def __init__(self, options: BackendOptions | None = None):
        options = options or BackendOptions()
        self.workdir = Path(options.workdir).absolute()
        self.named_workdir = Path(options.workdir)  # as the user named it: what `cache` prints
        self.overlay = options.overlay
        self.python = options.python or host_python()  # the preinstalled torch; overlays' base
        self.watcher = options.watcher
        self.install_timeout = options.install_timeout

    def check(self) -> None:
        uv_binary()

    def measure_kept(self) -> Iterator[str]:
        for what, path in kept(self.named_workdir).items():
            venvs = (
                f"{count(len(list(path.glob('*/pyvenv.cfg'))), 'venv')}, "
                if what == "venvs"
                else ""
            )
            yield visible(f"{what}: {venvs}{megabytes(folder_bytes(path))} in {path}")
        yield "`torchbisect cache --backend venv --prune` removes the venvs and prunes uv's cache"

    def prune_kept(self) -> Iterator[str]:
        for line in prune(self.named_workdir):
            yield visible(line)  # a workdir's path, control codes as pictures

    def fingerprint(self, cell: Cell) -> str | None:
        """What `Prepared.wheel_sha256` will be, when it is known without installing."""
        if cell.channel is Channel.PREINSTALLED:
            return torch_fingerprint(interpreter_of(cell, self.python))
        if cell.sha256:
            return cell.sha256
        path = local_wheel(cell)
        return sha256_file(path) if path and path.is_file() else None

    def prepare(self, cell: Cell, *, log: Path) -> Prepared:
        start = time.monotonic()
        self.watcher.phase(cell, "install")
        if cell.channel is Channel.PREINSTALLED:
            python = interpreter_of(cell, self.python)
            return Prepared(
                cell=cell, python=python, env=dict(cell.env), wheel_sha256=torch_fingerprint(python)
            )
        overlay = self.overlay or cell.overlay
        location, sha, downloaded = self._wheel(cell, log)
        venv = self.workdir / "venvs" / cell.id
        owned.claim(venv.parent, "venvs", cache=True, legacy=_old_venvs)  # for `cache --prune`
        marker = {
            "sha256": sha,
            "overlay": overlay,
            "base": self.python if overlay else (cell.python or self.python),
        }
        try:
            # Another run sharing this work directory may be building the same venv: wait for
            # it, then reuse what it built instead of deleting it under its feet.
            with cell_lock(venv.with_name(f"{cell.id}.lock")):
                if _read_marker(venv) != marker:
                    self._create(venv, cell, overlay=overlay, log=log)
                    self._install(venv, cell, location, overlay=overlay, log=log)
                    _write_marker(venv, marker)
        finally:
            if downloaded:
                discard(downloaded)  # uv's cache and the venv hold it now
        env = {**compile_caches(venv), **dict(cell.env), "PYTHONNOUSERSITE": "1"}
        return Prepared(
            cell=cell,
            python=str(venv_python(venv)),
            wheel_sha256=sha,
            env=env,
            seconds_install=time.monotonic() - start,
            handle=venv,
        )

    def probe(
        self, prepared: Prepared, *, gpu: int | str | None, probe_args: list[str], log: Path
    ) -> ProbeOutput:
        cell = prepared.cell
        self.watcher.phase(cell, "probe")
        # A folder of this run's own: a probe orphaned by a killed run must not answer for this
        # one, and the probe's file is read once, into it, before the build starts.
        run_dir = self.workdir / "probe-json" / f"{cell.id}.{uuid.uuid4().hex}"
        try:
            probe = snapshot(cell.probe, run_dir)
            doc = run_dir / "result.json"
            argv = probe.launch.argv(prepared.python, probe_args, str(doc))
            # no credentials: the allow-listed part of our environment, then the cell's env
            done = proc.run(
                argv,
                env={**prepared.env, **gpu_env(gpu)},
                timeout=cell.timeout,
                base_env=probe_env.allowed(),
                log=log,
                check=False,
            )
            text = read_document(doc)
        finally:
            shutil.rmtree(run_dir, ignore_errors=True)
        tail = "\n".join(done.output.splitlines()[-_TAIL_LINES:])
        return ProbeOutput(
            json_text=text,
            exit_code=done.returncode,
            seconds=done.seconds,
            log_tail=tail,
            probe_version=probe.version,
        )

    # -- install steps ---------------------------------------------------------------------------

    def _wheel(self, cell: Cell, log: Path) -> tuple[str, str, Path | None]:
        """(location for uv, wheel sha256, our download to delete after install or None)."""
        if cell.url and cell.sha256 and local_wheel(cell) is None:
            # uv downloads it through its shared cache and refuses it when the sha256 differs
            return f"{cell.url.split('#', 1)[0]}#sha256={cell.sha256}", cell.sha256, None
        owned.claim(self.workdir / "downloads", "downloads", cache=True, legacy=_old_downloads)
        wheel = cell_wheel(cell, self.workdir / "downloads", log=log, watcher=self.watcher)
        return (
            f"{wheel.path.as_uri()}#sha256={wheel.sha256}",
            wheel.sha256,
            wheel.path if wheel.downloaded else None,
        )

    def _create(self, venv: Path, cell: Cell, *, overlay: bool, log: Path) -> None:
        if overlay:
            _check_python(self.python, cell)
        # Start from nothing: a run killed halfway may have left a venv uv no longer recognises.
        shutil.rmtree(venv, ignore_errors=True)
        python = self.python if overlay else (cell.python or self.python)
        argv = [uv_binary(), "venv", "--no-project", "--python", python]
        if overlay:
            argv.append("--system-site-packages")
        proc.run([*argv, str(venv)], log=log, timeout=600)
        if overlay:
            _see_base_packages(venv, python, log=log)

    def _install(self, venv: Path, cell: Cell, location: str, *, overlay: bool, log: Path) -> None:
        argv = [
            uv_binary(),
            "pip",
            "install",
            "--python",
            str(venv_python(venv)),
            # A torch in the base's site-packages must not count as already installed.
            "--reinstall-package",
            "torch",
            # Once here, in parallel, rather than in every probe child that imports torch.
            "--compile-bytecode",
        ]
        if overlay:
            argv.append("--no-deps")
        index = extra_index(cell)
        if index and not overlay:
            argv += ["--extra-index-url", index]
        proc.run([*argv, f"torch @ {location}"], log=log, timeout=self.install_timeout)


def compile_caches(folder: Path) -> dict[str, str]:
    """The probe's Inductor and Triton caches, kept in the build's own `folder` (its venv): the
    variables torch.compile and Triton read, each naming a folder under `folder`."""
    root = Path(folder).absolute() / COMPILE_CACHE
    return {
        "TORCHINDUCTOR_CACHE_DIR": str(root / "inductor"),
        "TRITON_CACHE_DIR": str(root / "triton"),
    }


def gpu_env(gpu: int | str | None) -> dict[str, str]:
    """Pin the probe to one GPU (an index) or MIG slice (its UUID): see gpus.device_of."""
    if gpu is None:
        return {}
    return {"CUDA_VISIBLE_DEVICES": str(gpu), "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}


def venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


@cache
def uv_binary() -> str:
    found = shutil.which("uv")
    if found:
        return found
    try:
        import uv  # the PyPI package ships the binary

        return uv.find_uv_bin()
    except (ImportError, FileNotFoundError):
        raise BackendUnavailable(
            "uv is not installed: `pip install uv`, or choose --backend current"
        ) from None


@cache
def _python_version(python: str) -> str:
    code = "import sys; print('%d.%d' % sys.version_info[:2])"
    return proc.run([python, "-c", code], timeout=60).output.strip()


def _check_python(python: str, cell: Cell) -> None:
    if cell.python and _python_version(python) != cell.python:
        raise InfraError(
            f"overlay needs a Python {cell.python} interpreter for {cell.id}, but {python} is "
            f"Python {_python_version(python)}: run torchbisect with that interpreter"
        )


def _see_base_packages(venv: Path, base: str, *, log: Path) -> None:
    """Make the overlay see the base environment's packages (its CUDA libraries) after its own.

    `--system-site-packages` is not enough when the base is itself a venv (the interpreter of an
    NGC image or a GPU runner often is): the new venv would see the base's *base* interpreter.
    A .pth file appends the base's site-packages after the overlay's, so the overlay's torch
    still wins.
    """
    code = (
        "import json, site, sys; "
        "print(json.dumps([p for p in sys.path if p.endswith(('site-packages', "
        "'dist-packages'))]))"
    )
    dirs = json.loads(
        proc.run([base, "-c", code], log=log, timeout=120).output.strip().splitlines()[-1]
    )
    own = proc.run(
        [str(venv_python(venv)), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        log=log,
        timeout=120,
    )
    site_dir = Path(own.output.strip().splitlines()[-1])
    (site_dir / "_torchbisect_overlay_base.pth").write_text(
        "".join(f"{d}\n" for d in dirs), encoding="utf-8"
    )
    note(log, f"overlay sees the packages of {base}: {', '.join(dirs)}")


def _read_marker(venv: Path) -> dict[str, Any] | None:
    try:
        marker = json.loads((venv / _MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return marker if isinstance(marker, dict) else None


def _write_marker(venv: Path, marker: dict[str, Any]) -> None:
    files.write_text(venv / _MARKER, json.dumps(marker, sort_keys=True))


# -- clean-up (`torchbisect cache --backend venv`) ------------------------------------------------


def kept(workdir: Path) -> dict[str, Path]:
    """What the backend keeps between runs: the cells' venvs and stray downloads under the work
    directory, and uv's cache (shared with every uv user on the host)."""
    cache_dir = proc.run([uv_binary(), "cache", "dir"], timeout=60).output.strip()
    return {
        "venvs": Path(workdir) / "venvs",
        "downloads": Path(workdir) / "downloads",
        "uv cache": Path(cache_dir.splitlines()[-1]),
    }


def folder_bytes(folder: Path) -> int:
    """Bytes of the files under `folder` (links not followed; a file another process removes
    meanwhile, such as uv's temporary ones, counts nothing); 0 when it does not exist."""
    total = 0
    for root, _dirs, names in os.walk(folder):
        for name in names:
            try:
                info = os.lstat(os.path.join(root, name))
            except OSError:
                continue
            total += info.st_size if stat.S_ISREG(info.st_mode) else 0
    return total


def prune(workdir: Path) -> list[str]:
    """Remove every cell's venv (each under its lock, so a venv another run is building is
    waited for) and the downloads folder, then `uv cache prune --ci`: uv's downloaded wheels
    go, the next install downloads what it needs.  What was done, one line each.

    Only folders this backend made are touched (utils/owned.py): `venvs/` and `downloads/` must
    carry torchbisect's mark, or hold nothing but what an older torchbisect put there; a link
    in their place, or a folder holding anything else, is `owned.NotOurs` before anything goes."""
    venvs, downloads = Path(workdir) / "venvs", Path(workdir) / "downloads"
    how = (
        "remove what you no longer need by hand, or point --workdir at torchbisect's own work "
        "folder"
    )
    owned.check(venvs, "venvs", how=how, legacy=_old_venvs)
    owned.check(downloads, "downloads", how=how, legacy=_old_downloads)
    removed = 0
    for venv in sorted(_entries(venvs)):
        if not _real_folder(venv):
            continue  # a link or a lock file: never followed, never counted
        with cell_lock(venv.with_name(f"{venv.name}.lock")):
            removed += owned.remove_below(Path(workdir), "venvs", venv.name)
    owned.remove_below(Path(workdir), "downloads")
    pruned = proc.run([uv_binary(), "cache", "prune", "--ci"], timeout=600).output.strip()
    said = pruned.splitlines()[-1] if pruned else "uv's cache pruned"
    return [f"removed {removed} venv(s) under {venvs}", said]


def _entries(folder: Path) -> list[Path]:
    return (
        [p for p in folder.iterdir() if p.name not in (owned.MARK, owned.CACHEDIR_TAG)]
        if _real_folder(folder)
        else []
    )


def _real_folder(path: Path) -> bool:
    return path.is_dir() and not owned.is_link(path)


def _old_venvs(venvs: Path) -> bool:
    """An unmarked `venvs/` as an older torchbisect left it: cell venvs (each with its ready
    marker, or beside its lock when a killed run left it half-built) and their lock files."""
    names = {p.name for p in venvs.iterdir()}
    return all(
        (_real_folder(p) and ((p / _MARKER).is_file() or f"{p.name}.lock" in names))
        or (p.name.endswith(".lock") and p.is_file() and not owned.is_link(p))
        for p in venvs.iterdir()
    )


def _old_downloads(downloads: Path) -> bool:
    """An unmarked `downloads/` as an older torchbisect left it: a folder named by a uuid per
    download, holding a wheel or its part file."""
    return all(
        _real_folder(p)
        and re.fullmatch(r"[0-9a-f]{32}", p.name)
        and all(
            f.name.endswith((".whl", ".whl.part")) and not owned.is_link(f) for f in p.iterdir()
        )
        for p in downloads.iterdir()
    )
