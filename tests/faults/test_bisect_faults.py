"""D9, D12: probe-supplied Markdown is neutralized in summary.md and `bisect --markdown`; bisect
refuses a non-positive --timeout, reports a flaky --script, and names a signal as a signal."""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import uuid

import pytest
from helpers import make_cell, probe_doc
from helpers.cli import call, one_sentence, torchbisect
from helpers.nightly_world import bisect_args, cli_args, env
from helpers.runaway import wait_until

from torchbisect.bisect.verdicts import Rule, ScriptAborted, check_script_run
from torchbisect.exits import Exit
from torchbisect.model import CellRun, ProbeResult, RunStatus
from torchbisect.outcome import BisectResult, Direction, NightlyPoint
from torchbisect.report.writers.bisection_text import render_markdown
from torchbisect.store.db import Store
from torchbisect.utils import proc

EVIL = (
    "see [this](https://evil.example/x) ![i](http://evil.example/i.png) "
    "<img src=x onerror=alert(1)> <b>bold</b> @octocat #123 www.evil.example"
)


def _no_live_markdown(text: str) -> None:
    text = re.sub(r"`[^`\n]*`", "", text)  # inside a code span nothing is live
    ours = ("](https://github.com/pytorch", "](stale_replay.py)")  # links the page itself makes
    for link in ours:
        text = text.replace(link, "")
    assert not re.search(r"(?<!\\)\]\(", text), text
    assert "<img" not in text and "<b>" not in text
    assert "@octocat" not in text and "#123" not in text  # a zero-width space sits inside
    assert "https://evil" not in text and "http://evil" not in text
    assert "www.evil" not in text


def test_summary_md_neutralizes_what_probes_wrote(tmp_path):
    doc = probe_doc("affected", {"capture_data_ptr": "affected", "control_clone": "not_affected"})
    doc["cases"]["capture_data_ptr"]["detail"] = EVIL
    doc["env"].update(gpu=EVIL, driver=EVIL, git_version=EVIL)
    with Store(tmp_path / "results.sqlite") as store:
        store.add(
            CellRun(
                cell=make_cell("dev-evil"),
                status=RunStatus.OK,
                result=ProbeResult.from_json(doc),
                wheel_sha256="ab" * 32,
                probe_version="1",
                gpu=EVIL,
                driver=EVIL,
                backend="venv",
                started="2026-11-30T10:00:00",
            )
        )
        store.add(
            CellRun(
                cell=make_cell("dev-infra"),
                status=RunStatus.INFRA_FAILURE,
                reason=f"install: {EVIL}",
                wheel_sha256="cd" * 32,
                probe_version="1",
                gpu=EVIL,
                driver="",
                backend="venv",
                started="2026-11-30T10:00:01",
            )
        )
    assert (
        call("report", "--store", str(tmp_path / "results.sqlite"), "--out", str(tmp_path / "out"))
        == Exit.OK
    )
    summary = (tmp_path / "out" / "summary.md").read_text()
    assert "octocat" in summary and "evil.example" in summary  # still readable
    _no_live_markdown(summary)


def test_bisect_markdown_neutralizes_what_probes_wrote():
    point = NightlyPoint(
        date="2025-08-14",
        version="2.10.0.dev20250814+cpu",
        verdict="bad",
        git_version="`x` " + EVIL,
        main_sha="b) ![i](http://evil.example/p)",
        reason=EVIL,
    )
    result = BisectResult(
        direction=Direction.REGRESSION,
        case="script",
        cuda="cpu",
        python="3.11",
        before=point,
        after=point,
        probes=3,
        compare_url="https://evil.example/compare/a...b) ![x](http://evil.example",
        rule=EVIL,
        reproduce="torchbisect bisect --script 'x`y'",
    )
    text = render_markdown(result)
    _no_live_markdown(text)
    assert "compare URL unavailable" in text  # not a GitHub compare link: not linked
    good = BisectResult(
        **{
            **result.__dict__,
            "compare_url": f"https://github.com/pytorch/pytorch/compare/{'a' * 40}...{'b' * 40}",
        }
    )
    assert "[compare](https://github.com/pytorch/pytorch/compare/" in render_markdown(good)


@pytest.mark.parametrize("value", ["0", "-5", "nan", "inf"])
def test_bisect_timeout_must_be_positive(value, capsys):
    code = call("bisect", "--good", "2025-08-01", "--bad", "2025-08-31", "--timeout", value)
    line = one_sentence(capsys.readouterr().err, code, Exit.MISTAKE, command="bisect")
    assert "--timeout must be a positive number" in line


def test_repeat_is_for_scripts(capsys):
    code = call("bisect", "--good", "2025-08-01", "--bad", "2025-08-31", "--repeat", "3")
    assert "--repeat needs --script" in one_sentence(capsys.readouterr().err, code, Exit.MISTAKE)


def _script_ended(status: int) -> CellRun:
    """A run as probes/script.py records a command that ended with `status` (-9: SIGKILL)."""
    doc = {
        "schema": 1,
        "probe": "script",
        "verdict": "error",
        "cases": {"script": {"verdict": "error", "detail": "", "exit_status": status}},
    }
    return CellRun(cell=make_cell(), status=RunStatus.OK, result=ProbeResult.from_json(doc))


def test_a_script_killed_by_a_signal_is_named_as_such():
    rule = Rule(script="./check.sh")
    with pytest.raises(ScriptAborted, match=r"was killed by signal SIGKILL \(9\)") as caught:
        check_script_run(_script_ended(-9), rule)
    assert "above 127" not in str(caught.value)
    with pytest.raises(ScriptAborted, match="status 130 \\(above 127\\)"):
        check_script_run(_script_ended(130), rule)


# On 2025-08-14 the script answers bad, then good, then bad …: exactly what a flaky check does.
FLAKY = (
    "python -c \"import os, sys, torch; d = torch.__version__.split('dev')[1][:8]; "
    "p = os.environ['TB_COUNTER']; n = int(open(p).read()) if os.path.exists(p) else 0; "
    "open(p, 'w').write(str(n + 1)) if d == '20250814' else None; "
    "sys.exit((n + 1) % 2 if d == '20250814' else int(d >= '20250814'))\""
)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("uv") is None, reason="uv is not installed")
def test_a_flaky_script_is_reported_instead_of_a_confident_range(world, tmp_path):
    base, _, url = world
    done = torchbisect(
        *bisect_args(base, url, tmp_path, "--script", FLAKY, "--repeat", "3"),
        cwd=tmp_path,
        timeout=600,
        env_extra={"TB_COUNTER": str(tmp_path / "counter")},
    )
    assert done.returncode == Exit.FLAKY == 7, done.stdout + done.stderr  # 1 is "affected" only
    last = done.stderr.strip().splitlines()[-1]
    # every verdict is asked again at once, and the asking stops at the first different answer
    assert "--script is flaky" in last and "2025-08-14" in last and "bad 1×, good 1×" in last
    assert "first bad:" not in done.stdout
    # --json says the stop, never a range with the flaky nightly in it
    doc = json.loads((tmp_path / "bisect.json").read_text())
    assert doc["stopped"]["status"] == 7 and "exact" not in doc
    assert "2025-08-14" not in [p["date"] for p in doc["points"]]


@pytest.mark.skipif(shutil.which("uv") is None, reason="uv is not installed")
def test_kill_9_of_bisect_leaves_nothing_running(world, tmp_path):
    base, _, url = world
    started, mark = tmp_path / "started", uuid.uuid4().hex
    hang = (
        f"python -c \"import subprocess, time; subprocess.Popen(['sleep', '300'], "
        f"start_new_session=True); open('{started}', 'w').close(); time.sleep(300)\""
    )
    child = subprocess.Popen(
        cli_args(base, url, tmp_path, "--script", hang),
        env={**env(), "TB_MARK": mark},
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    assert wait_until(started.exists, 120), "the script never started"
    assert len(proc.holders("TB_MARK", mark)) >= 3  # bisect, the script and its daemon
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert wait_until(lambda: not proc.holders("TB_MARK", mark), 60)  # they sleep 300 s


def test_a_bad_flag_is_said_at_once_while_another_run_holds_the_workdir(tmp_path, capsys):
    from torchbisect.utils import runlock

    work = tmp_path / "work"
    with runlock.hold([work], command="torchbisect bisect (another)", say=lambda _: None):
        code = call(
            "bisect",
            "--good",
            "2025-08-01",
            "--bad",
            "2025-08-31",
            "--timeout",
            "0",
            "--workdir",
            work,
            "--store",
            tmp_path / "s.sqlite",
        )
    line = one_sentence(capsys.readouterr().err, code, Exit.MISTAKE, command="bisect")
    assert "--timeout must be a positive number" in line
