"""The bisection tests' world: a folder index of stand-in nightlies (one per date, a few dates
missing), a stand-in pytorch clone, and the command line that bisects them."""

from __future__ import annotations

import math
import sqlite3
import sys
from contextlib import contextmanager
from pathlib import Path

from helpers import write_wheel
from helpers.indexserver import serve
from helpers.pytorch_clone import make_pytorch_clone

PY = f"{sys.version_info.major}.{sys.version_info.minor}"
TAG = f"cp{sys.version_info.major}{sys.version_info.minor}"
MISSING = {3, 9, 10, 17, 25}
DATES = [f"2025-08-{d:02d}" for d in range(1, 32) if d not in MISSING]
FIRST_BAD = "2025-08-14"
# bad when the installed torch is a nightly of 2025-08-14 or later: decided by the version itself
SCRIPT = (
    "python -c \"import sys, torch; d = torch.__version__.split('dev')[1][:8]; "
    "sys.exit(1 if d >= '20250814' else 0)\""
)


def version_of(day: str, bump: bool | None = None) -> str:
    bump = day >= "2025-08-20" if bump is None else bump
    return f"{'2.11.0' if bump else '2.10.0'}.dev{day.replace('-', '')}+cpu"


def standin_wheel(folder: Path, version: str, git_version: str) -> Path:
    """A minimal valid wheel: torch/__init__.py and torch/version.py."""
    return write_wheel(
        folder,
        version,
        {
            "torch/__init__.py": f"from . import version\n__version__ = {version!r}\n",
            "torch/version.py": f"__version__ = {version!r}\ngit_version = {git_version!r}\n",
        },
        tag=f"{TAG}-{TAG}-manylinux_2_28_x86_64",
    )


def build_index(root: Path, shas: dict[str, tuple[str, str]]) -> None:
    """<root>/torch/index.html in download.pytorch.org's shape, wheels under <root>/wheels/."""
    (root / "torch").mkdir(parents=True)
    (root / "wheels").mkdir()
    versions = [version_of(d) for d in DATES] + [version_of("2025-08-20", bump=False)]
    links = []
    for version in versions:
        day = (
            f"{version.split('dev')[1][:4]}-{version.split('dev')[1][4:6]}-"
            f"{version.split('dev')[1][6:8]}"
        )
        whl = standin_wheel(root / "wheels", version, shas[day][0])
        href = "../wheels/" + whl.name.replace("+", "%2B")
        links.append(f'<a href="{href}" data-dist-info-metadata="sha256=00">{whl.name}</a><br/>')
    (root / "torch" / "index.html").write_text(
        "<!DOCTYPE html>\n<html><body>\n<h1>Links for torch</h1>\n"
        + "\n".join(links)
        + "\n</body></html>\n"
    )


@contextmanager
def nightly_world(tmp_path_factory):
    """The clone and the index on HTTP: (base folder, {date: (nightly sha, main sha)}, index URL).
    The `world` fixture (conftest.py) is one of these per test module."""
    base = tmp_path_factory.mktemp("bisect-e2e")
    shas = make_pytorch_clone(base / "pytorch", DATES, commits_per_day=1)
    build_index(base / "index", shas)
    with serve(base / "index") as url:
        yield base, shas, f"{url}/"


def bisect_args(base: Path, url: str, work: Path, *extra: str) -> list[str]:
    """The arguments of `torchbisect bisect` over this world (for helpers.cli.torchbisect)."""
    return [
        "bisect",
        "--good",
        "2025-08-01",
        "--bad",
        "20250831",
        "--cuda",
        "cpu",
        "--python",
        PY,
        "--index-url",
        url,
        "--backend",
        "venv",
        "--store",
        str(work / "results.sqlite"),
        "--workdir",
        str(base / "venvs"),
        "--repo",
        str(base / "pytorch"),
        "--no-github",
        "--json",
        str(work / "bisect.json"),
        *extra,
    ]


def cli_args(base: Path, url: str, work: Path, *extra: str) -> list[str]:
    """The whole command line of `bisect_args`, for a test that starts the process itself."""
    from helpers.cli import command  # not at the top: conftest.py imports this module

    return command(*bisect_args(base, url, work, *extra))


def env() -> dict[str, str]:
    """This environment with the checkout's src/ first on PYTHONPATH (helpers.cli.env)."""
    from helpers import cli  # not at the top: conftest.py imports this module

    return cli.env()


def stored_runs(work: Path) -> int:
    if not (work / "results.sqlite").exists():
        return 0
    with sqlite3.connect(work / "results.sqlite") as db:
        try:
            return db.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
        except sqlite3.OperationalError:
            return 0


# --repeat 2 (the default with --script) asks each verdict run now twice, then once more at
# each end of the pair
PAIR_REASKS = 2


def search_bound(n: int = len(DATES)) -> int:
    return math.ceil(math.log2(n)) + 2


def bound(n: int = len(DATES)) -> int:
    """The search's probes, and the script's re-asks: every run is counted."""
    return 2 * search_bound(n) + PAIR_REASKS
