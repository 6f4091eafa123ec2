"""Builders shared by the run/store tests: cells, probe documents, runs, a scripted backend and a
tiny stand-in torch wheel (installs in a blink, so the real venv code path stays fast)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import threading
import time
import zipfile
from collections import defaultdict
from pathlib import Path

from torchbisect.backends.base import Backend, Prepared, ProbeOutput
from torchbisect.model import Cell, CellRun, Channel, ProbeResult, RunStatus, Verdict

HELPERS = Path(__file__).resolve().parent
TESTS = HELPERS.parent
REPO = TESTS.parent
DATA = TESTS / "data"
# Under CI the Docker and Chromium tests are required: they fail instead of skipping (conftest).
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
FAKE_PROBES = HELPERS / "probes"
CASES = ("capture_data_ptr", "control_clone")
_CONTROLS = {"control_clone": "not_affected"}  # as probes/stale_replay.py declares it


def make_cell(cell_id: str = "dev-a", **kw) -> Cell:
    values = dict(
        id=cell_id,
        channel=Channel.DEV,
        version="2.99.0+cpu",
        cuda="cpu",
        python="3.11",
        url=f"/wheels/{cell_id}.whl",
        sha256=_hex(cell_id),
    )
    values.update(kw)
    return Cell(**values)


def probe_doc(verdict: str = "skipped", cases: dict[str, str] | None = None, **extra) -> dict:
    # the control behaves (the cases roll up to `verdict`, model.roll_up) unless nothing ran
    cases = cases or {
        name: verdict
        if name not in _CONTROLS or verdict in ("skipped", "inconclusive")
        else _CONTROLS[name]
        for name in CASES
    }
    return {
        "schema": 1,
        "probe": "stale_replay",
        "probe_version": "1",
        "verdict": verdict,
        "cases": {n: {"verdict": v, "detail": f"{n} {v}"} for n, v in cases.items()},
        "env": {"torch_version": "2.99.0+cpu"},
        **extra,
    }


def make_run(
    cell: Cell | None = None,
    *,
    status: RunStatus = RunStatus.OK,
    verdict: str = "skipped",
    started: str = "2026-11-29T10:00:00.000000+00:00",
    gpu: str = "NVIDIA H200",
    driver: str = "580.159.04",
    probe_version: str = "1+abc",
    **kw,
) -> CellRun:
    cell = cell or make_cell()
    result = ProbeResult.from_json(probe_doc(verdict)) if status is RunStatus.OK else None
    values = dict(
        cell=cell,
        status=status,
        result=result,
        wheel_sha256=cell.sha256 or "",
        probe_version=probe_version,
        gpu=gpu,
        driver=driver,
        backend="venv",
        started=started,
        seconds_install=1.5,
        seconds_probe=2.5,
        reason="" if status is RunStatus.OK else "install: boom",
    )
    values.update(kw)
    return CellRun(**values)


def ok_output(verdict: str = "skipped", seconds: float = 0.01) -> ProbeOutput:
    code = {"affected": 1, "not_affected": 0, "refused": 0}.get(verdict, 125)
    return ProbeOutput(json_text=json.dumps(probe_doc(verdict)), exit_code=code, seconds=seconds)


class ScriptedBackend(Backend):
    """The one stand-in backend: installs nothing, answers from tables keyed by cell id or from a
    function of the cell, and records what happened so tests can check the scheduling.

    `installs[id]` / `probes[id]`: an exception to raise, or (for probes) a ProbeOutput to return;
    `answer(cell)`: a probe document (or ProbeOutput) for the cells `probes` does not name;
    `stop_after`: a KeyboardInterrupt at that many probes, standing in for a kill;
    `wait_for[a] = b`: the probe of `a` waits (up to 5 s) for `b`'s install to start, and
    `waited[a]` says whether it did (the lookahead installs while a probe runs).
    """

    name = "scripted"

    def __init__(
        self,
        *,
        install_s: float = 0.0,
        probe_s: float = 0.0,
        installs=None,
        probes=None,
        answer=None,
        stop_after: int | None = None,
    ):
        self.install_s, self.probe_s = install_s, probe_s
        self.installs = dict(installs or {})
        self.probes = dict(probes or {})
        self.answer, self.stop_after = answer, stop_after
        self.prepared: list[Cell] = []
        self.probed: list[Cell] = []
        self.ready: defaultdict[str, threading.Event] = defaultdict(threading.Event)
        self.wait_for: dict[str, str] = {}
        self.waited: dict[str, bool] = {}
        self.lock = threading.Lock()
        self.events: list[tuple[float, str, str]] = []
        self.active_probes: dict[int | None, int] = defaultdict(int)
        self.max_per_gpu = 0
        self.overlap = False  # an install ran while some probe ran
        self.probing = 0
        self.max_probing = 0  # probes running at once, over all GPUs
        self.released: list[str] = []
        self.gpus_used: list[int | None] = []

    def check(self) -> None:
        pass

    def fingerprint(self, cell: Cell) -> str | None:
        return cell.sha256

    def prepare(self, cell: Cell, *, log: Path) -> Prepared:
        self._event("install", cell.id)
        with self.lock:
            self.prepared.append(cell)
        self.ready[cell.id].set()
        with self.lock:
            self.overlap |= self.probing > 0
        time.sleep(self.install_s)
        outcome = self.installs.get(cell.id)
        if isinstance(outcome, BaseException):
            raise outcome
        return Prepared(
            cell=cell,
            python="python",
            wheel_sha256=cell.sha256 or "",
            handle=cell.id,
            seconds_install=self.install_s,
        )

    def probe(self, prepared: Prepared, *, gpu, probe_args, log) -> ProbeOutput:
        with self.lock:
            self.active_probes[gpu] += 1
            self.max_per_gpu = max(self.max_per_gpu, self.active_probes[gpu])
            self.probing += 1
            self.max_probing = max(self.max_probing, self.probing)
            self.gpus_used.append(gpu)
        self._event("probe", prepared.cell.id)
        try:
            return self._answer(prepared.cell)
        finally:
            with self.lock:
                self.active_probes[gpu] -= 1
                self.probing -= 1

    def _answer(self, cell: Cell) -> ProbeOutput:
        if cell.id in self.wait_for:
            self.waited[cell.id] = self.ready[self.wait_for[cell.id]].wait(5)
        if self.stop_after is not None and len(self.probed) >= self.stop_after:
            raise KeyboardInterrupt  # stands in for the process being killed
        self.probed.append(cell)
        time.sleep(self.probe_s)
        outcome = self.probes.get(cell.id) or (self.answer(cell) if self.answer else ok_output())
        if isinstance(outcome, BaseException):
            raise outcome
        if isinstance(outcome, dict):
            return ProbeOutput(
                json_text=json.dumps(outcome),
                seconds=0.0,
                exit_code=Verdict(outcome["verdict"]).exit_code,
            )
        return outcome

    def release(self, prepared: Prepared) -> None:
        with self.lock:
            self.released.append(prepared.cell.id)

    def _event(self, what: str, cell_id: str) -> None:
        with self.lock:
            self.events.append((time.monotonic(), what, cell_id))


def fake_torch_wheel(folder: Path, version: str = "2.99.0+cpu", git_version: str = "") -> Path:
    """A pure-Python wheel named torch: `import torch` works and reports no CUDA device (and
    `torch.version.git_version`, when given)."""
    git = f"class version:\n    git_version = {git_version!r}\n" if git_version else ""
    return write_wheel(
        folder,
        version,
        {
            "torch/__init__.py": (
                f"__version__ = {version!r}\n{git}"
                "class cuda:\n    @staticmethod\n"
                "    def is_available():\n        return False\n"
            )
        },
    )


def write_wheel(
    folder: Path,
    version: str,
    files: dict[str, str],
    *,
    tag: str = "py3-none-any",
    build: str = "",
    requires: tuple[str, ...] = (),
) -> Path:
    """An installable wheel named torch holding `files`: dist-info (METADATA, WHEEL, RECORD with
    real hashes) is added, so pip and uv accept it.  The one wheel writer of the test suite.
    `build` is a PEP 427 build tag (a re-spin: `torch-2.10.0-3-…whl`); `requires` are
    Requires-Dist lines of its METADATA."""
    folder.mkdir(parents=True, exist_ok=True)
    dist = f"torch-{version}.dist-info"
    metadata = f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n" + "".join(
        f"Requires-Dist: {r}\n" for r in requires
    )
    files = {
        **files,
        f"{dist}/METADATA": metadata,
        f"{dist}/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: tests\n"
            f"Root-Is-Purelib: {str(tag.endswith('-any')).lower()}\n"
            + (f"Build: {build}\n" if build else "")
            + f"Tag: {tag}\n"
        ),
    }
    record = [f"{name},sha256={_b64(text)},{len(text.encode())}" for name, text in files.items()]
    files[f"{dist}/RECORD"] = "\n".join([*record, f"{dist}/RECORD,,"]) + "\n"
    path = folder / f"torch-{version}{'-' + build if build else ''}-{tag}.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for name, text in files.items():
            zf.writestr(name, text)
    return path


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _b64(text: str) -> str:
    digest = hashlib.sha256(text.encode()).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def _hex(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def docker_image_exists(image: str) -> bool:
    """Whether the local Docker engine has `image` (no pull)."""
    return (
        subprocess.run(
            ["docker", "image", "inspect", image], capture_output=True, check=False
        ).returncode
        == 0
    )


def find_test_wheel(pattern: str = "torch-2.13.0+cpu-cp3*-*.whl") -> Path | None:
    """The real torch 2.13.0+cpu wheel: $TORCHBISECT_TEST_WHEEL, else pip's find-links folders."""
    import os
    import subprocess
    import sys

    given = os.environ.get("TORCHBISECT_TEST_WHEEL")
    folders = [Path(given)] if given else []
    if given and Path(given).is_file():
        return Path(given)
    listing = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True
    ).stdout
    for line in listing.splitlines():
        key, _, value = line.partition("=")
        if key.endswith("find-links"):
            folders += [Path(v) for v in value.strip("'\"").split()]
    for folder in folders:
        found = sorted(folder.glob(pattern)) if folder.is_dir() else []
        if found:
            return found[0]
    return None


def python_with_torch(version: str) -> str | None:
    """An interpreter of Python `version` that has torch and its pure-Python dependencies."""
    import os
    import shutil
    import subprocess
    import sys

    code = (
        "import sys, importlib.metadata as m; m.distribution('torch');"
        "import sympy, networkx, jinja2, fsspec, filelock, typing_extensions;"
        "print('%d.%d' % sys.version_info[:2])"
    )
    # $TORCHBISECT_TEST_PYTHON: CI's venv (.ci/run), which a nox session's venv cannot see.
    # In a nox session, python3 on PATH is the session's venv; its base may have torch.
    candidates = (
        os.environ.get("TORCHBISECT_TEST_PYTHON"),
        sys.executable,
        getattr(sys, "_base_executable", None),
        shutil.which("python3"),
        shutil.which(f"python{version}"),
    )
    for python in candidates:
        if not python:
            continue
        out = subprocess.run([python, "-c", code], capture_output=True, text=True)
        if out.returncode == 0 and out.stdout.strip() == version:
            return python
    return None


def wheel_python(wheel: Path) -> str:
    """ "3.11" for a cp311 wheel."""
    tag = wheel.name.split("-")[2]  # torch-2.13.0+cpu-cp311-cp311-…
    return f"{tag[2]}.{tag[3:]}"


def committed(folder: Path, pattern: str) -> list[Path]:
    """The files under `folder` that git tracks whose path ends in `pattern` (Path.match): a
    user's own outputs there (a quick start's reports/index.html) are never read."""
    import subprocess

    listed = (
        subprocess.run(
            ["git", "ls-files", "-z", "--", "."], cwd=folder, capture_output=True, check=True
        )
        .stdout.decode()
        .split("\0")
    )
    return sorted(folder / name for name in filter(None, listed) if Path(name).match(pattern))
