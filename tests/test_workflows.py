"""The GitHub workflows: valid per actionlint, the job graph the issue asks for, and no logic of
their own beyond calling nox sessions."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

WORKFLOWS = Path(__file__).resolve().parent.parent / ".github" / "workflows"


def _load(name: str) -> dict:
    doc = yaml.safe_load((WORKFLOWS / name).read_text())
    # PyYAML reads the bare key `on` as the boolean True.
    doc["on"] = doc.pop(True, doc.get("on"))
    return doc


def _run_steps(doc: dict):
    for job_name, job in doc["jobs"].items():
        for step in job.get("steps", []):
            if "run" in step:
                yield job_name, step["run"]


def test_actionlint_accepts_every_workflow():
    exe = shutil.which("actionlint")
    if exe is None:
        pytest.fail("actionlint is not installed: pip install -e '.[test]'")
    files = sorted(str(p) for p in WORKFLOWS.glob("*.yml"))
    assert len(files) == 3
    proc = subprocess.run([exe, *files], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_actionlint_catches_a_broken_workflow(tmp_path):
    """Guards the test above against a linter that accepts anything."""
    bad = tmp_path / ".github" / "workflows" / "bad.yml"
    bad.parent.mkdir(parents=True)
    bad.write_text("on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n"
                   "    steps:\n      - run: echo ${{ nope.value }}\n")
    proc = subprocess.run([shutil.which("actionlint") or "actionlint", str(bad)],
                          capture_output=True, text=True)
    assert proc.returncode == 1
    assert "undefined variable" in proc.stdout


def test_matrix_workflow_graph_is_plan_then_shards_then_publish():
    doc = _load("matrix.yml")
    assert "schedule" in doc["on"] and "workflow_dispatch" in doc["on"]
    assert set(doc["on"]["workflow_dispatch"]["inputs"]) == {"matrix", "shards", "force"}
    jobs = doc["jobs"]
    assert set(jobs) == {"plan", "probe", "publish"}
    assert jobs["probe"]["needs"] == "plan"
    assert set(jobs["publish"]["needs"]) == {"plan", "probe"}
    assert jobs["publish"]["if"].startswith("always()")
    strategy = jobs["probe"]["strategy"]
    assert strategy["fail-fast"] is False
    assert "needs.plan.outputs.shards" in strategy["matrix"]["shard"]
    assert '"self-hosted", "linux", "x64", "gpu"' in jobs["probe"]["runs-on"]


def test_publish_job_has_pages_permissions_and_environment():
    publish = _load("matrix.yml")["jobs"]["publish"]
    assert publish["permissions"]["pages"] == "write"
    assert publish["permissions"]["id-token"] == "write"
    assert publish["environment"]["name"] == "github-pages"
    uses = [s.get("uses", "") for s in publish["steps"]]
    assert any(u.startswith("actions/upload-pages-artifact@") for u in uses)
    assert any(u.startswith("actions/deploy-pages@") for u in uses)
    # the merged store is kept, and the previous one is fetched before merging
    names = [s.get("with", {}).get("name") for s in publish["steps"]]
    assert "results-store" in names
    runs = [s.get("run", "") for s in publish["steps"]]
    merge_at = next(i for i, run in enumerate(runs) if run.startswith("nox -s merge"))
    assert uses.index("dawidd6/action-download-artifact@v6") < merge_at


@pytest.mark.parametrize("name", ["matrix.yml", "tests.yml", "bisect.yml"])
def test_every_run_step_is_a_nox_session_or_an_install(name):
    allowed = re.compile(r"^(nox -s \w+|(python3 -m )?pip (install|download) "
                         r"|sudo (apt-get|bash \.ci/)|sudo --preserve-env=\S+ nox -s )")
    for job, run in _run_steps(_load(name)):
        for line in run.strip().splitlines():
            assert allowed.match(line.strip()), f"{name}:{job}: logic in a workflow: {line}"


def test_bisect_workflow_posts_markdown_to_job_summary():
    doc = _load("bisect.yml")
    assert "schedule" in doc["on"]
    assert {"good", "bad"} <= set(doc["on"]["workflow_dispatch"]["inputs"])
    runs = [run for _, run in _run_steps(doc)]
    assert any("nox -s bisect" in r and "$GITHUB_STEP_SUMMARY" in r for r in runs)


@pytest.mark.parametrize("name", ["matrix.yml", "bisect.yml"])
def test_every_flag_a_workflow_passes_exists_in_its_session(name):
    """The workflows and the CLI must not drift apart: each --flag is in the command's --help."""
    for _job, run in _run_steps(_load(name)):
        match = re.match(r"nox -s (\w+) -- (.*)", run.strip())
        if not match:
            continue
        session, args = match.groups()
        help_text = subprocess.run([sys.executable, "-m", "torchbisect", session, "--help"],
                                   capture_output=True, text=True, check=True).stdout
        for flag in re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", args):
            assert flag in help_text, f"{name}: `{session}` has no {flag}"
