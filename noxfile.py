"""Sessions of torchbisect: each one installs the package and calls one `torchbisect` command.

Sessions see the base interpreter's site-packages so that the `preinstalled` cell and the `probe`
session test the torch that is already installed (e.g. the one in an NGC image).
"""

import os
import sys

import nox

nox.options.sessions = ["tests", "lint"]
nox.options.reuse_existing_virtualenvs = True
# uv makes a reused session's install check take a fraction of a second (pip's took 7–8 s);
# plain virtualenv + pip where uv is not installed.
nox.options.default_venv_backend = "uv|virtualenv"

SYSTEM_SITE = ["--system-site-packages"]


def _tool(session: nox.Session, command: str) -> None:
    session.install("-e", ".")
    # "preinstalled" means the torch of the interpreter running nox, which a session venv built
    # on another venv would not see through --system-site-packages alone.
    host = os.environ.get("TORCHBISECT_HOST_PYTHON", sys.executable)
    session.run("python", "-m", "torchbisect", command, *session.posargs,
                env={"TORCHBISECT_HOST_PYTHON": host})


@nox.session(venv_params=SYSTEM_SITE)
def matrix(session: nox.Session) -> None:
    """Install and probe every build in matrix.yaml, store results, render reports/."""
    _tool(session, "matrix")


@nox.session(venv_params=SYSTEM_SITE)
def probe(session: nox.Session) -> None:
    """Probe one cell by identifier (default: the interpreter's own torch)."""
    _tool(session, "probe")


@nox.session(venv_params=SYSTEM_SITE)
def plan(session: nox.Session) -> None:
    """Resolve matrix.yaml into wheels (URL + sha256), update the lock, print the plan."""
    _tool(session, "plan")


@nox.session
def report(session: nox.Session) -> None:
    """Render the affected-versions page and its Markdown, JSON and OSV twins."""
    _tool(session, "report")


@nox.session
def merge(session: nox.Session) -> None:
    """Merge result stores from shards: nox -s merge -- OUT.sqlite A.sqlite B.sqlite …"""
    _tool(session, "merge")


@nox.session(venv_params=SYSTEM_SITE)
def bisect(session: nox.Session) -> None:
    """Find the first bad (or --find-fix: first fixed) nightly and the commit range."""
    _tool(session, "bisect")


@nox.session(venv_params=SYSTEM_SITE)
def bench(session: nox.Session) -> None:
    """Measure tool overhead and the workaround's cost; writes reports/bench/."""
    _tool(session, "bench")


@nox.session
def notify(session: nox.Session) -> None:
    """Open or update the status issue when a verdict or the fix status changed (CI)."""
    _tool(session, "notify")


@nox.session
def schema(session: nox.Session) -> None:
    """Regenerate matrix.schema.json from the config model."""
    _tool(session, "schema")


@nox.session(venv_params=SYSTEM_SITE)
def tests(session: nox.Session) -> None:
    """Run the test suite (Docker and Chromium tests run when available, and always under CI)."""
    session.install("-e", ".[test]")
    session.run("python", "-m", "pytest", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """Ruff over the package, tests, noxfile and probes (as Python 3.8); zizmor over .github."""
    session.install("-e", ".", "ruff", "zizmor")
    session.run("ruff", "check", "src", "tests", "noxfile.py")
    session.run("zizmor", "--offline", "--min-severity", "high", ".github")
    session.run("python", "-m", "torchbisect", "schema", "--check")
    session.run("ruff", "check", "--isolated", "--target-version", "py38", "--line-length", "100",
                "--select", "E,F,W,B,SIM,UP,I", "probes")
