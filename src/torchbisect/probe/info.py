"""What a probe says it is, read from its own file without importing it.

A probe is any script in the probes folder; the tool runs it with each build's interpreter, so the
package may never import it (it may need a torch the tool's own Python lacks).  Everything the
report needs to name the regression, and the bisection to judge its cases, comes from the file's
text, parsed with `ast` (the rest of the package names no probe's cases):

- the docstring's first line is the regression's title, the rest of its first paragraph the
  description (the next paragraph when the title stands alone, as PEP 257 writes it);
- optional module-level string literals: `UPSTREAM_ISSUE` (a URL), `FIX_PR` (a URL),
  `WORKAROUND` (one sentence), `REQUIRES_API` (a dotted name such as `torch._lazy_clone`: a build
  without it is `not_applicable`), `PROBE_VERSION` (bumped when a verdict changes meaning);
- optional `CASE_LABELS` and `CASE_NOTES`, dict literals of case name to a short label / note,
  in the order the page shows the cases; `CONTROLS`, a dict literal of each control case to the
  verdict it must show (the page draws a control that shows it as "as expected", never red);
  `OSV_ID`, the id of the regression's OSV record when it must stay what it was;
  `WORKAROUND_BENCH`, the name of the `nox -s bench` document (reports/bench/NAME.json) that
  measures the workaround's cost, and `WORKAROUND_COST`, how the page quotes it beside the
  workaround: `{"key": K, "adds_to": WHAT}`, each of the document's `rows` giving its `size_mib`
  and under K the milliseconds the workaround adds to WHAT ("a graph replay");
- what only the probe knows about judging its cases: `BISECT_CASE`, the case that decides a
  bisection when `--case` is not given (else an exit-status script's one case, else the first of
  CASE_LABELS); `TRIAL_CASES`, a dict literal of each case judged over trials (a race that shows
  now and then) to the fewest affected trials that make a build bad (`bisect --min-affected`
  overrides it); `VARIANTS`, how a case that tries several variants counts them on the page:
  `{"key": K, "affected": OUTCOME, "unit": "calls"}`, the case's K holding each variant's
  `outcome` and its `stale_trials` of `trials`;
- `NEEDS_GPU`, `True` for a probe that needs a GPU (the page then says so beside the check a
  reader runs; a CPU-only check gets no GPU words);
- `PROBE_OUTPUT`: `"document"` for a probe that prints the JSON document of probes/README.md, or
  `"exit_status"` for a plain `git bisect run` script (exit 0 not affected, 1-127 affected, 125
  cannot tell, 128 and above an error; its last line of output is the detail).  Without it, a
  file that declares `PROBE_VERSION` is a document probe (the contract before this field) and any
  other file an exit-status script.

Nothing here is trusted beyond its type: a literal of the wrong type is a ConfigError naming the
file and line, and a file that does not parse as Python is one too; so is a BISECT_CASE or
TRIAL_CASES entry that is not among the cases CASE_LABELS and CONTROLS name, when they name any.
"""

from __future__ import annotations

import ast
import enum
import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigError

# Bounds of a probe file, read at every plan and report (issue 53.6): a 12 MB file cost 4.9 GB
# of syntax tree, and an expression nested thousands deep ended in a RecursionError.
MAX_BYTES = 1048576
MAX_DEPTH = 100


class ProbeOutput(enum.Enum):
    DOCUMENT = "document"  # prints the JSON document (probes/README.md)
    EXIT_STATUS = "exit_status"  # a plain `git bisect run` script


_STRINGS = (
    "UPSTREAM_ISSUE",
    "FIX_PR",
    "WORKAROUND",
    "REQUIRES_API",
    "PROBE_VERSION",
    "PROBE_OUTPUT",
    "OSV_ID",
    "WORKAROUND_BENCH",
    "BISECT_CASE",
)
_MAPPINGS = ("CASE_LABELS", "CASE_NOTES", "CONTROLS", "WORKAROUND_COST", "VARIANTS")
_COUNTS = ("TRIAL_CASES",)  # dicts of case names to whole numbers of at least 1
_FLAGS = ("NEEDS_GPU",)
# The keys a dict literal must give, and those it may: anything else is a typo said at once.
_KEYS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "WORKAROUND_COST": (("key",), ("key", "adds_to")),
    "VARIANTS": (("key", "affected"), ("key", "affected", "unit")),
}
_KINDS = {
    **dict.fromkeys(_STRINGS, "a string"),
    **dict.fromkeys(_MAPPINGS, "a dict of strings to strings"),
    **dict.fromkeys(_COUNTS, "a dict of case names to whole numbers of at least 1"),
    **dict.fromkeys(_FLAGS, "True or False"),
}


@dataclass(frozen=True, kw_only=True)
class ProbeInfo:
    """A probe as its file describes it; `name` is the file's stem (the matrix's `probe:`)."""

    name: str
    path: Path
    output: ProbeOutput
    declared_version: str  # PROBE_VERSION, "0" when the file declares none
    sha256: str
    title: str
    description: str = ""
    upstream_issue: str = ""
    fix_pr: str = ""
    workaround: str = ""
    requires_api: str = ""
    case_labels: dict[str, str] = field(default_factory=dict)
    case_notes: dict[str, str] = field(default_factory=dict)
    controls: dict[str, str] = field(default_factory=dict)  # control case -> its verdict
    osv_id: str = ""
    workaround_bench: str = ""
    workaround_cost: dict[str, str] = field(default_factory=dict)  # key, adds_to
    bisect_case: str = ""  # BISECT_CASE: the case that decides a bisection
    trial_cases: dict[str, int] = field(default_factory=dict)  # case -> fewest affected trials
    variants: dict[str, str] = field(default_factory=dict)  # key, affected, unit
    needs_gpu: bool = False

    @property
    def deciding_case(self) -> str:
        """The case that decides a bisection without `--case`: BISECT_CASE, else an exit-status
        script's one case (its own name), else the first of CASE_LABELS; "" when none is said."""
        if self.bisect_case:
            return self.bisect_case
        if self.output is ProbeOutput.EXIT_STATUS:
            return self.name
        return next(iter(self.case_labels), "")

    @property
    def declared_cases(self) -> list[str]:
        """Every case name the file declares (CASE_LABELS, then the CONTROLS it does not label):
        what `--cases`, `--case` and matrix.yaml's `cases:` may name; empty when it declares
        none (then any name is the probe's own to judge)."""
        return [*self.case_labels, *(c for c in self.controls if c not in self.case_labels)]

    @property
    def version(self) -> str:
        """`<PROBE_VERSION>+<first 12 hex of the file's sha256>`: a stored result is reused only
        while the file is byte-for-byte the same."""
        return f"{self.declared_version}+{self.sha256[:12]}"

    def label(self, case: str) -> str:
        return self.case_labels.get(case, case)


def read_info(path: Path, name: str | None = None) -> ProbeInfo:
    """Parse `path` (never import it) into a ProbeInfo; ConfigError for what cannot be read."""
    with path.open("rb") as fh:
        data = fh.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise ConfigError(
            f"{path}: the probe is larger than {MAX_BYTES // 1048576} MiB, which "
            "no probe script needs (the shipped ones are under 64 KiB); choose "
            "another probe"
        )
    try:
        tree = ast.parse(data, filename=str(path))
        _shallow(tree, path)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        line = getattr(exc, "lineno", None)
        where = f"{path}:{line}" if line else str(path)
        why = getattr(exc, "msg", None) or str(exc) or f"nested deeper than {MAX_DEPTH} levels"
        raise ConfigError(
            f"{where}: the probe is not a Python file this tool can read "
            f"({why}); fix it or choose another probe"
        ) from None
    literals = _literals(tree, path)
    _check_cases(tree, literals, path)
    title, description = _describe(ast.get_docstring(tree) or "", path)
    declared = literals.get("PROBE_VERSION", "")
    output = _output(literals.get("PROBE_OUTPUT", ""), declared, path)
    return ProbeInfo(
        name=name or path.stem,
        path=path,
        output=output,
        declared_version=declared or "0",
        sha256=hashlib.sha256(data).hexdigest(),
        title=title,
        description=description,
        upstream_issue=literals.get("UPSTREAM_ISSUE", ""),
        fix_pr=literals.get("FIX_PR", ""),
        workaround=literals.get("WORKAROUND", ""),
        requires_api=literals.get("REQUIRES_API", ""),
        case_labels=literals.get("CASE_LABELS", {}),
        case_notes=literals.get("CASE_NOTES", {}),
        controls=literals.get("CONTROLS", {}),
        osv_id=literals.get("OSV_ID", ""),
        workaround_bench=literals.get("WORKAROUND_BENCH", ""),
        workaround_cost=literals.get("WORKAROUND_COST", {}),
        bisect_case=literals.get("BISECT_CASE", ""),
        trial_cases=literals.get("TRIAL_CASES", {}),
        variants=literals.get("VARIANTS", {}),
        needs_gpu=literals.get("NEEDS_GPU", False),
    )


def _shallow(tree: ast.Module, path: Path) -> None:
    """RecursionError when the syntax tree nests deeper than MAX_DEPTH (an expression of
    thousands of nested operators): measured without recursion, before anything walks it."""
    stack: list[tuple[ast.AST, int]] = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise RecursionError(
                f"nested deeper than {MAX_DEPTH} levels at line {getattr(node, 'lineno', '?')}"
            )
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))


def _literals(tree: ast.Module, path: Path) -> dict[str, Any]:
    """The module-level assignments this module knows, as plain values (last one wins)."""
    found: dict[str, Any] = {}
    for node in tree.body:
        if not (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
        ):
            continue
        key = node.targets[0].id
        if key not in _KINDS:
            continue
        try:
            value = ast.literal_eval(node.value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            value = None
        if not _well_typed(key, value):
            raise ConfigError(
                f"{path}:{node.lineno}: {key} must be {_KINDS[key]} literal; "
                "the tool reads it without running the probe"
            )
        if key in _KEYS and isinstance(value, dict):
            _check_keys(key, value, f"{path}:{node.lineno}")
        found[key] = (
            value.strip()
            if isinstance(value, str)
            else dict(value)
            if isinstance(value, dict)
            else value
        )
    return found


def _check_cases(tree: ast.Module, literals: dict[str, Any], path: Path) -> None:
    """A case named by BISECT_CASE or TRIAL_CASES is one the file labels, when it labels any:
    a misspelt one would leave every bisection without a verdict, so it is said at once."""
    known = {*literals.get("CASE_LABELS", {}), *literals.get("CONTROLS", {})}
    if not known:
        return
    named = {
        "BISECT_CASE": [literals.get("BISECT_CASE", "")],
        "TRIAL_CASES": list(literals.get("TRIAL_CASES", {})),
    }
    for key, cases in named.items():
        unknown = [c for c in cases if c and c not in known]
        if unknown:
            line = next(
                (
                    n.lineno
                    for n in tree.body
                    if isinstance(n, ast.Assign)
                    and isinstance(n.targets[0], ast.Name)
                    and n.targets[0].id == key
                ),
                0,
            )
            raise ConfigError(
                f"{path}:{line}: {key} names {', '.join(map(repr, unknown))}, "
                "which is not among the cases CASE_LABELS and CONTROLS name "
                f"({', '.join(sorted(known))}); name one of those"
            )


def _well_typed(key: str, value: object) -> bool:
    if key in _STRINGS:
        return isinstance(value, str)
    if key in _FLAGS:
        return isinstance(value, bool)
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        return False
    if key in _COUNTS:  # a bool is an int to Python, never a count here
        return all(type(v) is int and v >= 1 for v in value.values())
    return all(isinstance(v, str) for v in value.values())


def _check_keys(key: str, value: dict[str, Any], where: str) -> None:
    needed, allowed = _KEYS[key]
    missing = [k for k in needed if not value.get(k)]
    unknown = sorted(set(value) - set(allowed))
    if missing or unknown:
        wrong = (
            f"gives no {', '.join(missing)}"
            if missing
            else f"has unknown key(s) {', '.join(map(repr, unknown))}"
        )
        raise ConfigError(
            f"{where}: {key} {wrong}; it takes "
            f"{', '.join(map(repr, allowed))} ({', '.join(needed)} needed)"
        )


def _describe(docstring: str, path: Path) -> tuple[str, str]:
    """(title, description): the first line, and the rest of the first paragraph joined; when
    the title stands alone (PEP 257's summary line), the paragraph after it."""
    paragraphs = [p.splitlines() for p in docstring.strip().split("\n\n")]
    first = paragraphs[0]
    if not first or not first[0].strip():
        return path.stem.replace("_", " "), ""
    rest = first[1:] or (paragraphs[1] if len(paragraphs) > 1 else [])
    return first[0].strip(), " ".join(line.strip() for line in rest).strip()


def _output(value: str, declared_version: str, path: Path) -> ProbeOutput:
    if not value:
        return ProbeOutput.DOCUMENT if declared_version else ProbeOutput.EXIT_STATUS
    try:
        return ProbeOutput(value)
    except ValueError:
        choices = ", ".join(repr(o.value) for o in ProbeOutput)
        raise ConfigError(
            f"{path}: PROBE_OUTPUT is {value!r}; it must be one of {choices}"
        ) from None
