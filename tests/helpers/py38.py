"""Python 3.8 for the standalone probes: a static check for what 3.8 rejects at run time, and a
real 3.8 interpreter where this machine has one.

`ast.parse(..., feature_version=(3, 8))` checks syntax only: `list[int]` (PEP 585) and `int | None`
(PEP 604) parse on 3.8 and fail only when evaluated, with a TypeError.  They are evaluated wherever
they stand outside an annotation, and in annotations too unless the module has
`from __future__ import annotations` — except a local variable's annotation, never evaluated.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
from pathlib import Path

# Subscripting these at run time needs 3.9 (PEP 585); `|` between types needs 3.10 (PEP 604).
GENERIC_BUILTINS = frozenset({"list", "dict", "tuple", "set", "frozenset", "type"})
GENERIC_MODULES = frozenset({"collections", "re", "contextlib", "queue"})  # re.Pattern[str]…
TYPE_NAMES = GENERIC_BUILTINS | {"int", "float", "complex", "str", "bytes", "bool", "object"}


def runtime_typing_errors(source: str) -> list[str]:
    """`line N: <expr>` for each PEP 585 subscript or PEP 604 union that 3.8 would evaluate."""
    tree = ast.parse(source)
    lazy = _has_future_annotations(tree)
    found = [n for n in _evaluated(tree, lazy=lazy) if _is_generic(n) or _is_union(n)]
    found = [n for n in found if not _inside_another(n, found)]
    return [f"line {n.lineno}: {ast.unparse(n)}" for n in sorted(found, key=_position)]


def find_python38() -> str | None:
    """A real CPython 3.8: `python3.8` on PATH, pyenv's, or one uv already has (uv cannot download
    one where GitHub is unreachable, and no registry reachable from here ships one)."""
    root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    pyenv = sorted(str(p) for p in root.glob("versions/3.8*/bin/python3.8"))
    candidates = [shutil.which("python3.8"), *pyenv]
    if shutil.which("uv"):
        found = subprocess.run(
            ["uv", "python", "find", "--no-python-downloads", "3.8"], capture_output=True, text=True
        )
        candidates.append(found.stdout.strip() if found.returncode == 0 else None)
    for python in filter(None, candidates):
        check = subprocess.run(
            [python, "-c", "import sys; print(sys.version_info[:2] == (3, 8))"],
            capture_output=True,
            text=True,
        )
        if check.returncode == 0 and check.stdout.strip() == "True":
            return python
    return None


def _has_future_annotations(tree: ast.Module) -> bool:
    return any(
        isinstance(n, ast.ImportFrom)
        and n.module == "__future__"
        and any(a.name == "annotations" for a in n.names)
        for n in tree.body
    )


def _evaluated(tree: ast.Module, *, lazy: bool) -> list[ast.AST]:
    """The parts of the module Python evaluates: everything but the annotations it skips."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        for annotation in _annotations(node, lazy=lazy):
            skipped.update(id(n) for n in ast.walk(annotation))
    return [n for n in ast.walk(tree) if isinstance(n, ast.expr) and id(n) not in skipped]


def _annotations(node: ast.AST, *, lazy: bool) -> list[ast.expr]:
    """Annotations of `node` that are not evaluated (all of them under the __future__ import)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        args = node.args
        every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
        found = [a.annotation for a in every if a is not None and a.annotation is not None]
        if node.returns is not None:
            found.append(node.returns)
        local = [
            s.annotation for s in ast.walk(node) if isinstance(s, ast.AnnAssign) and s is not node
        ]
        return [*found, *local] if lazy else _local_only(node)
    if isinstance(node, ast.AnnAssign) and lazy:
        return [node.annotation]
    return []


def _local_only(function: ast.AST) -> list[ast.expr]:
    """A local variable's annotation is never evaluated; a nested def's own are, at its def."""
    found: list[ast.expr] = []
    todo = list(ast.iter_child_nodes(function))
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(node, ast.AnnAssign):
            found.append(node.annotation)
        todo.extend(ast.iter_child_nodes(node))
    return found


def _is_generic(node: ast.AST) -> bool:
    if not isinstance(node, ast.Subscript):
        return False
    value = node.value
    if isinstance(value, ast.Name):
        return value.id in GENERIC_BUILTINS
    while isinstance(value, ast.Attribute):
        value = value.value
    return isinstance(value, ast.Name) and value.id in GENERIC_MODULES


def _is_union(node: ast.AST) -> bool:
    if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr)):
        return False
    return _is_type(node.left) or _is_type(node.right)


def _is_type(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return node.value is None
    if isinstance(node, ast.Name):
        return node.id in TYPE_NAMES
    return _is_generic(node) or _is_union(node)


def _inside_another(node: ast.AST, found: list[ast.expr]) -> bool:
    return any(other is not node and node in ast.walk(other) for other in found)


def _position(node: ast.expr) -> tuple[int, int]:
    return node.lineno, node.col_offset
