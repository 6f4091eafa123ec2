"""Backends say what they can do, do what they keep, and are chosen in one place; no caller
compares or spells a backend's name (issues 49 and 55): a new backend is one new module and one
line of `BACKENDS` (docs/development.md says how)."""

from __future__ import annotations

import ast
import sys
import types
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import REPO
from helpers.cli import call

from torchbisect import backends
from torchbisect.backends import (
    BACKENDS,
    Backend,
    Capabilities,
    Purpose,
    backend_class,
    capabilities,
    choose_backend,
    default_backend,
    label,
    overlaying,
)
from torchbisect.exits import Exit
from torchbisect.utils import runlock

SRC = REPO / "src" / "torchbisect"


@pytest.mark.parametrize("name", list(BACKENDS))
def test_every_backend_declares_its_own_capabilities_and_label(name):
    cls = backend_class(name)
    assert isinstance(cls.__dict__.get("can"), Capabilities), (
        f"{cls.__name__} inherits what it can do: declare `can = Capabilities(...)` on it"
    )
    assert capabilities(name) is cls.can and cls.name == name
    assert isinstance(cls.__dict__.get("label"), str), (
        f"{cls.__name__} inherits what a page calls it: declare `label = ...` on it"
    )
    assert label(name) == cls.label == f"the {name} backend"


def test_what_the_callers_ask_is_what_each_backend_does():
    assert [n for n in BACKENDS if capabilities(n).containers] == ["docker"]
    assert overlaying() == "venv"  # `current` is a venv underneath, but overlays nothing
    assert [n for n in BACKENDS if not capabilities(n).keeps] == ["current"]
    assert [n for n in BACKENDS if capabilities(n).keeps_in_workdir] == ["venv"]
    assert label("gone") == "the gone backend"  # a store's run of a backend no longer here


def test_only_the_builds_ask_the_host_which_backend(monkeypatch):
    """The default for each purpose is chosen in one place; the builds of a matrix or a
    bisection ask whether an engine answers, and say so; the others never ping it."""
    asked: list[int] = []
    answer = [True]
    monkeypatch.setattr(
        backends, "docker_answers", lambda timeout=5.0: asked.append(1) or answer[0]
    )
    fixed = {p: default_backend(p) for p in Purpose if p is not Purpose.BUILDS}
    assert asked == []
    assert {p: c.name for p, c in fixed.items()} == {
        Purpose.SCRIPT: "venv",
        Purpose.OWN_TORCH: "current",
        Purpose.BENCH: "venv",
    }
    assert not any(c.why for c in fixed.values())  # nothing to say: the purpose decided
    assert not capabilities(fixed[Purpose.SCRIPT].name).containers  # a script runs on the host
    assert (default_backend(Purpose.BUILDS).name, asked) == ("docker", [1])
    answer[0] = False
    chosen = default_backend(Purpose.BUILDS)
    assert (chosen.name, chosen.why) == ("venv", "no Docker engine answers")


def test_a_fixed_default_is_built_without_a_line_and_a_host_default_with_one(monkeypatch, tmp_path):
    monkeypatch.setattr(backends, "docker_answers", lambda timeout=5.0: False)
    for name in ("current", "venv"):  # neither torch nor uv need be here: this is the choice
        monkeypatch.setattr(backend_class(name), "check", lambda self: None)
    said: list[str] = []
    options = backends.BackendOptions(workdir=tmp_path)
    built = choose_backend(None, options, purpose=Purpose.OWN_TORCH, say=said.append)
    assert (built.name, said) == ("current", [])
    built = choose_backend(None, options, say=said.append)
    assert (built.name, said) == (
        "venv",
        ["backend: venv (no Docker engine answers; choose with --backend)"],
    )


# -- `cache` asks the backend what it keeps ----------------------------------------------------


class _Jar(Backend):
    """A backend of this test's: it keeps marbles in the work folder."""

    name = "jar"
    label = "the jar backend"
    can = Capabilities(keeps="marbles in the work folder", keeps_in_workdir=True)

    def __init__(self, options: backends.BackendOptions | None = None) -> None:
        self.workdir = Path((options or backends.BackendOptions()).workdir)

    def check(self) -> None:
        raise AssertionError("`cache` measures and prunes; it checks nothing else")

    def prepare(self, cell, *, log):
        raise AssertionError("`cache` installs nothing")

    def probe(self, prepared, *, gpu, probe_args, log):
        raise AssertionError("`cache` probes nothing")

    def measure_kept(self) -> Iterator[str]:
        yield f"marbles: {len(list(self.workdir.glob('*.marble')))}"

    def prune_kept(self) -> Iterator[str]:
        held = runlock.lock_path(self.workdir).is_file()
        for marble in self.workdir.glob("*.marble"):
            marble.unlink()
        yield f"jar emptied ({'holding' if held else 'without'} the work folder's lock)"


@pytest.fixture
def jar(monkeypatch):
    module = types.ModuleType(f"{backends.__name__}._jar")
    module._Jar = _Jar
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setitem(BACKENDS, "jar", ("_jar", "_Jar"))


def test_cache_measures_and_prunes_through_the_backend_it_names(jar, tmp_path, capsys):
    """A new backend that keeps something is one module and one line of BACKENDS: `cache`
    measures it, and prunes it holding the work folder's run lock, with no line of cli/ or
    commands/."""
    work = tmp_path / "work"
    work.mkdir()
    for n in range(3):
        (work / f"{n}.marble").write_text("o")
    assert (
        call("cache", "--backend", "jar", "--workdir", work, "--store", tmp_path / "none")
        == Exit.OK
    )
    assert capsys.readouterr().out.splitlines() == [
        "backend: jar (--backend), which keeps marbles in the work folder",
        "marbles: 3",
    ]
    assert call("cache", "--backend", "jar", "--workdir", work, "--prune") == Exit.OK
    assert capsys.readouterr().out.splitlines()[1:] == [
        "jar emptied (holding the work folder's lock)"
    ]
    assert list(work.glob("*.marble")) == []


# -- no backend's name outside backends/ -------------------------------------------------------


def _names_a_backend(node: ast.AST) -> bool:
    text = ast.unparse(node)
    return "backend" in text.lower()


def _backend_literals(node: ast.AST) -> list[str]:
    items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return [i.value for i in items if isinstance(i, ast.Constant) and i.value in BACKENDS]


def _modules() -> Iterator[tuple[Path, ast.Module]]:
    for path in sorted(SRC.rglob("*.py")):
        if path.parent.name != "backends":  # the registry itself
            yield path, ast.parse(path.read_text(), filename=str(path))


def test_no_caller_compares_a_backend_name():
    found = []
    for path, tree in _modules():
        for node in ast.walk(tree):
            if not isinstance(node, ast.Compare):
                continue
            sides = [node.left, *node.comparators]
            if any(_names_a_backend(s) for s in sides) and any(_backend_literals(s) for s in sides):
                found.append(f"{path.relative_to(SRC)}:{node.lineno}: {ast.unparse(node)}")
    assert not found, found


# The same word meaning something else: matrix.yaml's `test: {versions: current}` (release
# candidates newer than the newest stable release) is no backend, nor is uv's `venv` command that
# the bench's hand loop runs as a user would.  (file, the def or class it is spelt in): every entry
# must still be used, so that none outlives its reason.
_OTHER_MEANINGS = {
    ("config/fields.py", "test_versions", "current"),
    ("config/matrix.py", "TestEntry", "current"),
    ("plan/resolve.py", "_wanted", "current"),
    ("bench/loop.py", "run_loop", "venv"),
}


def _spelt(tree: ast.Module) -> Iterator[tuple[str, ast.Constant]]:
    """Each string constant naming a backend, with the def or class it is spelt in."""

    def walk(node: ast.AST, scope: str) -> Iterator[tuple[str, ast.Constant]]:
        for child in ast.iter_child_nodes(node):
            inner = (
                child.name
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                else scope
            )
            if isinstance(child, ast.Constant) and child.value in BACKENDS:
                yield scope, child
            yield from walk(child, inner)

    return walk(tree, "")


def test_no_backend_name_is_spelt_outside_backends():
    """A default chosen by name, a label or a table keyed by name outside backends/ is what
    `default_backend(purpose)`, `label(name)` and the backend's own methods are for; argparse's
    choices come from `BACKENDS`."""
    found, other = [], set()
    for path, tree in _modules():
        where = path.relative_to(SRC).as_posix()
        for scope, node in _spelt(tree):
            if (where, scope, node.value) in _OTHER_MEANINGS:
                other.add((where, scope, node.value))
            else:
                found.append(f"{where}:{node.lineno}: {node.value!r} in {scope or 'the module'}")
    assert not found, found
    assert other == _OTHER_MEANINGS, f"no longer spelt there: {_OTHER_MEANINGS - other}"
