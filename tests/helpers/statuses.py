"""Where a test file reads torchbisect's exit status as a number (issue 55.4: statuses are
asserted by their `Exit` names), found in its syntax tree: tests/unit/test_harness.py runs it over
every test file.

A status is torchbisect's when it comes from the CLI: `call(...)`, `invoke(...)`,
`torchbisect(...)` or a process started from `command(...)` (tests/helpers/cli.py, and any helper
that builds on them, such as `runaway.project`'s argv), the CLI's own `main`, a command module's
`run`, the CLI spelled in a string (an argv's "torchbisect", an installed script's path, a shell
line's `-m torchbisect`, a script that imports `main`), or a function of the file that calls one
of those (a runner, a fixture, a checker given their result).  What such a value flows into in a
function (`done = subprocess.run(argv)`, `code, said = run(...)`, `for done in said`) is the CLI's
too; another program that is only fed its output is not.  Set beside an int literal by `==`,
`!=`, `in` or `not in`, or an int literal given to `one_sentence` as its expected status, it is a
number where a name belongs.  The exit status of an exception `pytest.raises` caught is
torchbisect's too (errors.py gives each its `Exit`).
"""

from __future__ import annotations

import ast
import functools
import re

from helpers import TESTS

_STATUS_ATTRS = ("returncode", "exit_code", "code")
# the CLI spelled out: the word (an argv's, an installed script's path), a shell's line, a script
# that runs its `main`
_SPELLED = re.compile(
    r"^torchbisect$|-m torchbisect\b"
    r"|from torchbisect(\.cli|\.__main__)? import main"
)
_COMPARED = (ast.Eq, ast.NotEq, ast.In, ast.NotIn)
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _int_literals(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return type(node.value) is int
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return bool(node.elts) and all(map(_int_literals, node.elts))
    return False


def _bindings(scope: ast.AST) -> list[tuple[set[str], ast.expr]]:
    """(names, value) of each assignment, unpacking, `with … as` and `:=` in `scope`."""
    pairs: list[tuple[ast.expr, ast.expr]] = []
    for node in ast.walk(scope):
        if isinstance(node, ast.Assign):
            pairs += [(t, node.value) for t in node.targets]
        elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
            pairs.append((node.target, node.value))
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            pairs += [(i.optional_vars, i.context_expr) for i in node.items if i.optional_vars]
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            pairs.append((node.target, node.iter))
    return [({n.id for n in ast.walk(t) if isinstance(n, ast.Name)}, v) for t, v in pairs]


def _raises(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "raises"
    )


def _scopes(tree: ast.Module) -> list[ast.AST]:
    """The module's own statements and each function that no other function holds."""
    tops: list[ast.AST] = []
    body = [s for s in tree.body if not isinstance(s, (*_FUNCTIONS, ast.ClassDef))]
    todo = [s for s in tree.body if isinstance(s, (*_FUNCTIONS, ast.ClassDef))]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.ClassDef):
            todo += [s for s in node.body if isinstance(s, (*_FUNCTIONS, ast.ClassDef))]
        else:
            tops.append(node)
    return [ast.Module(body=body, type_ignores=[]), *tops]


class _Cli:
    """What in one file is torchbisect run as a command (see the module's docstring): the
    callables that run it (`origins`), and in each scope the names bound to it, its argv or
    what it gave (`tainted`)."""

    def __init__(self, tree: ast.Module) -> None:
        self.origins: set[str] = set()  # callables whose result is the CLI's
        self.modules: set[str] = set()  # names bound to torchbisect.cli, a command module
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    bound = alias.asname or alias.name
                    if node.module.split(".")[0] == "helpers" and alias.name in _helper_origins(
                        node.module
                    ):
                        self.origins.add(bound)
                    elif node.module.startswith(
                        ("torchbisect.cli", "torchbisect.commands", "torchbisect.__main__")
                    ):
                        (self.origins if alias.name == "main" else self.modules).add(bound)
                    elif node.module == "torchbisect" and alias.name in ("cli", "commands"):
                        self.modules.add(bound)
        self.scopes = _scopes(tree)
        self.tainted: dict[int, set[str]] = {}
        functions = {n.name: n for n in ast.walk(tree) if isinstance(n, _FUNCTIONS)}
        given: dict[str, set[str]] = {}  # a function's parameters given the CLI's result
        grown = True
        while grown:  # a runner may call another, or check what a runner gave
            grown = False
            module_names = self._taint(self.scopes[0], set())
            for scope in self.scopes:
                inner = [n for n in ast.walk(scope) if isinstance(n, _FUNCTIONS)]
                names = module_names.union(*(given.get(f.name, ()) for f in inner))
                names = self.tainted[id(scope)] = self._taint(scope, names)
                for node in ast.walk(scope):
                    if (
                        isinstance(node, _FUNCTIONS)
                        and node.name not in self.origins
                        and any(self.holds(s, names) for s in node.body)
                    ):
                        self.origins.add(node.name)
                        grown = True
                    if (
                        isinstance(node, ast.Call)
                        and isinstance(node.func, ast.Name)
                        and node.func.id in functions
                    ):
                        params = functions[node.func.id].args
                        params = [*params.posonlyargs, *params.args]
                        got = {
                            p.arg
                            for p, a in zip(params, node.args, strict=False)
                            if self.holds(a, names)
                        }
                        got |= {
                            k.arg for k in node.keywords if k.arg and self.holds(k.value, names)
                        }
                        if got - given.get(node.func.id, set()):
                            given.setdefault(node.func.id, set()).update(got)
                            grown = True

    def _taint(self, scope: ast.AST, names: set[str]) -> set[str]:
        names, bindings = set(names), _bindings(scope)
        while True:
            more = set().union(*(n for n, v in bindings if self.holds(v, names))) - names
            if not more:
                return names
            names |= more

    def calls(self, node: ast.AST) -> bool:
        if not isinstance(node, ast.Call):
            return False
        func = node.func
        if isinstance(func, ast.Name):
            return func.id in self.origins
        return (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.value.id in self.modules
        )

    def holds(self, node: ast.AST, tainted: set[str]) -> bool:
        """Whether `node` is the CLI, its argv, or what it gave: a call passes on what its
        first argument or its object holds (the process of an argv, the text of an output),
        not what its other names do (another program fed the CLI's output is not it)."""
        if isinstance(node, ast.Name):
            return node.id in tainted
        if isinstance(node, ast.Constant):
            return isinstance(node.value, str) and _SPELLED.search(node.value) is not None
        if isinstance(node, ast.Call):
            first = node.args[:1] + (
                [node.func.value] if isinstance(node.func, ast.Attribute) else []
            )
            return (
                self.calls(node)
                or any(self.holds(n, tainted) for n in first)
                or any(
                    isinstance(n, ast.Constant) and self.holds(n, tainted) for n in ast.walk(node)
                )
            )
        return any(self.holds(n, tainted) for n in ast.iter_child_nodes(node))

    def numbered(self, scope: ast.AST) -> list[int]:
        tainted, bindings = self.tainted[id(scope)], _bindings(scope)

        def status(node: ast.expr) -> bool:  # an exit status of the CLI
            if isinstance(node, ast.Attribute) and node.attr in _STATUS_ATTRS:
                base = node.value
                if isinstance(base, ast.Attribute) and base.attr == "value":
                    base = base.value
                    if isinstance(base, ast.Name) and any(  # what pytest.raises caught
                        base.id in names and _raises(value) for names, value in bindings
                    ):
                        return True
                return self.holds(base, tainted)
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("wait", "poll")
            ):
                return self.holds(node.func.value, tainted)
            if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp)) and not isinstance(
                node.elt, ast.Name
            ):
                return status(node.elt)  # `[r.returncode for r in runs] == [0, 0]`
            if isinstance(node, ast.Name):  # `code = call(…)`, `code, said = run(…)`
                return any(
                    node.id in names
                    and (
                        self.calls(value)
                        or (isinstance(value, (ast.Attribute, ast.Call)) and status(value))
                    )
                    for names, value in bindings
                )
            return self.calls(node)

        lines = set()
        for node in ast.walk(scope):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "one_sentence"
                and len(node.args) >= 3
                and _int_literals(node.args[2])
            ):
                lines.add(node.lineno)
            if isinstance(node, ast.Compare) and isinstance(node.ops[0], _COMPARED):
                sides = [node.left, *node.comparators]
                pairs = list(zip(sides, sides[1:], strict=False))
                pairs += [
                    (a, b)
                    for x, y in list(pairs)  # (status, out) == (2, "…")
                    if isinstance(x, ast.Tuple) and isinstance(y, ast.Tuple)
                    for a, b in zip(x.elts, y.elts, strict=False)
                ]
                if any(
                    (status(a) and _int_literals(b)) or (status(b) and _int_literals(a))
                    for a, b in pairs
                ):
                    lines.add(node.lineno)
        return sorted(lines)


_READING: set[str] = set()  # the helper modules being read: an import cycle reads as nothing


@functools.cache
def _helper_origins(module: str) -> frozenset[str]:
    """The functions of a module under tests/helpers/ that run or spell the CLI."""
    if module in _READING:
        return frozenset()
    _READING.add(module)
    try:
        return _read_helper(module)
    finally:
        _READING.discard(module)


def _read_helper(module: str) -> frozenset[str]:
    parts = module.split(".")[1:]
    path = TESTS.joinpath("helpers", *parts).with_suffix(".py")
    if not path.is_file():
        path = TESTS.joinpath("helpers", *parts, "__init__.py")
    if not path.is_file():
        return frozenset()
    tree = ast.parse(path.read_text(), str(path))
    defined = {n.name for n in tree.body if isinstance(n, _FUNCTIONS)}
    return frozenset(_Cli(tree).origins & defined)


def numbered_statuses(source: str) -> list[int]:
    """The lines of `source` (a test file) where torchbisect's exit status is a number."""
    cli = _Cli(ast.parse(source))
    return sorted({line for scope in cli.scopes for line in cli.numbered(scope)})
