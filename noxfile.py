"""Sessions of torchbisect: each one installs the package and calls one `torchbisect` command.

Sessions see the base interpreter's site-packages so that the `preinstalled` cell and the `probe`
session test the torch that is already installed (e.g. the one in an NGC image).
"""

import hashlib
import os
import sys
from pathlib import Path

import nox

nox.options.sessions = ["tests", "lint"]
nox.options.reuse_existing_virtualenvs = True
# uv makes a reused session's install check take a fraction of a second (pip's took 7–8 s);
# plain virtualenv + pip where uv is not installed.
nox.options.default_venv_backend = "uv|virtualenv"

SYSTEM_SITE = ["--system-site-packages"]


def _install(session: nox.Session, *args: str) -> None:
    """`session.install(*args)` unless this venv already holds them from the same sources.

    uv rebuilds a local package on every install (4-5 s), though an editable one already sees
    every edit to an existing file; what needs a rebuild is a changed pyproject.toml or a file
    added, moved or removed, so the stamp hashes those (and the install's arguments)."""
    stamp = Path(session.virtualenv.location) / ".torchbisect-installed"
    digest = hashlib.sha256(repr(args).encode())
    digest.update(Path("pyproject.toml").read_bytes())
    for path in sorted(
        p
        for top in ("src", "probes")
        for p in Path(top).rglob("*")
        if not any(x == "__pycache__" or x.endswith(".egg-info") for x in p.parts)
    ):
        digest.update(path.as_posix().encode() + b"\0")
    if stamp.is_file() and stamp.read_text() == digest.hexdigest():
        session.log("torchbisect is installed from unchanged sources: not reinstalling")
        return
    session.install(*args)
    # `-R`/--no-install makes session.install a no-op on a reused venv, and run_install with it:
    # the stamp is written exactly when the install ran.
    session.run_install(
        "python",
        "-c",
        "import pathlib, sys; pathlib.Path(sys.argv[1]).write_text(sys.argv[2])",
        str(stamp),
        digest.hexdigest(),
        silent=True,
    )


def _tool(session: nox.Session, command: str, *extra: str) -> None:
    _install(session, "-e", ".")
    # "preinstalled" means the torch of the interpreter running nox, which a session venv built
    # on another venv would not see through --system-site-packages alone.
    host = os.environ.get("TORCHBISECT_HOST_PYTHON", sys.executable)
    session.run(
        "python",
        "-m",
        "torchbisect",
        command,
        *extra,
        *session.posargs,
        env={"TORCHBISECT_HOST_PYTHON": host},
    )


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
    # runners.yaml is the service's fleet: the workflows pass --runners, a local page has none
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
def pages(session: nox.Session) -> None:
    """Redraw every committed page under reports/ (and its screenshots) from its own data."""
    _tool(session, "pages")


@nox.session
def notify(session: nox.Session) -> None:
    """Open or update the status issue when a verdict or the fix status changed (CI)."""
    _tool(session, "notify")


@nox.session
def preflight(session: nox.Session) -> None:
    """Check that the backend a GPU run will use gives it the GPUs (docker: --gpus all)."""
    _tool(session, "preflight")


@nox.session
def cache(session: nox.Session) -> None:
    """What a backend keeps (venvs, uv's cache, docker's volume): its size, or `-- --prune`."""
    _tool(session, "cache")


@nox.session
def schema(session: nox.Session) -> None:
    """Regenerate the JSON Schemas (matrix, runners, results, probe) from their types."""
    _tool(session, "schema")


@nox.session
def docs(session: nox.Session) -> None:
    """Build the manual (docs/, MkDocs, strict) into site/docs/; `-- --site-dir DIR` elsewhere."""
    session.install("mkdocs>=1.6")
    session.run("mkdocs", "build", "--strict", *session.posargs)


def _install_tests(session: nox.Session) -> None:
    """The package with its test extras, and torch when $TORCHBISECT_TEST_TORCH names a wheel or a
    requirement (.ci/run names the torch 2.13.0+cpu wheel): the tests that probe the torch of the
    interpreter running them need one, and a session's venv cannot see the torch of a venv it was
    made from (only that venv's base).  Without it those tests skip, with the reason."""
    torch = os.environ.get("TORCHBISECT_TEST_TORCH", "")
    _install(session, "-e", ".[test]", *([torch] if torch else []))


# More workers than cores, one per long group: the act rehearsal and the other Docker tests each
# keep to one worker (tests/conftest.py), and both can be waiting at once — on a container, or,
# under .ci/run, on the images .ci/docker-setup.sh is still building when the suite starts — while
# the spare workers keep the cores busy.  The fast loop has no such group: one spare.  (At -n 3
# on 2 cores the CPU stayed 97-100 % busy once the images were there, but 64-90 % while they were
# being built; docs/development.md has the figures.)  `-- -n 0` runs everything in one process.
def _xdist(spare: int) -> list[str]:
    return ["-n", str((os.cpu_count() or 1) + spare), "--dist", "loadgroup"]


# The session's venv sees the base interpreter's site-packages (for its torch), and pytest would
# load every plugin installed there too (a base's pytest-benchmark, pytest-timeout …): it loads
# only the test extras' plugins, named here.
_PLUGINS = ("-p", "xdist.plugin", "-p", "xdist.looponfail", "-p", "_hypothesis_pytestplugin")
_PYTEST_ENV = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}


def _pytest(session: nox.Session, *args: str) -> None:
    session.run("python", "-m", "pytest", *_PLUGINS, *args, *session.posargs, env=_PYTEST_ENV)


@nox.session(venv_params=SYSTEM_SITE)
def tests(session: nox.Session) -> None:
    """Run the test suite (Docker and Chromium tests run when available, and always under CI)."""
    _install_tests(session)
    _pytest(session, *_xdist(2))


FAST = "not slow and not docker and not chromium and not gpu"


@nox.session(venv_params=SYSTEM_SITE)
def fast(session: nox.Session) -> None:
    """The fast loop: the tests not marked slow, docker, chromium or gpu (CI runs them all)."""
    _install_tests(session)
    _pytest(session, *_xdist(1), "-m", FAST)


@nox.session
def lint(session: nox.Session) -> None:
    """Ruff (format and lint) over the package, tests, noxfile; mypy over the package
    (pyproject.toml's [tool.mypy]); the probes and setup-tools as Python 3.8; zizmor."""
    # mypy and PyYAML's stubs pinned: a new mypy (or stub) may find new errors, and the lint of
    # a commit should not change with the day it runs; raise them in a commit of their own.
    # ruff too: each release adds rules, and 0.17 began to flag the probes' %-formatting.
    _install(
        session, "-e", ".", "ruff==0.17.6", "zizmor", "mypy==2.4.1", "types-PyYAML==6.0.12.20261122"
    )
    session.run("ruff", "format", "--check", "src", "tests", "noxfile.py")
    session.run("ruff", "check", "src", "tests", "noxfile.py")
    session.run("mypy")
    session.run("zizmor", "--offline", "--min-severity", "high", ".github")
    session.run("python", "-m", "torchbisect", "schema", "--check")
    # The probes keep %-formatting (valid on 3.8) and two lines past 100 columns (stale_replay's
    # first line is its page's title): rewriting them would change the files whose hashes every
    # stored verdict names, for no change in what they do.
    session.run(
        "ruff",
        "check",
        "--isolated",
        "--target-version",
        "py38",
        "--line-length",
        "110",
        "--select",
        "E,F,W,B,SIM,UP,I",
        "--ignore",
        "UP031",
        "probes",
        ".github/actions/setup-tools/tools.py",
    )
