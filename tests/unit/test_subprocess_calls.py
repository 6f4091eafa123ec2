"""One helper runs subprocesses (utils/proc.py): no other module starts one, bar those saying why.

Read from the source (the AST of every module under src/torchbisect, as test_layering.py reads
imports), so a `subprocess.run` added anywhere fails here, not in a review: route it through
`proc.run`, or add it to `EXCEPTIONS` with the reason, said at the call too.
"""

from __future__ import annotations

import ast
from pathlib import Path

from helpers import REPO

SRC = REPO / "src"
HELPER = "torchbisect.utils.proc"
# What starts a process: subprocess's functions, and os's.
STARTERS = {
    "subprocess": {
        "run",
        "Popen",
        "call",
        "check_call",
        "check_output",
        "getoutput",
        "getstatusoutput",
    },
    "os": {
        "system",
        "popen",
        "fork",
        "forkpty",
        "posix_spawn",
        "posix_spawnp",
        "execl",
        "execle",
        "execlp",
        "execlpe",
        "execv",
        "execve",
        "execvp",
        "execvpe",
        "spawnl",
        "spawnle",
        "spawnlp",
        "spawnlpe",
        "spawnv",
        "spawnve",
        "spawnvp",
        "spawnvpe",
    },
}
# (module, the function the call is in): why it does not go through proc.run.
EXCEPTIONS = {
    (
        "torchbisect.bench.scale",
        "measure_scale",
    ): "the call is what is timed; proc's sweep after the child exits would count as its time",
    (
        "torchbisect.bench.tool",
        "gpu_speedup",
    ): "the matrix's own progress goes to the terminal as it happens; proc captures it",
    (
        "torchbisect.bench.workaround",
        "_driver",
    ): "a standalone script, run in a cell's environment: it imports nothing of torchbisect",
    (
        "torchbisect.pages.chromium",
        "__init__",
    ): "a standalone script (it imports nothing of torchbisect) that hands chromium the "
    "DevTools pipes on fds 3 and 4, which proc's captured streams cannot",
}


def _module(path: Path, src: Path) -> str:
    parts = path.relative_to(src).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def starts(path: Path) -> list[tuple[str, str, int]]:
    """(the function it is in, what it calls, line) of each call in `path` that starts a process,
    however subprocess or os was imported (`import subprocess as sp`, `from os import system`)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    modules, names = {}, {}  # local name → "subprocess"; local name → "subprocess.run"
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {(a.asname or a.name): a.name for a in node.names if a.name in STARTERS}
        elif isinstance(node, ast.ImportFrom) and node.module in STARTERS and not node.level:
            names |= {
                (a.asname or a.name): f"{node.module}.{a.name}"
                for a in node.names
                if a.name in STARTERS[node.module]
            }
    found = []

    def visit(node: ast.AST, function: str) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            function = node.name
        if isinstance(node, ast.Call):
            called = _called(node.func, modules, names)
            if called:
                found.append((function, called, node.lineno))
        for child in ast.iter_child_nodes(node):
            visit(child, function)

    visit(tree, "")
    return found


def _called(func: ast.expr, modules: dict[str, str], names: dict[str, str]) -> str | None:
    if isinstance(func, ast.Name):
        return names.get(func.id)
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        module = modules.get(func.value.id)
        if module and func.attr in STARTERS[module]:
            return f"{module}.{func.attr}"
    return None


def every_start(src: Path = SRC) -> dict[tuple[str, str], list[str]]:
    """(module, function) → the calls there that start a process, outside the helper."""
    found: dict[tuple[str, str], list[str]] = {}
    for path in sorted((src / "torchbisect").rglob("*.py")):
        module = _module(path, src)
        if module == HELPER:
            continue
        for function, called, line in starts(path):
            found.setdefault((module, function), []).append(f"{called} at line {line}")
    return found


def test_only_the_helper_starts_processes():
    found = every_start()
    extra = [
        f"{m}.{f or '<module>'}: {', '.join(calls)}"
        for (m, f), calls in found.items()
        if (m, f) not in EXCEPTIONS
    ]
    assert not extra, (
        "route these through utils/proc.run, or say in EXCEPTIONS (and at the "
        "call) why not:\n" + "\n".join(extra)
    )


def test_every_exception_is_still_there():
    """An exception left after its call went would quietly let a new one in under its name."""
    gone = sorted(set(EXCEPTIONS) - set(every_start()))
    assert not gone, f"EXCEPTIONS names calls that are no longer there: {gone}"


def test_the_reader_finds_a_call_however_it_was_imported(tmp_path):
    text = (
        "import os\nimport subprocess as sp\nfrom subprocess import check_output as out\n"
        "import shlex\n"
        "def f():\n    sp.Popen(['true'])\n    out(['true'])\n    shlex.split('a')\n"
        "class C:\n    def g(self):\n        os.system('true')\n"
        "sp.run(['true'])\n"
    )
    (tmp_path / "torchbisect").mkdir()
    (tmp_path / "torchbisect" / "m.py").write_text(text)
    assert every_start(tmp_path) == {
        ("torchbisect.m", "f"): ["subprocess.Popen at line 6", "subprocess.check_output at line 7"],
        ("torchbisect.m", "g"): ["os.system at line 11"],
        ("torchbisect.m", ""): ["subprocess.run at line 12"],
    }
