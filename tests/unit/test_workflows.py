"""The GitHub workflows: valid per actionlint, the job graph the issue asks for, and no logic of
their own beyond calling nox sessions."""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml
from helpers import REPO
from helpers.cli import invoke

from torchbisect.exits import Exit

WORKFLOWS = REPO / ".github" / "workflows"
ACTIONS = REPO / ".github" / "actions"


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
    # `-shellcheck=`: the same answer whether or not shellcheck happens to be on PATH (actionlint
    # runs it when it finds it); the run: lines are one nox call each, checked below.
    proc = subprocess.run([exe, "-shellcheck=", *files], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_actionlint_catches_a_broken_workflow(tmp_path):
    """Guards the test above against a linter that accepts anything."""
    bad = tmp_path / ".github" / "workflows" / "bad.yml"
    bad.parent.mkdir(parents=True)
    bad.write_text(
        "on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n"
        "    steps:\n      - run: echo ${{ nope.value }}\n"
    )
    proc = subprocess.run(
        [shutil.which("actionlint") or "actionlint", "-shellcheck=", str(bad)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1
    assert "undefined variable" in proc.stdout


def test_matrix_workflow_graph_is_plan_then_shards_then_build_then_deploy():
    doc = _load("matrix.yml")
    assert "schedule" in doc["on"] and "workflow_dispatch" in doc["on"]
    assert set(doc["on"]["workflow_dispatch"]["inputs"]) == {"matrix", "runners", "force"}
    jobs = doc["jobs"]
    assert set(jobs) == {"plan", "probe", "build", "deploy", "notify"}
    assert jobs["probe"]["needs"] == "plan"
    assert set(jobs["build"]["needs"]) == {"plan", "probe"}
    # a failed shard still publishes; a cancelled run does not
    assert "!cancelled()" in jobs["build"]["if"] and "always()" not in jobs["build"]["if"]
    assert jobs["deploy"]["needs"] == "build"
    strategy = jobs["probe"]["strategy"]
    assert strategy["fail-fast"] is False
    # one job per shard of each kind, on that kind's labels (runners.yaml, no variable)
    assert strategy["matrix"] == {"include": "${{ fromJSON(needs.plan.outputs.probes) }}"}
    assert jobs["probe"]["runs-on"] == "${{ matrix.labels }}"
    assert jobs["probe"]["if"] == "${{ needs.plan.outputs.probes != '[]' }}"  # no kind, no job
    # plan reads platform and driver from runners.yaml, not from the machine: no GPU needed
    assert jobs["plan"]["runs-on"] == "ubuntu-latest"
    assert "GPU_RUNNER_LABELS" not in (WORKFLOWS / "matrix.yml").read_text()
    assert "GPU_RUNNER_LABELS" not in (WORKFLOWS / "bisect.yml").read_text()


def test_each_kind_is_planned_locked_probed_and_published_with_its_own_lock():
    jobs = _load("matrix.yml")["jobs"]
    runs = {j: [s.get("run", "") for s in job["steps"]] for j, job in jobs.items()}
    plan = next(r for r in runs["plan"] if r.startswith("nox -s plan -- --matrix"))
    assert (
        '--runners "$RUNNERS_FILE" --lock-dir locks --previous-lock-dir previous/locks --hash'
    ) in plan and '--github-output "$GITHUB_OUTPUT"' in plan
    assert jobs["plan"]["outputs"]["probes"] == "${{ steps.plan.outputs.probes }}"
    # the previous locks of the declared kinds, named before the plan runs
    kinds = next(s for s in jobs["plan"]["steps"] if s.get("id") == "kinds")
    assert "--kinds-only" in kinds["run"]
    [fetch] = [
        s for s in jobs["plan"]["steps"] if s.get("uses") == "./.github/actions/previous-site"
    ]
    assert fetch["with"]["kinds"] == "${{ steps.kinds.outputs.kinds }}"
    probe = next(r for r in runs["probe"] if r.startswith("nox -s matrix"))
    assert '--runners "$RUNNERS_FILE" --kind "$KIND" --lock-dir locks --offline' in probe
    assert jobs["probe"]["env"]["KIND"] == "${{ matrix.kind }}"
    assert any("store-shard-${KIND}-${SHARD%%/*}" in r for r in runs["probe"])
    upload = next(
        s for s in jobs["plan"]["steps"] if s.get("uses", "").startswith("actions/upload-artifact@")
    )
    assert "locks/" in upload["with"]["path"]
    assert "cp -r locks site/data/" in runs["build"]  # data/locks/<kind>.lock.json
    assert any(
        r.startswith("nox -s report") and '--runners "$RUNNERS_FILE"' in r for r in runs["build"]
    )


def test_a_bisection_runs_on_one_declared_kind():
    doc = _load("bisect.yml")
    assert "kind" in doc["on"]["workflow_dispatch"]["inputs"]
    jobs = doc["jobs"]
    assert jobs["kind"]["runs-on"] == "ubuntu-latest"
    [kinds] = [s["run"] for s in jobs["kind"]["steps"] if "nox -s plan" in s.get("run", "")]
    assert '--kinds-only --kind="$KIND"' in kinds
    assert jobs["bisect"]["runs-on"] == "${{ fromJSON(needs.kind.outputs.labels) }}"
    # the build publishes every kind's lock again, so a bisection's deploy drops none
    [fetch] = [
        s for s in jobs["build"]["steps"] if s.get("uses") == "./.github/actions/previous-site"
    ]
    assert fetch["with"]["kinds"] == "${{ needs.kind.outputs.kinds }}"
    assert "cp -r previous/locks site/data/" in [s.get("run") for s in jobs["build"]["steps"]]
    assert "needs.kind.result == 'success'" in jobs["build"]["if"]


@pytest.mark.parametrize("name", ["matrix.yml", "bisect.yml"])
def test_only_the_deploy_job_holds_pages_write_and_runs_nothing_but_the_pages_actions(name):
    jobs = _load(name)["jobs"]
    holders = [
        j for j, job in jobs.items() if {"pages", "id-token"} & set(job.get("permissions", {}))
    ]
    assert holders == ["deploy"]
    deploy = jobs["deploy"]
    assert deploy["permissions"] == {"contents": "read", "pages": "write", "id-token": "write"}
    assert deploy["environment"]["name"] == "github-pages"
    # no `run:` of its own and no project code: the site check is a curl in a composite action
    assert [s["uses"].split("@")[0] for s in deploy["steps"]] == [
        "actions/checkout",
        "./.github/actions/site-unchanged",
        "actions/configure-pages",
        "actions/deploy-pages",
    ]
    assert deploy["steps"][0]["with"] == {
        "persist-credentials": False,
        "sparse-checkout": ".github/actions",
    }
    assert _load(name)["permissions"] == {}  # nothing by default; each job asks for its own


@pytest.mark.parametrize("name", ["matrix.yml", "bisect.yml"])
def test_the_published_site_carries_the_store_chain(name):
    """The next run starts from what was last deployed, whatever the last run's conclusion."""
    build = _load(name)["jobs"]["build"]
    uses = [s.get("uses", "") for s in build["steps"]]
    runs = [s.get("run", "") for s in build["steps"]]
    fetch = uses.index("./.github/actions/previous-site")
    merge = next(i for i, r in enumerate(runs) if r.startswith("nox -s merge -- site/data/"))
    pages = next(i for i, u in enumerate(uses) if u.startswith("actions/upload-pages-artifact@"))
    assert fetch < merge < pages
    assert "dawidd6" not in (WORKFLOWS / name).read_text()


def _workflow_and_action_files() -> list[Path]:
    return [*sorted(WORKFLOWS.glob("*.yml")), *sorted(ACTIONS.glob("*/action.yml"))]


def test_every_uses_is_a_local_action_or_a_full_sha_with_its_tag():
    pinned = re.compile(r"^[\w.-]+/[\w.-]+@[0-9a-f]{40} # v\d+\.\d+\.\d+$")
    seen = 0
    for path in _workflow_and_action_files():
        for line in path.read_text().splitlines():
            match = re.search(r"uses: (.*)$", line)
            if match and not match.group(1).startswith("./"):
                seen += 1
                assert pinned.match(match.group(1)), f"{path.name}: {line.strip()}"
    assert seen >= 10


def test_pins_are_the_real_commits_of_their_tags():
    pins_md = REPO / ".." / "shared" / "actions" / "PINS.md"
    if not pins_md.is_file():
        pytest.skip(f"{pins_md} is absent (CI has ../shared beside the clone)")
    known = set(re.findall(r"\| (\S+) \| (v[\d.]+) \| ([0-9a-f]{40}) \|", pins_md.read_text()))
    for path in _workflow_and_action_files():
        for action, sha, tag in re.findall(
            r"uses: ([\w.-]+/[\w.-]+)@([0-9a-f]{40}) # (\S+)", path.read_text()
        ):
            assert (action, tag, sha) in known, f"{path.name}: {action}@{sha} is not {tag}"


def test_dependabot_keeps_the_action_pins_current():
    config = yaml.safe_load((WORKFLOWS.parent / "dependabot.yml").read_text())
    update, tools = config["updates"]
    assert update["package-ecosystem"] == "github-actions"
    assert "/" in update["directories"] and "/.github/actions/*" in update["directories"]
    # and the tools' pins: a pip requirements file that setup-tools installs
    assert tools["package-ecosystem"] == "pip"
    requirements = REPO / tools["directory"].lstrip("/") / "requirements.txt"
    pins = [
        line for line in requirements.read_text().splitlines() if line and not line.startswith("#")
    ]
    assert {p.split("==")[0] for p in pins} == {"nox", "uv"}
    assert all(re.fullmatch(r"[a-z]+==[\d.]+", p) for p in pins), pins
    setup = (ACTIONS / "setup-tools" / "action.yml").read_text()
    assert '"$GITHUB_ACTION_PATH/requirements.txt"' in setup  # handed to tools.py's pip -r


@pytest.mark.parametrize("name", ["matrix.yml", "tests.yml", "bisect.yml"])
def test_jobs_are_bounded_and_checkouts_keep_no_credentials(name):
    doc = _load(name)
    for job_name, job in doc["jobs"].items():
        assert "timeout-minutes" in job, f"{name}:{job_name} has no timeout"
        for step in job.get("steps", []):
            if step.get("uses", "").startswith("actions/checkout@"):
                assert step["with"]["persist-credentials"] is False, f"{name}:{job_name}"
            # expressions go through env:, never spliced into a shell script
            assert "${{" not in step.get("run", ""), f"{name}:{job_name}: {step['run']}"


@pytest.mark.parametrize("name", ["matrix.yml", "bisect.yml"])
def test_gpu_jobs_get_their_tools_without_touching_the_system_python(name):
    """A stock runner's python3 is externally managed (PEP 668): tools come from setup-tools."""
    for job_name, job in _load(name)["jobs"].items():
        steps = job.get("steps", [])
        uses = [s.get("uses", "") for s in steps]
        nox_at = [i for i, s in enumerate(steps) if s.get("run", "").startswith("nox ")]
        if nox_at:
            assert uses.index("./.github/actions/setup-tools") < nox_at[0], job_name
            assert steps[-1]["run"] == "uv cache prune --ci" and steps[-1]["if"] == "always()"
        assert not any("pip install" in s.get("run", "") for s in steps), job_name
    setup = (ACTIONS / "setup-tools" / "action.yml").read_text()
    assert 'python3 "$GITHUB_ACTION_PATH/tools.py" "$GITHUB_ACTION_PATH/requirements.txt"' in setup


def test_zizmor_finds_no_high_severity_problem():
    exe = shutil.which("zizmor")
    if exe is None:
        pytest.fail("zizmor is not installed: pip install -e '.[test]'")
    proc = subprocess.run(
        [exe, "--offline", "--min-severity", "high", str(WORKFLOWS.parent)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_zizmor_catches_a_tag_pinned_action_and_template_injection(tmp_path):
    """Guards the test above against a checker that accepts anything."""
    bad = tmp_path / ".github" / "workflows" / "bad.yml"
    bad.parent.mkdir(parents=True)
    bad.write_text(
        "on: issues\npermissions: {}\njobs:\n  a:\n    runs-on: ubuntu-latest\n"
        "    steps:\n      - uses: actions/checkout@v4\n"
        "      - run: echo ${{ github.event.issue.title }}\n"
    )
    proc = subprocess.run(
        [
            shutil.which("zizmor") or "zizmor",
            "--offline",
            "--min-severity",
            "high",
            str(bad.parent.parent),
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode != 0
    assert "template-injection" in proc.stdout and "unpinned-uses" in proc.stdout


@pytest.mark.parametrize("name", ["matrix.yml", "tests.yml", "bisect.yml"])
def test_every_run_step_is_a_nox_session_or_an_install(name):
    allowed = re.compile(
        r"^(nox -s \w+|pip (install|download) |uv cache prune --ci$"
        r'|echo "\w+=[^"]*" >> "\$GITHUB_OUTPUT"$'
        r"|cp (-r )?\S+ \S+$|nvidia-smi -L$|sudo (apt-get|bash \.ci/)"
        r"|sudo --preserve-env=\S+ nox -s "
        r"|sudo --preserve-env=\S+ \.ci/run( \w+)*$)"
    )
    for job, run in _run_steps(_load(name)):
        for line in run.strip().splitlines():
            assert allowed.match(line.strip()), f"{name}:{job}: logic in a workflow: {line}"


def test_bisect_workflow_posts_markdown_to_job_summary():
    doc = _load("bisect.yml")
    assert "schedule" in doc["on"]
    assert {"good", "bad"} <= set(doc["on"]["workflow_dispatch"]["inputs"])
    runs = [run for _, run in _run_steps(doc)]
    assert any("nox -s bisect" in r and "$GITHUB_STEP_SUMMARY" in r for r in runs)


@pytest.mark.slow  # over 2 s on a 2-core machine: out of the fast loop
@pytest.mark.parametrize("name", ["matrix.yml", "bisect.yml"])
def test_every_flag_a_workflow_passes_exists_in_its_session(name):
    """The workflows and the CLI must not drift apart: each --flag is in the command's --help."""
    for _job, run in _run_steps(_load(name)):
        match = re.match(r"nox -s (\w+) -- (.*)", run.strip())
        if not match:
            continue
        session, args = match.groups()
        helped = invoke(session, "--help")
        assert helped.returncode == Exit.OK, helped.stderr
        help_text = helped.stdout
        for flag in re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", args):
            assert flag in help_text, f"{name}: `{session}` has no {flag}"


def test_plan_never_lists_more_shards_than_cells(tmp_path):
    """`--shards 2` with one cell: one GPU job, not a second one with nothing to probe."""
    (tmp_path / "m.yaml").write_text("preinstalled: true\n")
    out = tmp_path / "github_output"
    done = invoke(
        "plan",
        "--matrix",
        "m.yaml",
        "--lock",
        "m.lock.json",
        "--shards",
        "2",
        "--github-output",
        out,
        "--store",
        "none.sqlite",
        cwd=tmp_path,
    )
    assert done.returncode == Exit.OK, done.stderr
    assert out.read_text().splitlines() == ['shards=["1/1"]', "cells=1"]


def test_tests_workflow_cancels_only_itself():
    assert _load("tests.yml")["concurrency"]


@pytest.mark.parametrize("name", ["matrix.yml", "bisect.yml"])
def test_only_the_writers_wait_their_turn_so_a_dispatch_never_cancels_a_scheduled_run(name):
    """The jobs that write something shared (the site: deploy; the status issue: notify) take
    turns across both workflows; no other job waits, so a queued run never cancels one that
    is probing."""
    doc = _load(name)
    assert "concurrency" not in doc
    holders = {j for j, job in doc["jobs"].items() if "concurrency" in job}
    assert holders == {"deploy", "notify"}
    for job in holders:
        assert doc["jobs"][job]["concurrency"]["cancel-in-progress"] is False
        # every waiting job keeps its place: without `queue: max` a third run's deploy would
        # cancel the one pending, and that run's results would never be published
        assert doc["jobs"][job]["concurrency"]["queue"] == "max"
        assert (
            _load("matrix.yml")["jobs"][job]["concurrency"]["group"]
            == _load("bisect.yml")["jobs"][job]["concurrency"]["group"]
        )


@pytest.mark.parametrize("name", ["matrix.yml", "bisect.yml", "tests.yml"])
def test_issues_write_is_held_by_exactly_the_jobs_that_notify(name):
    """`notify` without `issues: write` gets a 403 that only a real run would show."""
    for job_name, job in _load(name)["jobs"].items():
        notifies = any(s.get("run", "").startswith("nox -s notify") for s in job.get("steps", []))
        holds = job.get("permissions", {}).get("issues") == "write"
        assert notifies == holds, f"{name}:{job_name}: notifies={notifies}, issues: write={holds}"


@pytest.mark.parametrize("name", ["matrix.yml", "bisect.yml"])
def test_notify_tells_what_was_deployed_and_never_holds_deploy_back(name):
    jobs = _load(name)["jobs"]
    # after the deploy (the issue tells what the page shows), which never waits for notify
    assert jobs["notify"]["needs"] == ["build", "deploy"] and jobs["deploy"]["needs"] == "build"
    assert "!cancelled()" in jobs["notify"]["if"]
    assert "needs.deploy.result == 'success'" in jobs["notify"]["if"]
    # the page is uploaded in build, before notify can start
    assert any(
        s.get("uses", "").startswith("actions/upload-pages-artifact@")
        for s in jobs["build"]["steps"]
    )
    assert not any("notify" in s.get("run", "") for s in jobs["build"]["steps"])


@pytest.mark.parametrize("name", ["matrix.yml", "bisect.yml"])
def test_a_rerun_overwrites_its_uploads_and_the_merged_store_is_kept(name):
    jobs = _load(name)["jobs"]
    uploads = [
        s
        for job in jobs.values()
        for s in job.get("steps", [])
        if s.get("uses", "").startswith("actions/upload-artifact@")
    ]
    assert uploads and all(s["with"]["overwrite"] is True for s in uploads)
    kept = [s for s in uploads if s["with"]["name"] == "merged-store"]
    assert kept and "site/data/results.sqlite" in kept[0]["with"]["path"]
    [pages] = [
        s
        for s in jobs["build"]["steps"]
        if s.get("uses", "").startswith("actions/upload-pages-artifact@")
    ]
    [*_, deploy] = jobs["deploy"]["steps"]
    # upload-pages-artifact has no `overwrite`: one name per attempt, the same one deployed
    assert "github.run_attempt" in pages["with"]["name"]
    assert deploy["with"]["artifact_name"] == pages["with"]["name"]


def test_every_previous_site_fetch_passes_the_first_run_variable():
    for name in ("matrix.yml", "bisect.yml"):
        for job in _load(name)["jobs"].values():
            for step in job.get("steps", []):
                if step.get("uses") == "./.github/actions/previous-site":
                    assert step["with"]["first-run"] == "${{ vars.PAGES_FIRST_RUN }}", name


@pytest.mark.parametrize("name", ["matrix.yml", "bisect.yml"])
def test_gpu_jobs_preflight_the_driver_and_ask_for_a_gpu(name):
    for job_name, job in _load(name)["jobs"].items():
        runs = [s.get("run", "") for s in job.get("steps", [])]
        probes = [r for r in runs if r.startswith(("nox -s matrix", "nox -s bisect"))]
        if not probes:
            continue
        before = runs[: runs.index(probes[0])]
        assert "nvidia-smi -L" in before, job_name
        assert all("--require-gpu" in r for r in probes), job_name
        # then the backend's own check (docker: a container given the GPUs), skipped alike
        [smi] = [s for s in job["steps"] if s.get("run") == "nvidia-smi -L"]
        [check] = [s for s in job["steps"] if s.get("run", "").startswith("nox -s preflight")]
        assert runs.index(smi["run"]) < runs.index(check["run"]) < runs.index(probes[0])
        assert check["if"] == smi["if"] and '--flags="$EXTRA_FLAGS"' in check["run"], job_name


STORE = b"SQLite format 3\0"  # what the stand-in site publishes as data/results.sqlite


@contextmanager
def _site(
    statuses: dict[str, int], bodies: dict[str, bytes] | None = None
) -> Iterator[tuple[str, list]]:
    """An HTTP server on 127.0.0.1 (tests/helpers/loopback.py) that answers each path under
    /data/ with its status in `statuses` (the "" entry: every other path) and, for a 200, its
    body in `bodies` (default STORE); yields its URL and the requests it gets, as they come."""
    from helpers.loopback import Peer

    def answer(seen):
        path = seen.target.split("?", 1)[0].removeprefix("/data/")
        status = statuses.get(path, statuses[""])
        body = (bodies or {}).get(path, STORE) if status == 200 else b"no"
        # a 302 leads to a page that does not exist either: 302 then 503
        return status, {"Location": "/login"} if status == 302 else {}, body

    with Peer(answer) as peer:
        yield f"{peer.url}/", peer.seen
    # each request its own query string: no CDN cache answers with a store older than the site's
    # (what a redirect leads to is the server's URL, not ours)
    paths = [seen.target for seen in peer.seen if seen.target.startswith("/data/")]
    assert all(re.search(r"\?fresh=\d+$", path) for path in paths), paths
    # (curl's retries of one fetch repeat its URL; each file fetched has a query of its own)
    assert len(set(paths)) == len({path.split("?", 1)[0] for path in paths})


def _composite(
    tmp_path: Path, action: str, env: dict[str, str]
) -> tuple[subprocess.CompletedProcess, dict[str, str]]:
    """Run a composite action's one step, its own bash, as the runner would; returns the run and
    what it wrote to $GITHUB_OUTPUT."""
    [step] = yaml.safe_load((ACTIONS / action / "action.yml").read_text())["runs"]["steps"]
    output = tmp_path / "github_output"
    output.touch()
    env = {
        "PATH": "/usr/bin:/bin",
        "GITHUB_OUTPUT": str(output),
        "GITHUB_REPOSITORY": "o/r",
        "GITHUB_REPOSITORY_OWNER": "o",
        **env,
    }
    done = subprocess.run(
        ["bash", "-e", "-c", step["run"]],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done, dict(line.split("=", 1) for line in output.read_text().splitlines())


def _previous_site(
    tmp_path: Path,
    statuses: dict[str, int],
    *,
    first_run: str = "",
    kinds: str = "",
    bodies: dict[str, bytes] | None = None,
) -> tuple[subprocess.CompletedProcess, dict[str, str]]:
    """previous-site against a site answering `statuses` (as `_site` reads them)."""
    with _site(statuses, bodies) as (url, _):
        return _composite(
            tmp_path,
            "previous-site",
            {
                "DEST": str(tmp_path / "previous"),
                "PAGES_URL": url,
                "FIRST_RUN": first_run,
                "KINDS": kinds,
            },
        )


@pytest.mark.slow  # curl's own retries of a 503 wait about 7 s
@pytest.mark.parametrize(
    "status, first_run, exit_code, published",
    [
        (200, "", 0, "true"),
        (404, "true", 0, "false"),
        (404, "", 1, None),
        (503, "true", 1, None),
        (302, "true", 1, None),
    ],
)
def test_the_previous_site_script_against_a_real_server(
    tmp_path, status, first_run, exit_code, published
):
    """Only 200 goes on with a store, and only 404 with PAGES_FIRST_RUN=true goes on without."""
    done, said = _previous_site(tmp_path, {"": status}, first_run=first_run)
    assert done.returncode == exit_code, done.stdout + done.stderr
    assert said.get("published") == published
    # the store merged from, for deploy's check: its sha256, or "none" before the first deploy
    assert (
        said.get("store-sha256")
        == {"true": hashlib.sha256(STORE).hexdigest(), "false": "none", None: None}[published]
    )
    if exit_code:
        assert "::error::" in done.stdout
        assert ("PAGES_FIRST_RUN" if status == 404 else f"HTTP {status}") in done.stdout
        assert not (tmp_path / "previous" / "results.sqlite").exists()


@pytest.mark.slow  # curl's own retries of a 503 wait about 7 s
@pytest.mark.parametrize("status, exit_code", [(404, 0), (503, 1)])
def test_a_kinds_lock_that_is_not_published_is_its_first_run_and_nothing_else(
    tmp_path, status, exit_code
):
    """Each declared kind's lock is fetched beside the store: a 404 for one is that kind's first
    run (a notice, the others are kept), any other failure fails the step as for the store."""
    done, said = _previous_site(
        tmp_path, {"": 200, "locks/GB300.lock.json": status}, kinds="H200 GB300"
    )
    assert done.returncode == exit_code, done.stdout + done.stderr
    previous = tmp_path / "previous"
    assert (previous / "locks" / "H200.lock.json").is_file()
    assert not (previous / "locks" / "GB300.lock.json").exists()
    if exit_code:
        assert (
            "::error::could not fetch" in done.stdout
            and "locks/GB300.lock.json (HTTP 503)" in done.stdout
        )
    else:
        assert said["published"] == "true"
        assert "::notice::no locks/GB300.lock.json published" in done.stdout
        assert "first run of that kind" in done.stdout


@pytest.mark.parametrize("name", ["matrix.yml", "bisect.yml"])
def test_deploy_is_given_the_store_its_build_merged_from(name):
    """build says which store it fetched (previous-site's sha256), and deploy's site check is
    given exactly that, before anything touches Pages."""
    jobs = _load(name)["jobs"]
    [fetch] = [
        s for s in jobs["build"]["steps"] if s.get("uses") == "./.github/actions/previous-site"
    ]
    wired = f"${{{{ steps.{fetch['id']}.outputs.store-sha256 }}}}"
    assert jobs["build"]["outputs"]["base"] == wired
    [check] = [
        s for s in jobs["deploy"]["steps"] if s.get("uses") == "./.github/actions/site-unchanged"
    ]
    assert check["with"] == {
        "expected": "${{ needs.build.outputs.base }}",
        "pages-url": "${{ vars.PAGES_URL }}",
    }
    uses = [s["uses"] for s in jobs["deploy"]["steps"]]
    assert uses.index("./.github/actions/site-unchanged") < min(
        i
        for i, u in enumerate(uses)
        if u.startswith(("actions/configure-pages@", "actions/deploy-pages@"))
    )


def _site_unchanged(
    tmp_path: Path, expected: str, status: int, published: bytes = STORE
) -> subprocess.CompletedProcess:
    with _site({"": status}, {"results.sqlite": published}) as (url, asked):
        done, _ = _composite(tmp_path, "site-unchanged", {"EXPECTED": expected, "PAGES_URL": url})
    assert all(seen.target.startswith("/data/results.sqlite?") for seen in asked)
    return done


def test_deploy_goes_on_while_the_site_has_the_store_its_build_merged_from(tmp_path):
    done = _site_unchanged(tmp_path, hashlib.sha256(STORE).hexdigest(), 200)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "still publishes the store this run merged from" in done.stdout
    # before the first deploy: nothing was fetched, nothing is published yet
    done = _site_unchanged(tmp_path, "none", 404)
    assert done.returncode == 0 and "still publishes no store" in done.stdout


@pytest.mark.parametrize(
    "expected, status, published",
    [
        # another run deployed after this build fetched the store: its results would be dropped
        (hashlib.sha256(STORE).hexdigest(), 200, STORE + b"another run's results"),
        # two first runs: the other one deployed first
        ("none", 200, STORE),
        # the store this build merged from is gone from the site
        (hashlib.sha256(STORE).hexdigest(), 404, b""),
    ],
)
def test_a_deploy_after_another_runs_deploy_stops_and_says_how_to_repair(
    tmp_path, expected, status, published
):
    done = _site_unchanged(tmp_path, expected, status, published)
    assert done.returncode == 1
    [error] = [line for line in done.stdout.splitlines() if line.startswith("::error::")]
    assert "another run deployed after this run's build fetched the store" in error
    assert f"it merged sha256 {expected}" in error and "nothing is deployed" in error
    assert "Re-run this run's build job" in error


@pytest.mark.slow  # curl's own retries of a 503 wait about 7 s
def test_a_site_that_cannot_be_read_stops_the_deploy(tmp_path):
    done = _site_unchanged(tmp_path, hashlib.sha256(STORE).hexdigest(), 503)
    assert done.returncode == 1
    assert "::error::could not fetch" in done.stdout and "(HTTP 503)" in done.stdout


def test_a_build_that_named_no_store_never_deploys(tmp_path):
    """A wiring mistake (an output renamed, say) must not read as "nothing changed"."""
    done = _site_unchanged(tmp_path, "", 200)
    assert done.returncode == 1 and "named no store it merged from" in done.stdout


@pytest.mark.parametrize("name", ["matrix.yml", "bisect.yml"])
def test_the_rehearsal_runs_the_committed_workflow_less_one_line_act_cannot_read(name):
    from act.rehearsal import for_act

    text = (WORKFLOWS / name).read_text()
    lines, seen = text.splitlines(), for_act(text).splitlines()
    queues = [line for line in lines if line.strip() == "queue: max"]
    assert len(lines) - len(seen) == len(queues) == 2  # deploy's and notify's
    assert [line.strip() for line in set(lines) - set(seen)] == ["queue: max"]


def test_a_200_that_is_not_a_result_store_fails_the_fetch(tmp_path):
    """A redirect to a login page ends in a 200 that curl follows: its HTML must never be taken
    for the store (the merge would stop on it later, or worse)."""
    done, said = _previous_site(
        tmp_path, {"": 200}, bodies={"results.sqlite": b"<html>Sign in</html>"}
    )
    assert done.returncode == 1
    assert "is not a result store" in done.stdout and "::error::" in done.stdout
    assert "published" not in said
    assert not (tmp_path / "previous" / "results.sqlite").exists()


def test_the_plan_leaves_out_kinds_with_no_runner_online_when_it_may_list_runners():
    """The runner-listing token reaches the one step that uses it, and nothing else."""
    doc = _load("matrix.yml")
    [plan] = [s for s in doc["jobs"]["plan"]["steps"] if s.get("id") == "plan"]
    assert '--online-runners "repos/$GITHUB_REPOSITORY" $ORG_RUNNERS' in plan["run"]
    assert plan["env"]["RUNNERS_TOKEN"] == "${{ secrets.RUNNERS_TOKEN }}"
    text = (WORKFLOWS / "matrix.yml").read_text()
    assert text.count("secrets.RUNNERS_TOKEN") == 1
    assert "RUNNERS_TOKEN" not in (WORKFLOWS / "bisect.yml").read_text()
