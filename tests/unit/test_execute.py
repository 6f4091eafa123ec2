"""execute: the one place where what happened becomes a status.  Only a probe that exited 0, 1 or
125 with a valid document agreeing with that status gives a verdict; everything else (crash,
timeout, no JSON, bad JSON, a broken backend) is an infrastructure failure with a reason."""

from __future__ import annotations

import json

import pytest
from helpers import ScriptedBackend, make_cell, ok_output, probe_doc
from hypothesis import example, given
from hypothesis import strategies as st

from torchbisect.backends.base import ProbeOutput
from torchbisect.errors import CommandFailed, InfraError
from torchbisect.model import RunStatus, Verdict
from torchbisect.probe.document import claimed
from torchbisect.run import execute
from torchbisect.utils.gpus import Gpu

GPU = Gpu(index=1, name="NVIDIA H200", driver="580.159.04")


pytestmark = pytest.mark.usefixtures("fake_probes")


def _out(doc, code: int, tail: str = "") -> ProbeOutput:
    text = doc if isinstance(doc, str) else json.dumps(doc)
    return ProbeOutput(json_text=text, exit_code=code, seconds=1.0, log_tail=tail)


@pytest.mark.parametrize(
    ("output", "verdict"),
    [
        (_out(probe_doc("skipped"), 125), Verdict.SKIPPED),
        (_out(probe_doc("affected", {"capture_data_ptr": "affected"}), 1), Verdict.AFFECTED),
        (_out(probe_doc("not_affected"), 0), Verdict.NOT_AFFECTED),
        (_out(probe_doc("refused"), 0), Verdict.REFUSED),
        (_out(probe_doc("inconclusive"), 125), Verdict.INCONCLUSIVE),
    ],
)
def test_a_valid_document_with_its_exit_status_is_a_verdict(output, verdict):
    status, result, reason = execute.interpret(output)
    assert (status, result.verdict, reason) == (RunStatus.OK, verdict, "")


@pytest.mark.parametrize(
    ("output", "reason"),
    [
        (_out(probe_doc("not_affected"), -11), "killed by signal SIGSEGV"),
        (_out("", -9), "killed by signal SIGKILL"),
        (
            _out("", 3, "RuntimeError: CUDA driver too old"),
            "status 3 (expected 0, 1 or 125): RuntimeError: CUDA driver too old",
        ),
        (_out("", 128), "status 128"),
        (
            _out("", 128, "script.py: the probe my_bug.py holds no statement (only comments)"),
            "the probe my_bug.py holds no statement (only comments)",
        ),  # the adapter's refusal
        (
            _out(
                probe_doc("not_affected"), 128, "script.py: the probe x.py cannot be opened (gone)"
            ),
            "the probe x.py cannot be opened (gone)",
        ),
        (_out("", 125), "no JSON document (exit status 125)"),
        (
            _out("", 1, "Traceback ...\nImportError: libcudart.so.13"),
            "no JSON document (exit status 1): ImportError: libcudart.so.13",
        ),
        (_out("{not json", 0), "probe JSON unreadable"),
        (_out({**probe_doc("skipped"), "schema": 2}, 125), "unsupported probe schema"),
        (_out(probe_doc("stale"), 1), "unreadable"),
        (_out({"schema": 1, "cases": {}}, 0), "unreadable"),
        (_out(probe_doc("affected"), 0), "disagrees with its verdict 'affected'"),
        (_out(probe_doc("not_affected"), 1), "disagrees with its verdict 'not_affected'"),
    ],
)
def test_anything_else_is_an_infrastructure_failure_not_a_verdict(output, reason):
    status, result, why = execute.interpret(output)
    assert status is RunStatus.INFRA_FAILURE and result is None
    assert reason in why


@given(
    code=st.integers(-64, 255),
    verdict=st.sampled_from([v.value for v in Verdict] + ["stale", ""]),
    garble=st.booleans(),
)
# the stand-in probe declares no CONTROLS: "not_applicable" beside a control measured not
# affected rolls up to not_affected (Hypothesis found it once in a few dozen runs)
@example(code=125, verdict="not_applicable", garble=False)
def test_a_verdict_only_ever_comes_with_its_own_exit_status(code, verdict, garble):
    """A run is a verdict only when the exit status agrees with the verdict the probe claimed;
    a claim its cases do not roll up to is stored as the roll-up, the claim kept beside it
    (probes/README.md, Roll-up)."""
    text = json.dumps(probe_doc(verdict))
    status, result, _ = execute.interpret(_out(text[:-3] if garble else text, code))
    if status is RunStatus.OK:
        assert not garble and code == claimed(result.raw).exit_code
        if result.verdict is not claimed(result.raw):
            assert result.raw["verdict"] == result.verdict.value
    else:
        assert result is None


def test_run_cell_records_where_and_how_it_ran(tmp_path):
    cell = make_cell("dev-a")
    backend = ScriptedBackend(probes={"dev-a": ok_output("affected")})
    run = execute.run_cell(backend, cell, gpu=GPU, logs_dir=tmp_path)
    assert run.status is RunStatus.OK and run.verdict is Verdict.AFFECTED
    assert (run.gpu, run.driver, run.backend) == ("NVIDIA H200", "580.159.04", "scripted")
    assert run.wheel_sha256 == cell.sha256
    assert run.probe_version.startswith("test+")
    assert run.started.endswith("+00:00")
    assert backend.gpus_used == [1] and backend.released == ["dev-a"]


def test_without_a_gpu_the_run_says_none(tmp_path):
    run = execute.run_cell(ScriptedBackend(), make_cell(), gpu=None, logs_dir=tmp_path)
    assert (run.gpu, run.driver) == ("none", "")


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (
            InfraError("download of https://x/torch.whl failed after 3 attempts: 503"),
            "install: download of https://x/torch.whl failed after 3 attempts: 503",
        ),
        (
            CommandFailed(["uv", "pip", "install"], 2, "error: hash mismatch"),
            "install: `uv pip install` exited with status 2: error: hash mismatch",
        ),
        (RuntimeError("a bug in a backend"), "install: RuntimeError: a bug in a backend"),
    ],
)
def test_an_install_failure_is_stored_with_its_reason(tmp_path, error, reason):
    backend = ScriptedBackend(installs={"dev-a": error})
    run = execute.run_cell(backend, make_cell("dev-a"), gpu=GPU, logs_dir=tmp_path)
    assert run.status is RunStatus.INFRA_FAILURE and run.verdict is None
    assert run.reason == reason
    assert reason in (tmp_path / "dev-a.log").read_text()
    assert backend.released == []  # nothing was prepared


def test_a_bug_leaves_its_traceback_in_the_cell_log(tmp_path):
    backend = ScriptedBackend(installs={"dev-a": RuntimeError("a bug")})
    execute.run_cell(backend, make_cell("dev-a"), gpu=GPU, logs_dir=tmp_path)
    assert "Traceback" in (tmp_path / "dev-a.log").read_text()


def test_a_probe_timeout_is_an_infrastructure_failure(tmp_path):
    hang = CommandFailed(["python", "stale_replay.py"], -1, "", timed_out=True)
    backend = ScriptedBackend(probes={"dev-a": hang})
    run = execute.run_cell(backend, make_cell("dev-a", timeout=5), gpu=GPU, logs_dir=tmp_path)
    assert run.status is RunStatus.INFRA_FAILURE
    assert run.reason.startswith("probe: timed out after 5 s")
    assert run.seconds_install == backend.install_s
    assert backend.released == ["dev-a"]  # released even so


def test_the_log_holds_the_latest_run_only(tmp_path):
    backend = ScriptedBackend(installs={"dev-a": InfraError("first failure")})
    execute.run_cell(backend, make_cell("dev-a"), gpu=GPU, logs_dir=tmp_path)
    backend.installs.clear()
    execute.run_cell(backend, make_cell("dev-a"), gpu=GPU, logs_dir=tmp_path)
    assert "first failure" not in (tmp_path / "dev-a.log").read_text()


def test_probe_args_carry_the_cells_cases_and_trials():
    cell = make_cell(cases=("capture_data_ptr", "side_stream"), trials=7)
    assert execute.probe_args(cell) == ["--cases", "capture_data_ptr,side_stream", "--trials", "7"]
    assert execute.probe_args(make_cell()) == []


def test_a_script_run_by_the_adapter_is_given_the_cells_timeout():
    """The adapter stops a hanging script in time to write `timeout`; a document probe keeps its
    own per-case timeouts (its --timeout means those)."""
    script = make_cell(probe="script:0123456789ab", timeout=20)
    assert execute.probe_args(script) == ["--timeout", "20"]
    exit_status = make_cell(probe="cumsum_64bit", timeout=600)
    assert execute.probe_args(exit_status) == ["--timeout", "600"]
    assert execute.probe_args(make_cell(probe="stale_replay", timeout=20)) == []


def test_a_configuration_mistake_is_not_stored_as_infrastructure(tmp_path):
    from torchbisect.errors import ConfigError

    backend = ScriptedBackend(installs={"dev-a": ConfigError("name an image under `images:`")})
    with pytest.raises(ConfigError):
        execute.run_cell(backend, make_cell("dev-a"), gpu=GPU, logs_dir=tmp_path)
