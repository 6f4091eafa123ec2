"""What a matrix run is asked to do: `MatrixOptions`, built once from the flags (commands/matrix.py)
and read, never written, by `run_matrix` (run/matrix_run.py).

The values derived from the flags are here too, worked out once by the command: matrix.yaml,
loaded (nothing below the command reads the file again; its path stays for the lock beside it
and the sentences that name it), the lock file
(`--lock`, a runner kind's `<lock-dir>/<kind>.lock.json`, else `<matrix>.lock.json`), the driver
the plan is for (`--driver`, else the one the kind declares), and the kind itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..backends.base import host_python
from ..config.matrix import MatrixConfig
from ..config.runners import Kind, Runners


@dataclass(frozen=True, kw_only=True)
class MatrixOptions:
    # The paths have no defaults here: defaults.py's follow the current folder, so the command
    # that builds the options reads them when it runs.
    matrix: Path  # where matrix.yaml is: the lock beside it, the sentences that name it
    config: MatrixConfig  # matrix.yaml, loaded once by the command
    lock: Path  # the lock file the plan reads and the installer pins into
    offline: bool = False  # plan from the lock alone
    driver: str | None = None  # the driver the plan is for (None: this machine's)
    backend: str | None = None  # None: docker when an engine answers, else venv
    overlay: bool = False  # every cell's torch wheel alone (--no-deps) over `interpreter`'s
    store: Path
    cells: str | None = None  # --cells: glob patterns over cell ids, comma-separated
    skip: str | None = None  # --skip: the same, left out
    shard: str | None = None  # "i/n"
    force: bool = False  # probe even the cells whose verdict is stored
    allow_no_gpu: bool = False  # without a GPU, still install and probe every cell
    interpreter: str | None = None  # the interpreter with the CUDA libraries (None: host_python)
    workdir: Path  # venvs, downloads and probe output
    logs: Path  # one log per cell id (OUT/logs/)
    jobs: int | None = None  # cells installed ahead of the probes (None: two per GPU)
    runners: Runners | None = None  # runners.yaml, loaded, with `kind`
    kind: Kind | None = None  # the declared kind this runner claims to be

    @property
    def python(self) -> str:
        """The interpreter whose torch the preinstalled cell tests and overlays build on."""
        return self.interpreter or host_python()
