"""On a CUDA GPU: the probe's verdicts for builds simulated by patching `torch._lazy_clone`.

`simulate/sitecustomize.py` replaces `torch._lazy_clone` in the probe's processes (the forking
helper and every case): an eager copy is a fix that copies; raising under capture is a fix that
refuses, here in several wordings, most naming neither the lazy copy nor copy-on-write; raising
everywhere is a broken build. Crashing, hanging and poisoning the CUDA context under capture show
that a failing case costs only itself.

These run only where a GPU is (marker `gpu`). With TORCHBISECT_GPU_RECORD=DIR each document is
also written to DIR; those recorded on the H200 are committed in `recorded/`, and
`tests/unit/test_probe.py` applies the same checks (`check_build`, `check_isolation`) to them on
every machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
SCRIPT = HERE.parent.parent / "probes" / "stale_replay.py"
LAZY_COPY = (
    "Cannot write to this tensor (or take its data_ptr()) during graph capture: it shares "
    "memory with a lazy copy"
)
# name -> (simulation, run verdict, capture cases' verdict, does the message name the lazy copy)
SCENARIOS = {
    "fixed-eager-copy": ("fixed", "not_affected", "not_affected", None),
    "refuses-naming-the-lazy-copy": ("refuse:" + LAZY_COPY, "refused", "refused", True),
    "refuses-naming-capture-only": (
        "refuse:operation not permitted when stream is capturing",
        "refused",
        "refused",
        False,
    ),
    "refuses-naming-neither": (
        "refuse:This tensor shares its storage; call .clone() before use",
        "refused",
        "refused",
        False,
    ),
    "refuses-with-an-internal-assert": (
        "refuse:INTERNAL ASSERT FAILED at c10/core/StorageImpl.h:42",
        "refused",
        "refused",
        False,
    ),
    "broken-everywhere": (
        "broken:Could not run 'aten::_lazy_clone' with arguments from the 'CUDA' backend",
        "error",
        "error",
        False,
    ),
}
CAPTURE_CASES = ("capture_data_ptr", "capture_write", "raw_pointer_triton")


def _probe(name: str, simulation: str, *args: str) -> tuple[int, dict]:
    path = os.pathsep.join([str(HERE / "simulate"), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "STALE_REPLAY_SIMULATE": simulation, "PYTHONPATH": path}
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=600
    )
    sys.stderr.write(done.stderr)
    document = json.loads(done.stdout)
    record = os.environ.get("TORCHBISECT_GPU_RECORD")
    if record:
        Path(record, f"{name}.json").write_text(json.dumps(document, indent=2) + "\n")
    return done.returncode, document


@pytest.mark.gpu
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_simulated_build(name):
    check_build(name, *_probe(name, SCENARIOS[name][0]))


def check_build(name: str, code: int, doc: dict) -> None:
    _, run_verdict, capture_verdict, names_lazy_copy = SCENARIOS[name]
    cases = doc["cases"]
    assert doc["verdict"] == run_verdict, json.dumps(cases, indent=1)
    assert code == {"not_affected": 0, "refused": 0}.get(run_verdict, 125)
    assert cases["control_clone"]["verdict"] == "not_affected"
    assert cases["control_stale"]["verdict"] == "affected"
    assert doc["env"]["gpu"]
    for case in CAPTURE_CASES:
        assert cases[case]["verdict"] == capture_verdict, (case, cases[case]["detail"])
        if capture_verdict == "refused":
            assert cases[case]["outside_capture"] == "succeeded"
            assert cases[case]["message_names_lazy_copy"] is names_lazy_copy
    if run_verdict != "error":  # a copy on the side stream's own queue is ordered: correct
        assert cases["side_stream"]["verdict"] == "not_affected"
        assert cases["side_stream"]["trials"] == 20


ISOLATION = {  # name -> (simulation, cases, extra options, verdict of the failing case)
    "crash-under-capture": ("crash", "capture_data_ptr,side_stream", (), "crashed"),
    "hang-under-capture": ("hang", "capture_data_ptr,side_stream", ("--timeout", "20"), "timeout"),
    "cuda-error-under-capture": ("poison", "capture_data_ptr,side_stream", (), "error"),
}


@pytest.mark.gpu
@pytest.mark.parametrize("name", list(ISOLATION))
def test_a_failing_case_costs_only_itself(name):
    simulation, cases, extra, _ = ISOLATION[name]
    check_isolation(name, *_probe(name, simulation, "--cases", cases, *extra))


def check_isolation(name: str, code: int, doc: dict) -> None:
    failed = ISOLATION[name][3]
    assert doc["cases"]["capture_data_ptr"]["verdict"] == failed
    assert doc["cases"]["side_stream"]["verdict"] == "not_affected"
    assert doc["cases"]["control_clone"]["verdict"] == "not_affected"
    assert doc["cases"]["control_stale"]["verdict"] == "affected"
    assert doc["verdict"] == failed and code == 125
