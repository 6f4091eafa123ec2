"""The defaults a user meets in more than one command, each defined once.

Flags, the matrix file's built-in options, the bisection and the backends read them from here,
so `--store` means the same file in `matrix`, `probe`, `plan`, `report`, `notify` and `bisect`.
A leaf module: it imports nothing from the package, so the model and the CLI can both use it.
"""

from __future__ import annotations

from pathlib import Path

MATRIX = Path("matrix.yaml")  # the matrix file
STORE = Path("reports/results.sqlite")  # the result store
OUT = Path("reports")  # the report folder; cell logs go to OUT/logs/
BENCH_OUT = OUT / "bench"  # benchmark figures measured on a GPU
WORKDIR = Path(".torchbisect")  # venvs, downloads and probe output
PROBE = "stale_replay"  # the probe script in probes/, without .py
TIMEOUT = 900.0  # seconds a cell (or a bisected nightly) may take before it is stopped
