"""One way for a test to run torchbisect as its user does, and one check of what the user was told.

`torchbisect(...)` runs `python -m torchbisect` in a child process with this checkout's package
first on the path, however the suite was launched (`command(...)` is its argv, for a test that
starts the process itself); `call(...)` runs the same command line in this process (argparse's
own exits become their status, as a shell would see it), and `invoke(...)` runs it in this process
as `torchbisect(...)` runs it in a child (a folder, an environment, its output captured as text).
The unit tests run the CLI in-process only (tests/unit/conftest.py refuses a child there, as
`starts_the_cli` tells one).  `one_sentence` asserts the rule every error a user can cause
follows: one line, no traceback, the status the table gives its meaning (torchbisect/exits.py),
and it returns that line to check further.
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from itertools import pairwise
from pathlib import Path

from helpers import REPO
from torchbisect import cli
from torchbisect.exits import Exit


def env(
    extra: Mapping[str, str] | None = None, *, base: Mapping[str, str] | None = None
) -> dict[str, str]:
    """`base` (default: this process's environment) with the checkout's src/ first on
    PYTHONPATH (a relative entry there means nothing in another folder), and `extra`."""
    base = os.environ if base is None else base
    path = os.pathsep.join(p for p in (str(REPO / "src"), base.get("PYTHONPATH")) if p)
    return {**base, "PYTHONPATH": path, **(extra or {})}


def command(*argv: str | Path) -> list[str]:
    """The command line of `python -m torchbisect ARGV`, for a test that starts the process itself
    (to signal it, pipe it, or watch it while it runs): with `env()` as its environment."""
    return [sys.executable, "-m", "torchbisect", *map(str, argv)]


def local_matrix(*, backend: str = "venv", store: str = "results.sqlite") -> list[str]:
    """The arguments of `matrix` as a test's project folder runs it: its matrix.yaml, no GPU
    needed, and the store, pages, logs and work folder all written inside that folder."""
    return [
        "matrix",
        "--matrix",
        "matrix.yaml",
        "--allow-no-gpu",
        "--backend",
        backend,
        "--store",
        store,
        "--out",
        "reports",
        "--workdir",
        "work",
    ]


def torchbisect(
    *argv: str | Path,
    cwd: str | Path | None = None,
    env_extra: Mapping[str, str] | None = None,
    timeout: float = 600,
    **kw,
) -> subprocess.CompletedProcess:
    """`python -m torchbisect ARGV` as a user's shell runs it (text output captured, unless
    `text=False` or the test gives `stdout=`/`stderr=` itself), in the environment `env=` gives
    (default: this one), the checkout's src/ first on its path."""
    kw.setdefault("text", True)
    if not {"stdout", "stderr"} & kw.keys():
        kw.setdefault("capture_output", True)
    return subprocess.run(
        command(*argv), cwd=cwd, env=env(env_extra, base=kw.pop("env", None)), timeout=timeout, **kw
    )


def call(*argv: str | Path) -> int:
    """The exit status of `torchbisect ARGV` run in this process (capsys sees its output)."""
    try:
        return int(cli.main([str(a) for a in argv]))
    except SystemExit as done:  # argparse: --help, a usage error
        return int(done.code or 0)


def invoke(
    *argv: str | Path,
    cwd: str | Path | None = None,
    env_extra: Mapping[str, str] | None = None,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess:
    """`torchbisect ARGV` run in this process as `torchbisect(...)` runs it in a child: in `cwd`,
    with the environment `env` gives (default: this one) and `env_extra`, its status and its
    text output returned as a CompletedProcess; the folder and the environment are restored."""
    out, err = io.StringIO(), io.StringIO()
    with (
        _inside(cwd, {**(os.environ if env is None else env), **(env_extra or {})}),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        status = call(*argv)
    return subprocess.CompletedProcess(
        ["torchbisect", *map(str, argv)], status, out.getvalue(), err.getvalue()
    )


@contextlib.contextmanager
def _inside(cwd: str | Path | None, environ: Mapping[str, str]) -> Iterator[None]:
    before, here = dict(os.environ), os.getcwd()
    os.environ.clear()
    os.environ.update(environ)
    try:
        if cwd is not None:
            os.chdir(cwd)
        yield
    finally:
        os.chdir(here)
        os.environ.clear()
        os.environ.update(before)


def starts_the_cli(args: object) -> bool:
    """Whether a child's argv is torchbisect's: `python -m torchbisect …` or the script."""
    if isinstance(args, (str, bytes, os.PathLike)):
        return False  # a shell line or a bare program: no argv to read
    argv = [os.fsdecode(a) if isinstance(a, (bytes, os.PathLike)) else str(a) for a in args]
    if argv and os.path.basename(argv[0]) == "torchbisect":
        return True
    return any(a == "-m" and b.split(".")[0] == "torchbisect" for a, b in pairwise(argv))


def one_sentence(stderr: str, status: int, expected: int, *, command: str | None = None) -> str:
    """The one-line error a user got, checked: `expected` status, a single line on stderr
    (after the command's usage, for a flag argparse refused, and after any `note: ` lines;
    `torchbisect COMMAND: error: …` when `command` is given), no traceback."""
    assert status == expected, (
        f"exit {status}, expected {Exit(expected).name} ({expected}): {stderr}"
    )
    assert "Traceback" not in stderr, stderr
    # a `note: ` line (a user's file standing in for a shipped probe, say) informs and comes
    # first; the error the user got is the one sentence after it
    lines = [line for line in stderr.strip().splitlines() if not line.startswith("note: ")]
    if lines and lines[0].startswith("usage: "):  # argparse's: the command's usage, then one line
        lines = lines[-1:]
    assert len(lines) == 1, f"more than one line was said:\n{stderr}"
    if command is not None:
        assert lines[0].startswith(f"torchbisect {command}: error: "), lines[0]
    return lines[0]
