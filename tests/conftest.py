"""Markers: Docker and Chromium tests run wherever those exist and are REQUIRED under CI=true.

A developer without Docker sees them skipped with a reason; CI, which installs both in .ci/run,
fails instead of silently skipping.  Fixtures every test file may use: `fake_probes` (the one way a
test chooses its probe scripts), `store` (a real, empty SQLite store), `repo`, `data_dir`.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from helpers import DATA, IN_CI, REPO, TESTS, docker_image_exists
from helpers.nightly_world import nightly_world

# tests/<folder>/ marks its tests with the folder's name
FOLDER_MARKERS = ("unit", "e2e", "faults")
# The two long real-component groups, each kept on one xdist worker (`--dist loadgroup`, as
# `nox -s tests` runs): the act rehearsal is one chain of workflow runs (about 10 minutes), and
# the other Docker tests share the engine's uv cache volume, image tags and container labels, so
# they take turns as in a serial run.  Everything else spreads over the workers beside them.
ACT_MODULE = Path("e2e") / "test_workflows_act.py"
# xdist 3.8 marks a group by renaming the item's nodeid, which pytest 9.2 no longer reads: the
# workers write each grouped test's group here, and the controller's scheduler reads it.
GROUPS_FILE = "TORCHBISECT_XDIST_GROUPS"
# .ci/run starts the suite while .ci/docker-setup.sh still builds the images (the engine already
# answers): it names the file where that script's exit status will be, and its log.
DOCKER_SETUP = "TORCHBISECT_TEST_DOCKER_SETUP"
DOCKER_SETUP_WAIT = 30 * 60  # the images take about two minutes; a setup this late is stuck


def _docker_ok() -> bool:
    try:
        import docker

        docker.from_env(timeout=5).ping()
        return True
    except Exception:
        return False


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _has_gpu() -> bool:
    if not shutil.which("nvidia-smi"):
        return False
    return subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0


def _xdist_group(item) -> str | None:
    if item.path.relative_to(TESTS) == ACT_MODULE:
        return "act"
    if item.get_closest_marker("docker") is not None:
        return "docker"
    return None


def pytest_configure(config):
    # xdist loaded by its entry point is "xdist", by `-p xdist.plugin` (the nox sessions, which
    # turn plugin autoloading off) "xdist.plugin": ask for its option, not its name
    if not hasattr(config, "workerinput") and config.getoption("dist", "no") == "loadgroup":
        fd, path = tempfile.mkstemp(prefix="torchbisect-xdist-groups-", suffix=".json")
        os.close(fd)
        os.environ[GROUPS_FILE] = path  # the workers start after this, with this environment
        config.add_cleanup(lambda: Path(path).unlink(missing_ok=True))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """`--dist loadgroup` whose groups are the ones the workers wrote (see GROUPS_FILE)."""
    if config.getoption("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class FromWorkers(LoadGroupScheduling):
        groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.groups is None:  # read once, when the workers have all collected
                self.groups = json.loads(Path(os.environ[GROUPS_FILE]).read_text() or "{}")
            return self.groups.get(nodeid) or super()._split_scope(nodeid)

    return FromWorkers(config, log)


def _write_groups(config, items) -> None:
    if not hasattr(config, "workerinput") or GROUPS_FILE not in os.environ:
        return
    groups = {item.nodeid: group for item in items if (group := _xdist_group(item))}
    path = Path(os.environ[GROUPS_FILE])
    # every worker collects the same tests: each writes the whole map, whole (renamed into place)
    mine = path.with_name(f"{path.name}.{config.workerinput['workerid']}")
    mine.write_text(json.dumps(groups))
    mine.replace(path)


def pytest_collection_modifyitems(config, items):
    # the longest group first, so that a worker starts it at once and the rest fill the others;
    # then the slow tests, so that the suite ends on short ones rather than waiting on a long one
    # started last (sorted is stable: the order within each rank stays the collection's)
    rank = {"act": 0, "docker": 1}
    items.sort(
        key=lambda item: rank.get(_xdist_group(item), 2 if item.get_closest_marker("slow") else 3)
    )
    _write_groups(config, items)
    checks = {
        "docker": (_docker_ok, "no Docker engine answers (start dockerd)"),
        "chromium": (lambda: _chromium() is not None, "Debian's chromium is not installed"),
    }
    cache: dict[str, bool] = {}
    for item in items:
        # the kind of a test is its folder (as pip's tests do): -m unit, -m e2e
        kind = item.path.relative_to(TESTS).parts[0]
        if kind in FOLDER_MARKERS:
            item.add_marker(kind)
        for name, (probe, why) in checks.items():
            if item.get_closest_marker(name) is None:
                continue
            if name not in cache:
                cache[name] = probe()
            if cache[name]:
                continue
            if not IN_CI:  # under CI the test runs and fails loudly instead
                item.add_marker(pytest.mark.skip(reason=why))
        if item.get_closest_marker("gpu") is not None and not _has_gpu():
            item.add_marker(pytest.mark.skip(reason="no CUDA GPU on this machine"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """A command a test ran that failed (`check=True`) shows what it printed: pytest's report of
    a CalledProcessError gives its exit status only, and a CI log is all there is of that run."""
    report = yield
    failed = call.excinfo is not None and isinstance(
        call.excinfo.value, subprocess.CalledProcessError
    )
    if failed:
        error = call.excinfo.value
        for name in ("stdout", "stderr"):
            text = getattr(error, name)
            if isinstance(text, bytes):
                text = text.decode(errors="replace")
            if text:
                report.sections.append((f"the failed command's {name}", text[-4000:]))
    return report


@pytest.fixture(scope="module", autouse=True)
def _docker_images_built(request):
    """A module with Docker tests waits for .ci/docker-setup.sh's images when .ci/run started
    the suite before they were ready (DOCKER_SETUP): for the images its DOCKER_IMAGES names
    (the act rehearsal needs only the base image, made first), else until the script ends.  Its
    tests fail (skip, outside CI) with the script's log when the script failed."""
    status = os.environ.get(DOCKER_SETUP)
    if not status or not any(
        item.path == request.path and item.get_closest_marker("docker")
        for item in request.session.items
    ):
        return
    needs = getattr(request.module, "DOCKER_IMAGES", ())
    deadline = time.monotonic() + DOCKER_SETUP_WAIT
    while not Path(status).is_file():
        if needs and all(docker_image_exists(image) for image in needs):
            return
        if time.monotonic() > deadline:
            pytest.fail(f".ci/docker-setup.sh did not finish within {DOCKER_SETUP_WAIT} s")
        time.sleep(2)
    code = Path(status).read_text().strip()
    if code != "0":
        log = Path(f"{status}.log")
        tail = log.read_text(errors="replace")[-3000:] if log.is_file() else "(no log)"
        (pytest.fail if IN_CI else pytest.skip)(
            f".ci/docker-setup.sh failed (exit {code}); the end of its log:\n{tail}"
        )


@pytest.fixture(autouse=True)
def _compile_volumes_removed(request):
    """A Docker test leaves no compile cache volume behind on the shared engine: those its probes
    made in the default deployment are removed after it (a test with a deployment of its own,
    TORCHBISECT_UV_CACHE_VOLUME, removes its own); one still in use stays."""
    if not request.node.get_closest_marker("docker") or not _docker_ok():
        yield
        return
    import docker

    from torchbisect.backends.container import UV_CACHE_VOLUME
    from torchbisect.backends.docker_compile import COMPILE_LABEL

    client = docker.from_env()
    mine = {"label": f"{COMPILE_LABEL}={UV_CACHE_VOLUME}"}
    before = {v.name for v in client.volumes.list(filters=mine)}
    yield
    for volume in client.volumes.list(filters=mine):
        if volume.name not in before:
            with contextlib.suppress(docker.errors.APIError):
                volume.remove()


@pytest.fixture(autouse=True)
def _not_a_gpu_job(monkeypatch):
    """The suite runs the tool as a developer would, GPU or not: GITHUB_ACTIONS=true (the tests
    workflow) would make every GPU command require a GPU.  Tests of that rule set it again."""
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)


@pytest.fixture
def fake_probes(monkeypatch):
    """The probes of this test come from a folder of the test's choosing: by default the
    stand-in in tests/helpers/probes (TB_FAKE_MODE picks its behaviour).  The fixture's value
    switches to another folder: `fake_probes(folder)`.  What a probe's file says is cached by
    the file's path, size and time (probe/scripts.py), never by its name, so nothing is cleared."""
    from helpers import FAKE_PROBES

    def use(folder: Path = FAKE_PROBES) -> Path:
        monkeypatch.setenv("TORCHBISECT_PROBES", str(folder))
        return folder

    use()
    yield use


@pytest.fixture(autouse=True)
def probes_see_test_knobs(monkeypatch):
    """The stand-in probes are steered by TB_* variables (TB_FAKE_MODE, TB_MARK, …); a probe
    sees only allow-listed variables (backends/probe_env.py), so the tests pass these through
    the documented way, TORCHBISECT_PASS_ENV."""
    monkeypatch.setenv("TORCHBISECT_PASS_ENV", "TB_*")


@pytest.fixture
def store(tmp_path):
    """A real SQLite result store, empty, at `results.sqlite` in the test's folder."""
    from torchbisect.store.db import Store

    with Store(tmp_path / "results.sqlite") as opened:
        yield opened


@pytest.fixture
def repo() -> Path:
    return REPO


@pytest.fixture
def data_dir() -> Path:
    return DATA


@pytest.fixture(autouse=True)
def _own_data_folder(monkeypatch, tmp_path_factory):
    """Outside a project torchbisect keeps its results in the per-user data folder
    (defaults.py): every test gets its own, so none reads or writes the user's."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path_factory.mktemp("xdg-data")))


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """The bisection tests' stand-in nightlies on HTTP and a stand-in pytorch clone, made once per
    test module: (base folder, {date: (nightly sha, main sha)}, index URL)."""
    with nightly_world(tmp_path_factory) as made:
        yield made
