"""The package's floors: no module imports from a floor above its own, and no import circle.

Read from the source (the AST of every module under src/torchbisect, imports inside functions and
under TYPE_CHECKING included), so a shortcut taken anywhere fails here, not in a review.  A new
top-level module or package has to be put on a floor below before this passes.  The commands
stand on the CLI's machinery (cli/options.py's shared flags); cli's main reaches the one command
chosen by its name (`importlib`, as a plugin is found), which is no import of the source.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO

SRC = REPO / "src"

# Bottom to top: a module may import from its own floor and the floors below it.
FLOORS: tuple[tuple[str, frozenset[str]], ...] = (
    ("tools", frozenset({"torchbisect", "exits", "errors", "masking", "defaults", "utils", "net"})),
    ("vocabulary", frozenset({"model", "outcome", "cells", "probe"})),
    ("sources", frozenset({"config", "index"})),
    ("plan and store", frozenset({"plan", "store"})),
    ("backends", frozenset({"backends"})),
    ("run", frozenset({"run"})),
    ("bisect", frozenset({"bisect"})),
    ("page", frozenset({"page"})),
    ("report", frozenset({"report"})),
    ("cli", frozenset({"cli"})),
    ("commands", frozenset({"commands", "bench", "pages", "__main__"})),
)


def _module(path: Path, src: Path) -> str:
    parts = path.relative_to(src).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, src: Path) -> set[str]:
    """Every torchbisect module this file imports, wherever the import statement sits."""
    module = _module(path, src)
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "torchbisect"}
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            source = ".".join(base + ([node.module] if node.module else []))
            if source.split(".")[0] != "torchbisect":
                continue
            for alias in node.names:  # `from . import cells` imports the module cells
                full = f"{source}.{alias.name}"
                found.add(full if _exists(full, src) else source)
    found.discard(module)
    return found


def _exists(module: str, src: Path) -> bool:
    base = src.joinpath(*module.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def graph(src: Path = SRC) -> dict[str, set[str]]:
    return {_module(p, src): _imports(p, src) for p in sorted((src / "torchbisect").rglob("*.py"))}


def floor(module: str) -> int | None:
    parts = module.split(".")
    room = parts[1] if len(parts) > 1 else parts[0]
    return next((i for i, (_, rooms) in enumerate(FLOORS) if room in rooms), None)


def upward(imports: dict[str, set[str]]) -> list[str]:
    return [
        f"{m} ({FLOORS[floor(m)][0]}) imports {t} ({FLOORS[floor(t)][0]})"
        for m, targets in imports.items()
        for t in sorted(targets)
        if floor(m) is not None and floor(t) is not None and floor(t) > floor(m)
    ]


def circles(imports: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of more than one module: each is an import circle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(imports.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = stack[stack.index(node) :]
            del stack[stack.index(node) :]
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(imports):
        if node not in index:
            visit(node)
    return found


def test_every_module_stands_on_a_floor():
    homeless = sorted(m for m in graph() if floor(m) is None)
    assert not homeless, f"put these on a floor in FLOORS: {homeless}"


def test_every_room_on_a_floor_is_a_module():
    """A room left in FLOORS after its module went would quietly place a module added later
    under that old name."""
    rooms = {m.split(".")[1] if "." in m else m for m in graph()}
    gone = sorted(r for _, floor_rooms in FLOORS for r in floor_rooms - rooms)
    assert not gone, f"FLOORS lists rooms that are no module of src/torchbisect: {gone}"


def test_no_module_imports_from_a_floor_above_its_own():
    found = upward(graph())
    assert not found, "\n".join(found)


def test_no_import_circle():
    found = circles(graph())
    assert not found, "\n".join(" -> ".join(c) for c in found)


def test_an_upward_import_inside_a_function_and_a_circle_are_found(tmp_path):
    """The reader itself, on a small tree: model reaches up into report inside a function, and
    report's view imports model back."""
    tree = {
        "__init__.py": "",
        "model.py": "def f():\n    from .report import view\n",
        "report/__init__.py": "",
        "report/view.py": "from ..model import f\n",
    }
    for name, text in tree.items():
        (tmp_path / "torchbisect" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "torchbisect" / name).write_text(text)
    imports = graph(tmp_path)
    assert upward(imports) == [
        "torchbisect.model (vocabulary) imports torchbisect.report.view (report)"
    ]
    assert circles(imports) == [["torchbisect.model", "torchbisect.report.view"]]


def test_no_two_test_files_share_a_name():
    """pytest imports test files by their base name (no __init__.py under tests/): a second
    test_x.py in another folder stops the whole suite at collection."""
    names: dict[str, list[str]] = {}
    for path in (SRC.parent / "tests").rglob("test_*.py"):
        names.setdefault(path.name, []).append(str(path.relative_to(SRC.parent)))
    assert not {n: p for n, p in names.items() if len(p) > 1}


def test_no_two_modules_outside_cli_share_a_name():
    """One name, one module: `errors.py` says which module it is without its folder.  The
    commands are the exception, their modules named after them (commands/matrix.py is
    `torchbisect matrix`), and cli/, whose options.py are the flags (run/options.py a run's)."""
    package = SRC / "torchbisect"
    names: dict[str, list[str]] = {}
    for path in package.rglob("*.py"):
        if path.name != "__init__.py" and path.parent not in (
            package / "cli",
            package / "commands",
        ):
            names.setdefault(path.name, []).append(str(path.relative_to(package)))
    shared = {n: sorted(p) for n, p in names.items() if len(p) > 1}
    assert not shared, f"rename one module of each: {shared}"


def paths_under_tests(path: Path) -> list[str]:
    """The strings of a module that name a path under tests/ (`tests`, `tests/…`, `./tests/…`),
    its docstrings aside: what it would read from there."""
    tree = ast.parse(path.read_text(), filename=str(path))
    docs = {
        id(n.body[0].value)
        for n in ast.walk(tree)
        if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and n.body
        and isinstance(n.body[0], ast.Expr)
    }
    return sorted(
        f"{node.lineno}: {node.value!r}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docs
        and re.match(r"(\./)?tests(/|$)", node.value)
    )


def test_no_product_module_reads_the_tests():
    """The product stands without its tests (an installed wheel has none): reports/sample is
    drawn from reports/evidence/hand/, no longer from tests/data/probe/ (issue 55)."""
    found = [
        f"{p.relative_to(SRC)}:{line}"
        for p in sorted((SRC / "torchbisect").rglob("*.py"))
        for line in paths_under_tests(p)
    ]
    assert not found, found


def test_a_path_under_tests_is_found_and_a_docstring_is_not(tmp_path):
    module = tmp_path / "m.py"
    module.write_text(
        '"""Drawn from tests/data/."""\nfrom pathlib import Path\n'
        'A = Path("tests") / "data"\nB = "tests/data/probe/*.json"\n'
        'C = "the tests/ folder"\n'
    )
    assert paths_under_tests(module) == ["3: 'tests'", "4: 'tests/data/probe/*.json'"]


@pytest.mark.slow
def test_the_fast_loop_keeps_more_than_600_tests():
    """README: `nox -s fast` runs more than 600 tests; marking too much `slow` would empty it."""
    fast = "not slow and not docker and not chromium and not gpu"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-p",
            "no:cacheprovider",
            "-m",
            fast,
            str(SRC.parent / "tests"),
        ],
        capture_output=True,
        text=True,
        cwd=SRC.parent,
        timeout=300,
    )
    counted = re.search(r"(\d+)/\d+ tests collected", done.stdout)
    assert counted, done.stdout[-2000:] + done.stderr[-2000:]
    assert int(counted[1]) > 600


def _layout_table(doc: Path) -> list[tuple[str, list[str]]]:
    """docs/development.md's layout table: (floor, the file and folder names it writes in
    backticks), one per row under `| floor | rooms |`."""
    text = doc.read_text()
    table = text[text.index("| floor | rooms |") :].split("\n\n", 1)[0].splitlines()[2:]
    rows = []
    for line in table:
        name, rooms = line.strip("|").split("|", 1)
        rows.append(
            (
                name.strip(),
                [t for t in re.findall(r"`([^`]+)`", rooms) if t.endswith(("/", ".py", ".json"))],
            )
        )
    return rows


def _rooms_named(names: list[str], package: Path) -> set[str]:
    rooms = set()
    for name in names:
        path = package / name.rstrip("/")
        if path.is_dir() and any(path.glob("*.py")):
            rooms.add(name.rstrip("/"))
        elif path.is_file() and path.suffix == ".py":
            rooms.add("torchbisect" if name == "__init__.py" else path.stem)
    return rooms


def test_the_layout_table_in_the_manual_is_the_floors():
    """The manual's map of the package and FLOORS are one map: the same floors in the same order,
    each with the same rooms, and every file the table names is in the tree."""
    doc = SRC.parent / "docs" / "development.md"
    package = SRC / "torchbisect"
    rows = _layout_table(doc)
    assert [name for name, _ in rows] == [name for name, _ in FLOORS]
    for (name, names), (_, rooms) in zip(rows, FLOORS, strict=True):
        assert _rooms_named(names, package) == rooms, f"the {name} floor"
        where = [package / r for r in rooms if (package / r).is_dir()]
        where += [package, SRC.parent, SRC.parent / "probes"]
        missing = [n for n in names if not any((w / n.rstrip("/")).exists() for w in where)]
        assert not missing, f"the {name} floor names what is not in the tree: {missing}"
