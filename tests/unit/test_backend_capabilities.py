"""Backends say what they can do; no caller compares a backend's name (issue 49): a new backend is
one new module and one line of `BACKENDS` (docs/development.md says how)."""

from __future__ import annotations

import ast

import pytest
from helpers import REPO

from torchbisect.backends import BACKENDS, Capabilities, backend_class, capabilities, overlaying

SRC = REPO / "src" / "torchbisect"


@pytest.mark.parametrize("name", list(BACKENDS))
def test_every_backend_declares_its_own_capabilities(name):
    cls = backend_class(name)
    assert isinstance(cls.__dict__.get("can"), Capabilities), (
        f"{cls.__name__} inherits what it can do: declare `can = Capabilities(...)` on it")
    assert capabilities(name) is cls.can and cls.name == name


def test_what_the_callers_ask_is_what_each_backend_does():
    assert [n for n in BACKENDS if capabilities(n).containers] == ["docker"]
    assert overlaying() == "venv"  # `current` is a venv underneath, but overlays nothing
    assert [n for n in BACKENDS if not capabilities(n).keeps] == ["current"]


def _names_a_backend(node: ast.AST) -> bool:
    text = ast.unparse(node)
    return "backend" in text.lower()


def _backend_literals(node: ast.AST) -> list[str]:
    items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return [i.value for i in items if isinstance(i, ast.Constant) and i.value in BACKENDS]


def test_no_caller_compares_a_backend_name():
    found = []
    for path in sorted(SRC.rglob("*.py")):
        if path.parent.name == "backends":
            continue  # the registry itself
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if not isinstance(node, ast.Compare):
                continue
            sides = [node.left, *node.comparators]
            if any(_names_a_backend(s) for s in sides) and any(
                    _backend_literals(s) for s in sides):
                found.append(f"{path.relative_to(SRC)}:{node.lineno}: {ast.unparse(node)}")
    assert not found, found
