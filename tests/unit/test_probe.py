"""The stale_replay probe: a standalone Python 3.8 script, its verdict logic, what it prints on a
CPU-only torch, and what the documents recorded on real H200s say.

The verdict functions are imported from the script's path (it is no package module); loading it
imports no torch, so these tests need none except the end-to-end run, which uses this interpreter's
torch (torch 2.13.0+cpu here) and is skipped with a reason where there is none.
"""

from __future__ import annotations

import ast
import faulthandler
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import REPO, python_with_torch
from helpers.py38 import find_python38, runtime_typing_errors

from torchbisect.model import ProbeResult, Verdict
from torchbisect.probe.scripts import probe_version

SCRIPT = REPO / "probes" / "stale_replay.py"
PROBE_SCRIPTS = sorted((REPO / "probes").glob("*.py"))
DATA = REPO / "reports" / "evidence" / "hand"
RECORDED = sorted(DATA.glob("h200-*.json"))
# Releases measured stale by an independent probe (shared BACKGROUND.md): their capture cases must
# be affected in any recording; others are checked for consistency only.
KNOWN_AFFECTED = ("2.11.0", "2.15.0")
# This interpreter, or CI's venv (TORCHBISECT_TEST_PYTHON), which a nox session cannot see.
TORCH_PYTHON = python_with_torch("{}.{}".format(*sys.version_info[:2]))
HAS_TORCH = TORCH_PYTHON is not None
PY38 = find_python38()
NO_PY38 = (
    "no Python 3.8 interpreter here (python3.8 on PATH, pyenv's versions/3.8*, "
    "uv python find 3.8), and no reachable registry ships one"
)


def _load():
    spec = importlib.util.spec_from_file_location("stale_replay_probe", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


probe = _load()
CONTROLS_OK = {
    "control_clone": probe.compared(0, 5),
    "control_stale": probe.compared(5, 5),
}


def _case(verdict: str, **extra) -> dict:
    return {"verdict": verdict, "detail": "", **extra}


def _run(*cases: tuple[str, dict]) -> str:
    """The run verdict of raw case results plus the two well-behaved controls."""
    raw = {**dict(cases), **CONTROLS_OK}
    return probe.roll_up(probe.settle(raw))


# --- a standalone script ------------------------------------------------------------------------


@pytest.mark.parametrize("script", PROBE_SCRIPTS, ids=lambda p: p.name)
def test_every_probe_parses_as_python_38(script):
    ast.parse(script.read_text(), filename=str(script), feature_version=(3, 8))
    assert runtime_typing_errors(script.read_text()) == []  # parses on 3.8, fails when run


@pytest.mark.skipif(PY38 is None, reason=NO_PY38)
@pytest.mark.parametrize("script", PROBE_SCRIPTS, ids=lambda p: p.name)
def test_every_probe_loads_under_a_real_python_38(script):
    """Loading runs its imports, definitions and their annotations; no torch is needed for it."""
    code = (
        "import importlib.util, sys\n"
        "spec = importlib.util.spec_from_file_location('p', sys.argv[1])\n"
        "spec.loader.exec_module(importlib.util.module_from_spec(spec))\n"
    )
    done = subprocess.run([PY38, "-c", code, str(script)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


# What 3.8 evaluates (and rejects) and what it does not; the prelude defines every name used.
PRELUDE = "import collections.abc\nfrom typing import List, cast\nb = c = y = 1\nt = [0]\n"
FUTURE = "from __future__ import annotations\n"
RUNTIME_TYPING = [
    ("x = list[int]", ["list[int]"]),
    ("def f(a: list[int]): pass", ["list[int]"]),
    ("def f(a) -> dict[str, int]: pass", ["dict[str, int]"]),
    ("def f(a: int | None): pass", ["int | None"]),
    ("x = cast(dict[str, tuple[int, ...]], y)", ["dict[str, tuple[int, ...]]"]),
    ("x = collections.abc.Callable[[int], int]", ["collections.abc.Callable[[int], int]"]),
    ("class C:\n    a: dict[str, int]", ["dict[str, int]"]),
    ("def f():\n    def g(a: list[int]): pass\n    g(1)\nf()", ["list[int]"]),
    (FUTURE + "x = isinstance(y, int | str)", ["int | str"]),
    (FUTURE + "x = list[int]", ["list[int]"]),
    (FUTURE + "def f(a: int | None) -> list[int]: pass", []),
    (FUTURE + "class C:\n    a: dict[str, int]", []),
    ("def f():\n    x: list[int] = []\nf()", []),  # a local's annotation is never evaluated
    ("def f(a: 'list[int]'): pass", []),
    ("def f(a: List[int]): pass", []),
    ("x = t[0] | b", []),
]


@pytest.mark.parametrize(("source", "flagged"), RUNTIME_TYPING)
def test_the_38_check_flags_pep_585_and_604_where_they_are_evaluated(source, flagged):
    assert [e.split(": ", 1)[1] for e in runtime_typing_errors(source)] == flagged


@pytest.mark.skipif(PY38 is None, reason=NO_PY38)
@pytest.mark.parametrize(("source", "flagged"), RUNTIME_TYPING)
def test_the_38_check_agrees_with_a_real_python_38(source, flagged, tmp_path):
    program = tmp_path / "program.py"
    head = FUTURE if source.startswith(FUTURE) else ""  # a __future__ import must come first
    program.write_text(head + PRELUDE + source[len(head) :])
    done = subprocess.run([PY38, str(program)], capture_output=True, text=True)
    assert (done.returncode != 0) == bool(flagged), done.stderr
    assert ("TypeError" in done.stderr) == bool(flagged)


def _stub_torch(folder: Path) -> Path:
    """A `torch` without CUDA: the probe's whole no-GPU path runs, no wheel for 3.8 needed."""
    (folder / "torch").mkdir(parents=True)
    (folder / "torch" / "__init__.py").write_text(
        "__version__ = '2.99.0+cpu'\n"
        "class version:\n    git_version = 'abc'\n    cuda = None\n"
        "class cuda:\n    @staticmethod\n    def is_available():\n        return False\n"
    )
    return folder


def _probe38(script: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "PYTHONPATH": str(_stub_torch(tmp_path / "stub")),
        "CUDA_VISIBLE_DEVICES": "",
    }
    return subprocess.run(
        [PY38, str(script), "--timeout", "60"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )


@pytest.mark.skipif(PY38 is None, reason=NO_PY38)
def test_the_probe_runs_under_a_real_python_38(tmp_path):
    done = _probe38(SCRIPT, tmp_path)
    assert done.returncode == 125, done.stderr
    result = ProbeResult.from_json(done.stdout)
    assert result.env["python"].startswith("3.8.")
    assert [c.name for c in result.cases] == list(probe.CASES)
    assert {c.verdict for c in result.cases} == {Verdict.SKIPPED}


@pytest.mark.skipif(PY38 is None, reason=NO_PY38)
def test_a_real_python_38_rejects_a_probe_with_a_pep_585_annotation(tmp_path):
    planted = tmp_path / "stale_replay.py"
    planted.write_text("def _sizes(n: int) -> list[int]:\n    return [n]\n" + SCRIPT.read_text())
    done = _probe38(planted, tmp_path)
    assert done.returncode == 1 and "TypeError" in done.stderr
    assert runtime_typing_errors(planted.read_text()) == ["line 1: list[int]"]


def test_script_imports_only_the_standard_library_and_torch():
    tree = ast.parse(SCRIPT.read_text())
    names = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    }
    names |= {
        node.module.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module
    }
    assert names - sys.stdlib_module_names <= {"torch", "triton"}
    assert "torchbisect" not in names


def test_loading_the_script_imports_no_torch():
    code = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('p', {str(SCRIPT)!r})\n"
        "spec.loader.exec_module(importlib.util.module_from_spec(spec))\n"
        "print('torch' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_declared_version_is_what_the_package_fingerprints():
    assert probe_version().startswith(probe.PROBE_VERSION + "+")
    assert len(probe_version().split("+")[1]) == 12


def test_the_probes_readme_refers_to_no_file_outside_the_repository():
    """Its links and the paths it quotes resolve to files in this checkout (issue 11, item 10)."""
    readme = REPO / "probes" / "README.md"
    text = readme.read_text()
    links = [
        t
        for t in re.findall(r"\]\(([^)\s]+)\)", text)
        if not re.match(r"[a-z]+:", t) and not t.startswith("#")
    ]
    quoted = re.findall(r"`([\w./*-]*/[\w./*-]*)`", text)
    assert links and quoted
    for target in links:
        path = (readme.parent / target.split("#")[0]).resolve()
        assert path.is_relative_to(REPO) and path.exists(), target
    for path in quoted:
        assert ".." not in Path(path).parts, path
        assert list(REPO.glob(path.rstrip("/"))), f"{path} is not in the repository"


def test_readme_lists_every_case():
    readme = (REPO / "probes" / "README.md").read_text()
    for name in probe.CASES:
        assert f"| `{name}` |" in readme


# --- verdict logic --------------------------------------------------------------------------------


def test_probe_and_package_agree_on_verdicts_and_exit_codes():
    assert set(probe.VERDICTS) == {v.value for v in Verdict}
    for verdict in Verdict:
        assert probe.exit_code(verdict.value) == verdict.exit_code


@pytest.mark.parametrize(
    ("cases", "expected"),
    [
        ({"capture_data_ptr": _case("affected"), "side_stream": _case("not_affected")}, "affected"),
        (
            {"capture_data_ptr": _case("affected"), "compile_reduce_overhead": _case("timeout")},
            "affected",
        ),
        (
            {"capture_data_ptr": _case("not_affected"), "side_stream": _case("not_affected")},
            "not_affected",
        ),
        ({"capture_data_ptr": _case("refused"), "side_stream": _case("not_affected")}, "refused"),
        (
            {
                "capture_data_ptr": _case("not_affected"),
                "raw_pointer_triton": _case("not_applicable"),
            },
            "not_affected",
        ),
        ({"capture_data_ptr": _case("not_affected"), "side_stream": _case("error")}, "error"),
        ({"capture_data_ptr": _case("refused"), "side_stream": _case("timeout")}, "timeout"),
        ({"capture_data_ptr": _case("crashed"), "side_stream": _case("timeout")}, "crashed"),
        (
            {
                "capture_data_ptr": _case("timeout"),
                "side_stream": _case("error"),
                "capture_write": _case("crashed"),
            },
            "error",
        ),
        (
            {"capture_data_ptr": _case("not_applicable"), "side_stream": _case("not_applicable")},
            "not_applicable",
        ),
        ({}, "not_applicable"),  # the controls alone: the positive one's "affected" never counts
    ],
)
def test_roll_up_precedence_with_behaving_controls(cases, expected):
    assert _run(*cases.items()) == expected


def test_every_case_skipped_rolls_up_to_skipped():
    cases = {name: _case("skipped") for name in probe.CASES}
    assert probe.roll_up(probe.settle(cases)) == "skipped"
    assert probe.exit_code("skipped") == 125


@pytest.mark.parametrize(
    ("control", "result"),
    [
        ("control_clone", probe.compared(1, 5)),  # the regular clone came out stale
        ("control_stale", probe.compared(0, 5)),  # the outside copy was not seen as stale
        ("control_stale", probe.compared(3, 5)),  # seen on some replays only
        ("control_clone", _case("crashed")),
        ("control_stale", _case("refused")),
        ("control_clone", None),  # not run at all
    ],
)
def test_a_misbehaving_control_makes_every_comparison_inconclusive(control, result):
    raw = {
        "capture_data_ptr": probe.compared(5, 5),
        "side_stream": probe.compared(0, 20),
        "raw_pointer_triton": _case("not_applicable"),
        **CONTROLS_OK,
        control: result,
    }
    if result is None:
        del raw[control]
    settled = probe.settle(raw)
    assert probe.roll_up(settled) == "inconclusive"
    assert settled["capture_data_ptr"]["verdict"] == "inconclusive"
    assert settled["side_stream"]["verdict"] == "inconclusive"
    assert settled["raw_pointer_triton"]["verdict"] == "not_applicable"
    if result is not None and result["verdict"] in ("affected", "not_affected"):
        assert settled[control]["verdict"] == "inconclusive"
        assert "control misbehaved" in settled[control]["detail"]
    elif result is not None:
        assert settled[control]["verdict"] == result["verdict"]  # the failure itself stays visible


def test_behaving_controls_keep_their_verdicts():
    settled = probe.settle({"capture_write": probe.compared(5, 5), **CONTROLS_OK})
    assert settled["control_clone"]["verdict"] == "not_affected"
    assert settled["control_stale"]["verdict"] == "affected"
    assert settled["capture_write"]["verdict"] == "affected"


@pytest.mark.parametrize(
    ("stale", "trials", "verdict", "flaky"),
    [
        (0, 20, "not_affected", False),
        (3, 20, "affected", True),
        (20, 20, "affected", False),
    ],
)
def test_comparisons_report_their_stale_fraction(stale, trials, verdict, flaky):
    result = probe.compared(stale, trials, unit="trials")
    assert result["verdict"] == verdict
    assert ("flaky" in result["detail"]) is flaky
    document = {"schema": 1, "verdict": verdict, "cases": {"side_stream": result}}
    case = ProbeResult.from_json(document).case("side_stream")
    assert case.flaky is flaky
    assert case.stale_fraction == stale / trials


def _variant(outcome: str, detail: str = "") -> dict:
    return {"outcome": outcome, "detail": detail or outcome}


@pytest.mark.parametrize(
    ("outcomes", "verdict"),
    [
        (["correct", "stale", "error"], "affected"),
        (["correct", "error"], "error"),
        (["correct", "refused"], "refused"),
        (["correct", "not_applicable"], "not_affected"),
        (["not_applicable"], "not_applicable"),
    ],
)
def test_compile_case_verdict_from_its_variants(outcomes, verdict):
    variants = {f"v{i}": _variant(o) for i, o in enumerate(outcomes)}
    assert probe.compile_outcome(variants)["verdict"] == verdict


def test_compile_case_says_honestly_when_nothing_reproduced():
    variants = {
        "inline_inplace": _variant("correct", "correct on 6/6 calls"),
        "custom_op_data_ptr": _variant("correct", "correct on 6/6 calls"),
    }
    detail = probe.compile_outcome(variants)["detail"]
    assert detail.startswith("no staleness reproduced through torch.compile (variants tried: ")
    assert "inline_inplace" in detail and "custom_op_data_ptr" in detail


REFUSAL = (
    "Cannot write to this tensor (or take its data_ptr()) during graph capture: "
    "it shares memory with a lazy copy"
)


def _raised_over(inner: Exception, outer: Exception) -> Exception:
    try:
        try:
            raise inner
        except Exception:
            raise outer  # noqa: B904 - keeps __context__, as torch.cuda.graph's capture_end does
    except Exception as exc:
        return exc


@pytest.mark.parametrize(
    ("exc", "names_it"),
    [
        (RuntimeError(REFUSAL), True),
        (
            _raised_over(
                RuntimeError(REFUSAL),
                RuntimeError("CUDA error: operation failed due to a previous error during capture"),
            ),
            True,
        ),
        (RuntimeError("Materializing a copy-on-write tensor is not allowed while capturing"), True),
        (
            RuntimeError(
                "Could not run 'aten::_lazy_clone' with arguments from the 'CUDA' backend"
            ),
            False,
        ),
        (RuntimeError("CUDA error: operation not permitted when stream is capturing"), False),
        (ValueError("x" * 5000), False),
    ],
)
def test_the_message_check_is_only_supporting_detail(exc, names_it):
    text = probe.exception_text(exc)
    assert probe.names_lazy_copy(text) is names_it
    assert len(text) <= probe.DETAIL_LIMIT


# --- refusal by behaviour: the same step outside capture decides ---------------------------------


@pytest.mark.parametrize(
    "message",
    [
        REFUSAL,
        "operation not permitted when stream is capturing",
        "This tensor shares its storage; call .clone() before use",  # names neither
        "INTERNAL ASSERT FAILED at c10/core/StorageImpl.h:42",
    ],
)
def test_raised_under_capture_but_fine_outside_is_refused_whatever_the_message(message):
    outcome = probe.refusal_outcome(f"RuntimeError: {message}", outside_error=None)
    assert outcome["verdict"] == "refused"
    assert outcome["outside_capture"] == "succeeded"
    assert message in outcome["detail"]
    assert outcome["message_names_lazy_copy"] is (message == REFUSAL)
    assert _run(("capture_data_ptr", outcome)) == "refused"


@pytest.mark.parametrize(
    "outside",
    [
        "RuntimeError: Could not run 'aten::_lazy_clone' with arguments from the 'CUDA' backend",
        "outside capture it gave wrong values",
    ],
)
def test_raised_under_capture_and_broken_outside_is_an_error_even_if_it_names_the_copy(outside):
    outcome = probe.refusal_outcome(f"RuntimeError: {REFUSAL}", outside_error=outside)
    assert outcome["verdict"] == "error"
    assert outcome["message_names_lazy_copy"] is True
    assert outside in outcome["detail"] and outside in outcome["outside_capture"]
    assert _run(("capture_data_ptr", outcome)) == "error"


def test_no_refusal_when_capturing_a_regular_clone_fails_too():
    refused = probe.refusal_outcome("RuntimeError: capture failed", outside_error=None)
    raw = {
        "capture_data_ptr": refused,
        **CONTROLS_OK,
        "control_clone": _case("error", detail="RuntimeError: capture failed"),
    }
    settled = probe.settle(raw)
    assert settled["capture_data_ptr"]["verdict"] == "inconclusive"
    assert "capturing a regular clone failed too" in settled["capture_data_ptr"]["detail"]
    assert probe.roll_up(settled) == "inconclusive"


def test_a_compile_variant_that_refuses_makes_the_compile_case_refused():
    variants = {
        "inline_inplace": _variant("correct"),
        "custom_op_data_ptr": _variant("refused", "raised during capture; ..."),
    }
    assert probe.compile_outcome(variants)["verdict"] == "refused"


# --- child processes: crashes, hangs and results --------------------------------------------------


def _python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_a_child_killed_by_a_signal_is_crashed_with_the_signal_name():
    result = probe.run_child(
        _python("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"), timeout=60
    )
    assert result["verdict"] == "crashed"
    assert result["signal"] == "SIGSEGV"
    assert "SIGSEGV" in result["detail"]


def _outlives(marker: Path, seconds: float = 20) -> str:
    """Code that sleeps, then leaves `marker`: it is there only if nobody killed the sleeper."""
    return f"import time; time.sleep({seconds}); open({str(marker)!r}, 'w').close()"


def test_a_hanging_child_is_a_timeout_and_is_killed(tmp_path):
    marker = tmp_path / "outlived"
    result = probe.run_child(_python(_outlives(marker)), timeout=0.5)
    assert result["verdict"] == "timeout"
    assert not marker.exists()  # killed at the timeout: not waited for


def test_a_child_result_line_is_found_among_other_output():
    line = json.dumps({"verdict": "affected", "detail": "stale on 5/5 replays"})
    result = probe.run_child(_python(f"print('noise {{}}'); print({line!r})"), timeout=60)
    assert result["verdict"] == "affected"
    assert result["detail"] == "stale on 5/5 replays"


def test_a_child_that_fails_without_a_result_is_an_error_with_its_message():
    result = probe.run_child(_python("raise SystemExit('torch went away')"), timeout=60)
    assert result["verdict"] == "error"
    assert "torch went away" in result["detail"]


def test_a_result_survives_a_crash_at_exit():
    outcome = probe.child_outcome(
        -11, '{"verdict": "not_affected", "detail": "correct"}\n', "", timed_out=False, timeout=60
    )
    assert outcome["verdict"] == "not_affected"
    assert "SIGSEGV" in outcome["detail"]


# --- the forking helper: torch imported once, a forked child per case -----------------------------


def _raise():
    raise RuntimeError("torch went away")


def _segfault():
    faulthandler.disable()  # the test runner's handler would print this process's stack
    os.kill(os.getpid(), signal.SIGSEGV)


def _prints(result: dict):
    def child():
        print(json.dumps(result), flush=True)
        os._exit(0)

    return child


def _forked(children: dict, *, timeout: float = 30.0, jobs: int = 2) -> dict:
    """Fake cases through `run_forked` (it forks this process): name -> reported result."""
    got = {}
    probe.run_forked(
        list(children),
        lambda name: children[name](),
        timeout,
        jobs,
        lambda name, result: got.__setitem__(name, result),
    )
    return got


@pytest.mark.slow
def test_a_forked_crash_hang_or_exception_costs_only_its_own_case(tmp_path):
    marker = tmp_path / "outlived"
    got = _forked(
        {
            "segfaults": _segfault,
            "hangs": lambda: (time.sleep(20), marker.touch()),  # only if never killed
            "raises": _raise,
            "measures": _prints({"verdict": "affected", "detail": "stale on 5/5 replays"}),
        },
        timeout=2,
        jobs=4,
    )
    assert got["segfaults"]["verdict"] == "crashed" and got["segfaults"]["signal"] == "SIGSEGV"
    assert got["hangs"]["verdict"] == "timeout" and not marker.exists()  # killed, not waited for
    assert got["raises"]["verdict"] == "error" and "torch went away" in got["raises"]["detail"]
    assert got["measures"] == {
        "verdict": "affected",
        "detail": "stale on 5/5 replays",
        "wall_seconds": got["measures"]["wall_seconds"],
    }


def test_forked_cases_start_slowest_first_and_once_one_finds_no_gpu_the_rest_are_spared():
    no_gpu = {"verdict": "skipped", "detail": probe.NO_CUDA, "env": {"cuda_available": False}}
    got = _forked(
        {
            "capture_data_ptr": _prints({"verdict": "affected", "detail": "ran"}),
            "compile_reduce_overhead:inline_inplace": _prints(no_gpu),
        },
        jobs=1,
    )
    assert got["compile_reduce_overhead:inline_inplace"]["detail"] == probe.NO_CUDA
    assert got["capture_data_ptr"] == {
        "verdict": "skipped",
        "detail": probe.NO_CUDA,
        "seconds": 0.0,
    }


def _part(variant: str, outcome: str) -> dict:
    """What the child of one compile variant reports."""
    return {
        "verdict": "affected" if outcome == "stale" else "not_affected",
        "variants": {variant: _variant(outcome, f"{outcome} on 6/6 calls")},
        "seconds": 1.5,
        "wall_seconds": 2.0,
        "env": {"gpu": "NVIDIA H200"},
    }


def test_compile_variants_run_apart_merge_into_one_case():
    parts = {v: _part(v, "correct") for v in probe.COMPILE_VARIANTS}
    parts["custom_op_data_ptr"] = _part("custom_op_data_ptr", "stale")
    merged = probe.merge_variants(parts)
    assert merged["verdict"] == "affected"
    assert list(merged["variants"]) == list(probe.COMPILE_VARIANTS)
    assert "env" not in merged and merged["wall_seconds"] == 2.0  # the env is asked apart


def test_a_crashed_variant_child_is_the_compile_case_crash_unless_another_was_stale():
    parts = {v: _part(v, "correct") for v in probe.COMPILE_VARIANTS}
    parts["static_input"] = {
        "verdict": "crashed",
        "signal": "SIGSEGV",
        "detail": "killed by SIGSEGV: Fatal Python error",
    }
    merged = probe.merge_variants(parts)
    assert merged["verdict"] == "crashed"
    assert merged["variants"]["static_input"]["outcome"] == "error"
    assert "killed by SIGSEGV" in merged["variants"]["static_input"]["detail"]
    parts["custom_op_data_ptr"] = _part("custom_op_data_ptr", "stale")
    assert probe.merge_variants(parts)["verdict"] == "affected"


def test_variant_children_that_all_found_no_gpu_make_one_skipped_case():
    parts = {v: {"verdict": "skipped", "detail": probe.NO_CUDA} for v in probe.COMPILE_VARIANTS}
    assert probe.merge_variants(parts) == {"verdict": "skipped", "detail": probe.NO_CUDA}


# --- end to end on a machine without a GPU --------------------------------------------------------


def _probe(*args: str, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}  # a GPU machine must say "skipped" too
    return subprocess.run(
        [TORCH_PYTHON, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )


@pytest.mark.slow
@pytest.mark.skipif(not HAS_TORCH, reason="this interpreter has no torch: pip install torch")
def test_without_cuda_every_case_is_skipped_with_exit_125(tmp_path):
    done = _probe(tmp_path=tmp_path)
    assert done.returncode == 125, done.stderr
    result = ProbeResult.from_json(done.stdout)
    assert result.verdict is Verdict.SKIPPED
    assert [c.name for c in result.cases] == list(probe.CASES)
    assert {c.verdict for c in result.cases} == {Verdict.SKIPPED}
    assert result.probe == "stale_replay" and result.probe_version == probe.PROBE_VERSION
    assert result.env["torch"] and result.env["cuda_available"] is False
    assert result.raw["exit_code"] == 125


@pytest.mark.slow
@pytest.mark.skipif(not HAS_TORCH, reason="this interpreter has no torch: pip install torch")
def test_json_option_writes_the_document_and_adds_the_controls(tmp_path):
    path = tmp_path / "doc.json"
    done = _probe("--cases", "side_stream", "--json", str(path), tmp_path=tmp_path)
    assert done.returncode == 125, done.stderr
    assert done.stdout == ""  # progress lines go to stderr only
    names = [c.name for c in ProbeResult.from_json(path.read_text()).cases]
    assert names == ["side_stream", "control_clone", "control_stale"]


def test_a_bad_case_name_is_one_sentence_and_aborts_git_bisect(tmp_path):
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--cases", "capture_data_pointer"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert done.returncode == 128
    assert "unknown case capture_data_pointer in --cases" in done.stderr
    assert "Traceback" not in done.stderr


# --- simulated builds recorded on the H200 (tests/gpu/test_simulated_builds.py) ------------------


def _load_gpu_tests():
    path = REPO / "tests" / "gpu" / "test_simulated_builds.py"
    spec = importlib.util.spec_from_file_location("simulated_builds", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SIMULATED = _load_gpu_tests()
GPU_RECORDED = REPO / "tests" / "gpu" / "recorded"


def _gpu_recorded(name: str) -> tuple[int, dict]:
    doc = json.loads((GPU_RECORDED / f"{name}.json").read_text())
    assert doc["env"]["gpu"] == "NVIDIA H200" and doc["probe_version"] == "2"
    return doc["exit_code"], doc


@pytest.mark.parametrize("name", list(SIMULATED.SCENARIOS))
def test_simulated_build_as_recorded_on_the_h200(name):
    """Refused whatever the message, fixed, broken: as the GPU test saw it on the H200."""
    SIMULATED.check_build(name, *_gpu_recorded(name))


@pytest.mark.parametrize("name", list(SIMULATED.ISOLATION))
def test_a_failing_case_cost_only_itself_on_the_h200(name):
    SIMULATED.check_isolation(name, *_gpu_recorded(name))


@pytest.mark.parametrize("version", ["2.11.0", "2.15.0"])
def test_todays_probe_agrees_case_for_case_with_the_first_recording(version):
    """Forked cases, one torch import: the same verdicts as one interpreter per case gave."""
    _, now = _gpu_recorded(f"real-torch-{version}")
    before = json.loads((DATA / f"h200-torch-{version}.json").read_text())
    assert {n: c["verdict"] for n, c in now["cases"].items()} == {
        n: c["verdict"] for n, c in before["cases"].items()
    }
    assert now["env"]["torch"] == before["env"]["torch"] and now["verdict"] == "affected"
    assert now["cases"]["side_stream"]["trials"] == 20
    # which GPU it ran on, as nvidia-smi and CUDA_VISIBLE_DEVICES name it
    assert re.fullmatch(r"GPU-[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}", now["env"]["gpu_uuid"])


# --- documents recorded on a real H200 ------------------------------------------------------------


def test_recorded_documents_exist():
    assert any(p.name == "h200-torch-2.11.0.json" for p in RECORDED)


@pytest.fixture(params=RECORDED, ids=[p.name for p in RECORDED])
def recorded(request) -> ProbeResult:
    return ProbeResult.from_json(request.param.read_text())


def test_recorded_verdict_follows_from_its_cases(recorded):
    cases = recorded.raw["cases"]
    assert recorded.verdict.value == probe.roll_up(cases)
    assert recorded.raw["exit_code"] == recorded.verdict.exit_code
    assert recorded.env["gpu"] == "NVIDIA H200" and recorded.env["capability"] == "9.0"


def test_recorded_controls_behaved(recorded):
    clone, stale = recorded.case("control_clone"), recorded.case("control_stale")
    assert clone.verdict is Verdict.NOT_AFFECTED and clone.stale_trials == 0
    assert stale.verdict is Verdict.AFFECTED and stale.stale_trials == stale.trials >= 3


def test_recorded_side_stream_reports_a_fraction(recorded):
    side = recorded.case("side_stream")
    assert side.trials >= 20
    assert side.stale_fraction is not None and 0.0 <= side.stale_fraction <= 1.0


def test_known_affected_releases_are_stale_under_capture(recorded):
    release = recorded.env["torch"].split("+")[0]
    if release not in KNOWN_AFFECTED:
        pytest.skip(f"{release} was not measured independently")
    for name in ("capture_data_ptr", "capture_write", "raw_pointer_triton"):
        case = recorded.case(name)
        assert case.verdict is Verdict.AFFECTED, (name, case.detail)
        assert case.stale_trials == case.trials
    assert recorded.case("side_stream").stale_fraction > 0


def test_torch_2_11_is_stale_through_compile_only_behind_a_custom_op():
    document = json.loads((DATA / "h200-torch-2.11.0.json").read_text())
    compiled = document["cases"]["compile_reduce_overhead"]
    outcomes = {name: v["outcome"] for name, v in compiled["variants"].items()}
    assert compiled["verdict"] == "affected"
    assert outcomes.pop("custom_op_data_ptr") == "stale"
    assert set(outcomes.values()) == {"correct"}
    assert document["cases"]["side_stream"]["stale_trials"] == 20


class _TorchWithoutGpuWork:
    """Just enough torch for raw_pointer_triton to reach its first kernel launch."""

    def __init__(self):
        self.cuda = type("cuda", (), {"graph": None, "CUDAGraph": None})
        self._lazy_clone = lambda x: x

    def zeros(self, n, device):
        return [0.0] * n

    def empty_like(self, x):
        return list(x)


class _Launch:
    """A Triton kernel whose launcher build fails the way `launch` does."""

    def __init__(self, launch):
        self.launch = launch

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.launch()


def _launch_failure(monkeypatch, launch) -> str:
    monkeypatch.setattr(probe, "_triton_double", lambda: _Launch(launch))
    with pytest.raises(Exception) as raised:  # noqa: B017, PT011 - the probe's one catch-all
        probe.case_raw_pointer_triton(_TorchWithoutGpuWork(), 1)
    return probe.exception_text(raised.value)


def test_triton_without_a_c_compiler_is_named_as_the_environments_failure(monkeypatch):
    # The message measured on the H200 in a container without gcc (reports/docker-h200/no-compiler)
    measured = (
        "Failed to find C compiler. Please specify via CC environment variable or set "
        "triton.knobs.build.impl."
    )

    def launch():
        raise RuntimeError(measured)

    said = _launch_failure(monkeypatch, launch)
    assert said.startswith("RuntimeError: Triton needs a C compiler in the environment")
    assert "apt-get install gcc libc6-dev python3-dev" in said
    assert said.endswith(f"<- RuntimeError: {measured}")


def test_a_launcher_build_that_finds_no_python_h_is_named_too(monkeypatch, tmp_path):
    """Triton compiles its launcher as `gcc main.c -I<python include> …`: here a real gcc that
    sees no system headers, as in an image without python3-dev."""
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("no gcc on this machine to fail a real build with")
    (tmp_path / "main.c").write_text("#include <Python.h>\nint main(void) { return 0; }\n")

    def launch():
        subprocess.check_call(
            [gcc, "-nostdinc", "-c", str(tmp_path / "main.c"), "-o", str(tmp_path / "main.o")],
            stderr=subprocess.DEVNULL,
        )

    said = _launch_failure(monkeypatch, launch)
    assert said.startswith("RuntimeError: Triton needs a C compiler in the environment")
    assert "<- CalledProcessError: Command '['" in said


def test_any_other_launch_failure_is_left_as_it_was(monkeypatch):
    def launch():
        raise ValueError("out of resources: shared memory")

    assert _launch_failure(monkeypatch, launch) == "ValueError: out of resources: shared memory"


# --- the environment is asked apart from the cases (issue 31) ------------------------------------


def _torch_stub(folder: Path, cudnn: str = "return 90100", dynamo: str | None = None) -> Path:
    """A `torch` package without CUDA whose cuDNN query runs `cudnn` (e.g. `os.abort()`), and,
    with `dynamo`, a `torch._dynamo.eval_frame.check_if_dynamo_supported` whose body that is."""
    package = folder / "torch"
    (package / "backends").mkdir(parents=True)
    (package / "__init__.py").write_text(
        "__version__ = '2.3.0+cu121'\nfrom . import backends\n"
        "class version:\n    git_version = 'abc'\n    cuda = '12.1'\n"
        "class cuda:\n    @staticmethod\n    def is_available():\n        return False\n"
    )
    (package / "backends" / "__init__.py").write_text("from . import cudnn\n")
    (package / "backends" / "cudnn.py").write_text(f"import os\ndef version():\n    {cudnn}\n")
    if dynamo is not None:
        (package / "_dynamo").mkdir()
        (package / "_dynamo" / "__init__.py").write_text("")
        (package / "_dynamo" / "eval_frame.py").write_text(
            f"def check_if_dynamo_supported():\n    {dynamo}\n"
        )
    return folder


def _run_script(tmp_path: Path, stub: Path | None, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if stub is not None:
        env["PYTHONPATH"] = str(stub)
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--timeout", "60", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )


def test_an_aborting_environment_query_reads_unknown_and_takes_no_case_down(tmp_path):
    done = _run_script(tmp_path, _torch_stub(tmp_path / "stub", cudnn="os.abort()"))
    document = json.loads(done.stdout)
    assert {case["verdict"] for case in document["cases"].values()} == {"skipped"}
    env = document["env"]
    assert env["cudnn"] is None and "SIGABRT" in env["unknown"]["cudnn"]
    # the queries before it and after it were answered all the same
    assert env["torch"] == "2.3.0+cu121" and env["cuda_available"] is False
    assert set(env["unknown"]) == {"cudnn"}
    assert ProbeResult.from_json(done.stdout).env["torch"] == "2.3.0+cu121"


def test_a_raising_environment_query_is_unknown_with_its_reason(tmp_path):
    done = _run_script(tmp_path, _torch_stub(tmp_path / "stub", cudnn="raise OSError('no cuDNN')"))
    env = json.loads(done.stdout)["env"]
    assert env["cudnn"] is None and env["unknown"] == {"cudnn": "OSError: no cuDNN"}


def _runs(*outcomes):
    """A `run_one` for gather_env that plays `outcomes` (how it ended, JSON lines) in turn and
    records which keys each process was told to skip."""
    asked = []

    def run_one(skip):
        asked.append(list(skip))
        ended, lines = outcomes[len(asked) - 1]
        return ended, "\n".join(json.dumps(line) for line in lines), "Aborted (core dumped)"

    return run_one, asked


def test_gather_env_asks_again_after_the_query_that_ended_the_process():
    answered = [{"asking": "torch"}, {"answer": "torch", "value": "2.4.0"}, {"asking": "gpu"}]
    rest = [
        {"asking": k} if i % 2 == 0 else {"answer": k, "value": "x"}
        for k in probe.ENV_KEYS
        if k not in ("torch", "gpu")
        for i in (0, 1)
    ]
    run_one, asked = _runs(("SIGABRT", answered), ("status 0", rest + [{"env_done": True}]))
    env = probe.gather_env(run_one)
    assert asked == [[], ["gpu", "torch"]]
    assert env["torch"] == "2.4.0" and env["gpu"] is None and env["cudnn"] == "x"
    assert list(env["unknown"]) == ["gpu"] and "SIGABRT" in env["unknown"]["gpu"]


def test_gather_env_says_what_it_never_asked_when_the_process_died_outside_a_query():
    run_one, _ = _runs(("status 1", [{"asking": "torch"}, {"answer": "torch", "value": "2.4"}]))
    env = probe.gather_env(run_one)
    assert env["torch"] == "2.4" and env["driver"] is None
    assert env["unknown"]["driver"].startswith("not asked: the query process ended (status 1)")


def test_gather_env_is_none_when_torch_does_not_import():
    run_one, _ = _runs(("status 0", [{"no_torch": "ImportError: libcudart.so.12"}]))
    assert probe.gather_env(run_one) is None


def _needs(stub: Path, call: str) -> subprocess.CompletedProcess:
    program = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('probe', {str(SCRIPT)!r})\n"
        "probe = importlib.util.module_from_spec(spec); spec.loader.exec_module(probe)\n"
        "import torch\n"
        f"try:\n    {call}\nexcept probe.NotApplicable as exc:\n"
        "    print('not_applicable:', exc)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(stub)
    return subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, env=env, timeout=120
    )


def test_the_compile_case_is_not_applicable_where_dynamo_does_not_support_the_python(tmp_path):
    refusal = "raise RuntimeError('Python 3.12+ not yet supported for torch.compile')"
    done = _needs(_torch_stub(tmp_path, dynamo=refusal), "probe._needs_dynamo_here(torch)")
    assert done.stdout.startswith(
        "not_applicable: torch.compile does not run here: Python 3.12+ "
        "not yet supported for torch.compile"
    ), done.stderr


def test_the_compile_case_runs_where_dynamo_supports_the_python(tmp_path):
    done = _needs(_torch_stub(tmp_path, dynamo="return None"), "probe._needs_dynamo_here(torch)")
    assert done.returncode == 0 and done.stdout == "", done.stderr


def test_the_compile_case_is_not_applicable_without_triton(tmp_path):
    stub = _torch_stub(tmp_path)
    (stub / "triton.py").write_text("raise ImportError('No module named triton')\n")
    done = _needs(stub, "probe._needs_triton()")
    assert done.stdout.startswith("not_applicable: torch.compile on CUDA needs Triton"), done.stderr


# --- the self-check without torch or a GPU speaks plainly (issue 34, item 5) ---------------------


def test_the_script_without_torch_says_one_line_and_exits_125(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, "-S", str(SCRIPT)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 125
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith("[stale_replay] cannot tell: torch does not import")
    document = json.loads(done.stdout)  # the document stays on stdout, as the contract says
    assert document["verdict"] == "error" and document["exit_code"] == 125


def test_the_script_without_a_gpu_says_one_line_and_exits_125(tmp_path):
    done = _run_script(tmp_path, _torch_stub(tmp_path / "stub"))
    assert done.returncode == 125
    assert done.stderr.splitlines() == [
        "[stale_replay] cannot tell: no CUDA device: torch.cuda.is_available() is False; run "
        "this script on a machine with an NVIDIA GPU (and a CUDA build of torch)"
    ]
    assert json.loads(done.stdout)["verdict"] == "skipped"


def test_the_script_without_torch_at_a_terminal_says_its_line_without_the_document(tmp_path):
    """By hand at a terminal it printed the one clear line and 72 lines of JSON saying
    `"verdict": "error"` (issue 49, friction 9); a pipe still gets the document (above)."""
    import pty

    leader, follower = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, "-S", str(SCRIPT)],
        stdout=follower,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    os.close(follower)
    shown = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the terminal's other end is closed: all of it was read
            break
        if not chunk:
            break
        shown += chunk
    os.close(leader)
    assert done.returncode == 125 and shown == b""
    assert done.stderr.startswith("[stale_replay] cannot tell: torch does not import")
    assert done.stderr.rstrip().endswith("; --json PATH writes the document")
    assert done.stderr.count("\n") == 1
