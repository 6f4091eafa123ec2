"""The shared code knows no bug: what only a probe knows stays in the probe's file.

A probe's file declares its cases, its controls, the case that decides a bisection, the cases
judged over trials, how a case's variants are counted and which benchmark field prices its
workaround (probe/info.py reads them with `ast`).  The packages that plan, run, store, bisect and
draw (`bisect/`, `report/`, `cli/`, `commands/`, `run/`, `store/`, `probe/`) read those
declarations and name none of them: read from the source, as tests/unit/test_layering.py reads
the imports, so a case name written into any of them (code, comment or help text) fails here,
for every shipped probe.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from helpers import REPO

from torchbisect.probe.info import ProbeInfo, read_info

PACKAGES = ("bisect", "report", "cli", "commands", "run", "store", "probe")
SRC = REPO / "src" / "torchbisect"
ADAPTER = "script.py"  # torchbisect's own adapter, not a reproducer


def shipped() -> list[ProbeInfo]:
    return [read_info(p) for p in sorted((REPO / "probes").glob("*.py")) if p.name != ADAPTER]


def words_of(info: ProbeInfo) -> set[str]:
    """What only this probe knows, by name: its cases and the benchmark field that prices its
    workaround.  The probe's own name is not among them: a matrix names its probes, as the
    committed pages do, and an exit-status script's one case (its own name) is derived."""
    cases = {*info.case_labels, *info.case_notes, *info.controls, *info.trial_cases}
    if info.bisect_case:
        cases.add(info.bisect_case)
    cases.discard(info.name)
    return cases | ({info.workaround_cost["key"]} if info.workaround_cost.get("key") else set())


def document_keys(info: ProbeInfo) -> set[str]:
    """Keys inside its document that only it writes (where its variants are): never a string
    constant of the shared code."""
    return {info.variants["key"]} if info.variants.get("key") else set()


def modules() -> list[Path]:
    return [p for package in PACKAGES for p in sorted((SRC / package).rglob("*.py"))]


def named(words: set[str], text: str) -> list[str]:
    return sorted(w for w in words if re.search(rf"(?<![\w.]){re.escape(w)}(?!\w)", text))


def string_constants(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    return {
        n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
    }


def test_the_shipped_probes_declare_what_only_they_know():
    """The check below is only as good as the declarations it reads: the default probe says its
    deciding case, its race and its variants, and both say they need a GPU."""
    by_name = {info.name: info for info in shipped()}
    lazy = by_name["stale_replay"]
    assert lazy.bisect_case in lazy.case_labels and set(lazy.trial_cases) <= set(lazy.case_labels)
    assert lazy.variants and lazy.workaround_cost and lazy.needs_gpu
    assert by_name["cumsum_64bit"].needs_gpu
    assert words_of(lazy) >= {"capture_data_ptr", "side_stream", "control_clone"}


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_no_shared_module_names_a_probes_cases(path):
    text = path.read_text()
    found = {info.name: named(words_of(info), text) for info in shipped()}
    found = {probe: words for probe, words in found.items() if words}
    assert not found, (
        f"{path.relative_to(REPO)} names what only a probe knows {found}: read it "
        "from the probe's declaration (probe/info.py) instead"
    )


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_no_shared_module_reads_a_probes_document_internals(path):
    constants = string_constants(path)
    found = {info.name: sorted(document_keys(info) & constants) for info in shipped()}
    found = {probe: keys for probe, keys in found.items() if keys}
    assert not found, (
        f"{path.relative_to(REPO)} reads a probe's own document keys {found}: "
        "the probe declares them (VARIANTS)"
    )


def test_the_check_reads_a_case_name_written_anywhere(tmp_path):
    """The check itself: a case name in a comment, a help string or code is found, a longer
    name that merely contains it is not."""
    words = {"side_stream", "capture_data_ptr"}
    assert named(words, "# judged like side_stream\n") == ["side_stream"]
    assert named(words, 'help="decides by capture_data_ptr"') == ["capture_data_ptr"]
    assert named(words, "x = my_side_stream_count\ny = probe.side_streams\n") == []
    module = tmp_path / "m.py"
    module.write_text('KEY = "variants"\n# the variants of a build\n')
    assert string_constants(module) == {"variants"}
