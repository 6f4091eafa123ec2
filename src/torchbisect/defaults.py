"""The defaults a user meets in more than one command, each defined once, and where they live.

Flags, the matrix file's built-in options, the bisection and the backends read them from here,
so `--store` means the same file in `matrix`, `probe`, `plan`, `report`, `notify` and `bisect`.
A leaf module: it imports nothing from the package, so the model and the CLI can both use it.

Where results go depends on where torchbisect runs.  In a project (the current folder holds a
`matrix.yaml`: a checkout of torchbisect, or a folder `torchbisect init` set up) the matrix, the
store, the logs and the work folder are that folder's: `matrix.yaml`, `reports/`, `.torchbisect/`.
Anywhere else they are one per-user data folder's (platformdirs: `~/.local/share/torchbisect/` on
Linux, `$XDG_DATA_HOME/torchbisect/` when that is set): `matrix.yaml` there is torchbisect's own
default matrix, refreshed from the package on each run (`torchbisect init` writes an editable
copy to the current folder instead), then `reports/` and `work/`.  `--matrix`, `--store`, `--out`
and `--workdir` override each one; outside a project a `--matrix FILE`'s folder is a project too,
for the paths left at their default (cli/__init__.py).  MATRIX, STORE, OUT, BENCH_OUT and
WORKDIR are read when used (a module `__getattr__`), so they follow the current folder.
"""

from __future__ import annotations

from pathlib import Path

PROJECT_FILE = "matrix.yaml"  # a folder holding one is a project
PROBE = "stale_replay"  # the probe script in probes/, without .py
TIMEOUT = 900.0  # seconds a cell (or a bisected nightly) may take before it is stopped


def in_project() -> bool:
    """Whether the current folder is a project (it holds a matrix.yaml)."""
    return Path(PROJECT_FILE).is_file()


def data_home() -> Path:
    """The per-user data folder used outside a project."""
    import platformdirs

    return platformdirs.user_data_path("torchbisect", appauthor=False)


def _paths() -> dict[str, Path]:
    if in_project():
        return {
            "MATRIX": Path(PROJECT_FILE),
            "OUT": Path("reports"),
            "STORE": Path("reports/results.sqlite"),
            "WORKDIR": Path(".torchbisect"),
            "BENCH_OUT": Path("reports/bench"),
        }
    home = data_home()
    return {
        "MATRIX": home / PROJECT_FILE,
        "OUT": home / "reports",
        "STORE": home / "reports" / "results.sqlite",
        "WORKDIR": home / "work",
        "BENCH_OUT": home / "reports" / "bench",
    }


def __getattr__(name: str) -> Path:
    paths = _paths()
    if name in paths:
        return paths[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def packaged_matrix() -> Path:
    """The default matrix.yaml the package carries (a wheel: `torchbisect/_data/`; an editable
    install of a checkout: the checkout's own matrix.yaml)."""
    package = Path(__file__).resolve().parent
    installed = package / "_data" / PROJECT_FILE
    return installed if installed.is_file() else package.parents[1] / PROJECT_FILE


def refresh_default_matrix(matrix: Path) -> bool:
    """Outside a project the data folder's matrix.yaml is the package's default, copied there
    (and refreshed after an upgrade) so its lock and its kinds' locks have a place beside it.
    Whether `matrix` is that default."""
    if Path(matrix) != data_home() / PROJECT_FILE:
        return False
    text = packaged_matrix().read_text(encoding="utf-8")
    if not matrix.is_file() or matrix.read_text(encoding="utf-8") != text:
        matrix.parent.mkdir(parents=True, exist_ok=True)
        matrix.write_text(text, encoding="utf-8")
    return True
