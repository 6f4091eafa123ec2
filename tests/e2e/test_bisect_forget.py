"""`bisect --forget DATE|VERSION|COMMIT`: exactly the stored verdicts a bisection would reuse go,
each named; nothing else is touched; nothing matching is one sentence.  A real SQLite store, then
the real command on test_bisect_e2e's stand-in index, where a mistaken verdict is taken back and
asked again without starting over."""

from __future__ import annotations

import json
import sqlite3

import pytest
from helpers import make_cell
from helpers.cli import call, torchbisect
from helpers.nightly_world import SCRIPT, bisect_args

from torchbisect.bisect.forget import Settings, describe, forget
from torchbisect.bisect.verdicts import Rule
from torchbisect.errors import ConfigError
from torchbisect.exits import Exit
from torchbisect.model import CellRun, Channel, ProbeResult, RunStatus
from torchbisect.outcome import BisectResult, Direction, NightlyPoint

RULE = Rule()  # the probe's capture_data_ptr
GPU, DRIVER = "NVIDIA H200", "580.159.04"
SETTINGS = Settings(
    rule=RULE,
    cuda="cu130",
    python="3.12",
    timeout=600.0,
    probe_version="1+a",
    gpu=GPU,
    driver=DRIVER,
)


def nightly(
    day: str,
    *,
    verdict="affected",
    gpu=GPU,
    probe="stale_replay",
    started="T1",
    status=RunStatus.OK,
    git="",
) -> CellRun:
    stamp = day.replace("-", "")
    cell = make_cell(
        f"nightly-{stamp}-cu130-cp312",
        channel=Channel.NIGHTLY,
        version=f"2.10.0.dev{stamp}+cu130",
        cuda="cu130",
        python="3.12",
        date=day,
        probe=probe,
        cases=("capture_data_ptr",),
        timeout=600.0,
    )
    doc = {
        "schema": 1,
        "probe": "stale_replay",
        "verdict": verdict,
        "cases": {"capture_data_ptr": {"verdict": verdict, "detail": "d"}},
        "env": {"git_version": git or f"{stamp}{'0' * 32}"},
    }
    result = ProbeResult.from_json(doc) if status is RunStatus.OK else None
    return CellRun(
        cell=cell,
        status=status,
        result=result,
        wheel_sha256=cell.sha256 or "",
        probe_version="1+a",
        gpu=gpu,
        driver=DRIVER,
        backend="venv",
        started=f"2026-11-29{started}",
        reason="" if result else "install: boom",
    )


@pytest.fixture
def stored(store):
    runs = {
        "mistake": nightly("2025-08-13", started="T10:00"),
        "again": nightly("2025-08-13", started="T11:00"),  # an older row would answer next
        "other gpu": nightly("2025-08-13", gpu="NVIDIA A100"),
        "other probe": nightly("2025-08-13", probe="script:abcdef012345"),
        "no verdict": nightly("2025-08-13", status=RunStatus.INFRA_FAILURE, started="T12:00"),
        "next day": nightly("2025-08-14"),
    }
    ids = {name: store.add(run) for name, run in runs.items()}
    return store, ids


def left(store) -> set[int]:
    return {r.run_id for r in store.runs()}


def test_forget_a_date_drops_exactly_what_would_answer_again(stored):
    store, ids = stored
    gone = forget(store, "2025-08-13", SETTINGS)
    assert sorted(r.run_id for r in gone.runs) == sorted([ids["mistake"], ids["again"]])
    assert left(store) == set(ids.values()) - {ids["mistake"], ids["again"]}
    said = describe(gone.runs[0], RULE)
    assert said == (
        f"row {ids['mistake']}: nightly-20250813-cu130-cp312 "
        "(2.10.0.dev20250813+cu130), bad, probed 2026-11-29T10:00 on NVIDIA H200"
    )


@pytest.mark.parametrize(
    ("what", "message"),
    [
        (
            "2025-08-20",
            "holds no verdict of 2025-08-20 that this bisection would reuse (--cuda "
            "cu130, --python 3.12, --case capture_data_ptr): nothing to forget",
        ),
        ("2.12.0", "holds no verdict of 2.12.0"),
        (
            "not-a-build",
            "--forget 'not-a-build' is neither a date, a nightly or release version, nor "
            "a commit sha (7 to 40 hex digits)",
        ),
    ],
)
def test_nothing_matching_is_one_sentence_and_touches_nothing(stored, what, message):
    store, ids = stored
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        forget(store, what, SETTINGS)
    assert left(store) == set(ids.values())


def test_runs_another_bisection_would_reuse_are_named_but_kept(stored):
    store, ids = stored
    other = Settings(**{**SETTINGS.__dict__, "gpu": "NVIDIA B200"})
    with pytest.raises(ConfigError, match=r"it holds 5 other run\(s\) of it \(another GPU"):
        forget(store, "2025-08-13", other)
    assert left(store) == set(ids.values())


def test_a_commit_is_a_git_version_or_a_main_sha_a_bisection_recorded(stored):
    store, ids = stored
    gone = forget(store, "20250814000", SETTINGS)  # the 08-14 build's git_version, abbreviated
    assert [r.run_id for r in gone.runs] == [ids["next day"]]

    def point(day: str, v: str) -> NightlyPoint:
        return NightlyPoint(
            date=day,
            version=f"2.10.0.dev{day}",
            verdict=v,
            main_sha=("ab" if day.endswith("13") else "cd") * 20,
        )

    store.add_bisection(
        BisectResult(
            direction=Direction.REGRESSION,
            case="capture_data_ptr",
            cuda="cu130",
            python="3.12",
            before=point("2025-08-12", "good"),
            after=point("2025-08-13", "bad"),
            probes=5,
            finished="2026-11-29T12:00:00+00:00",
        )
    )
    gone = forget(store, "abababa", SETTINGS)  # the main-branch sha of the 08-13 nightly
    assert sorted(r.run_id for r in gone.runs) == sorted([ids["mistake"], ids["again"]])
    assert [b.finished for b in gone.bisections] == ["2026-11-29T12:00:00+00:00"]


def release(version: str, cuda: str) -> CellRun:
    """A verdict a `--cuda auto` release walk stored: under its build's own CUDA tag."""
    cell = make_cell(
        f"stable-{version}-{cuda}-cp312",
        channel=Channel.STABLE,
        version=f"{version}+{cuda}",
        cuda=cuda,
        python="3.12",
        probe="stale_replay",
        cases=("capture_data_ptr",),
        timeout=600.0,
    )
    doc = {
        "schema": 1,
        "probe": "stale_replay",
        "verdict": "affected",
        "cases": {"capture_data_ptr": {"verdict": "affected", "detail": "d"}},
        "env": {},
    }
    return CellRun(
        cell=cell,
        status=RunStatus.OK,
        result=ProbeResult.from_json(doc),
        wheel_sha256=cell.sha256 or "",
        probe_version="1+a",
        gpu=GPU,
        driver=DRIVER,
        backend="venv",
        started="2026-11-29T10:00",
        reason="",
    )


def test_forget_under_cuda_auto_drops_the_verdict_of_the_build_the_walk_takes(store):
    """53.5: `--forget 2.9.0 --cuda auto` refused the verdict the same flags had just reused: it
    looked for a run of CUDA `auto`, which no build is.  The walk takes each release's newest
    CUDA tag this driver runs; that build's verdict goes, an older tag's stays."""
    ids = {cuda: store.add(release("2.9.0", cuda)) for cuda in ("cu126", "cu128")}
    kept = store.add(release("2.10.0", "cu128"))
    auto = Settings(**{**SETTINGS.__dict__, "cuda": "auto"})
    gone = forget(store, "2.9.0", auto)
    assert [r.run_id for r in gone.runs] == [ids["cu128"]]
    assert left(store) == {ids["cu126"], kept}
    too_new = Settings(**{**auto.__dict__, "driver": "470.57.02"})  # runs no CUDA 12 build
    with pytest.raises(ConfigError, match="holds no verdict of 2.9.0"):
        forget(store, "2.9.0", too_new)


# -- through the real command -------------------------------------------------------------------


def stored_count(path) -> int:
    with sqlite3.connect(path) as db:
        return db.execute("SELECT COUNT(*) FROM runs").fetchone()[0]


@pytest.mark.slow
def test_a_mistaken_verdict_is_taken_back_and_asked_again(world, tmp_path):
    base, shas, url = world
    mistake = tmp_path / "MISTAKE"
    mistake.touch()  # while it exists, the script wrongly calls 08-13 bad
    script = f'[ "$TORCHBISECT_DATE" = 2025-08-13 ] && [ -e {mistake} ] && exit 1; {SCRIPT}'
    args = bisect_args(base, url, tmp_path, "--script", script)
    first = torchbisect(*args, cwd=tmp_path, timeout=600)
    assert first.returncode == Exit.OK, first.stderr
    assert json.loads((tmp_path / "bisect.json").read_text())["first_bad"]["date"] == "2025-08-13"
    store = tmp_path / "results.sqlite"
    before = stored_count(store)

    mistake.unlink()
    forgets = [*args, "--forget", "2025-08-13"]
    good_bad = forgets.index("--good")
    only = forgets[:good_bad] + forgets[good_bad + 4 :]  # no --good/--bad: forget, then stop
    done = torchbisect(*only, cwd=tmp_path, timeout=600)
    assert done.returncode == Exit.OK, done.stderr
    lines = done.stdout.splitlines()
    # --repeat 2 asked it twice, and once more as an end of the pair: each answer is a run
    assert lines[0] == "forgot 3 stored verdict(s) of 2025-08-13; the next bisection asks again:"
    for line in lines[1:4]:
        assert line.startswith("  row ") and "(2.10.0.dev20250813+cpu), bad, probed" in line
    assert "the stored bisection finished" in lines[4]
    assert "(2025-08-12 → 2025-08-13)" in lines[4]
    assert stored_count(store) == before - 3

    again = torchbisect(*args, cwd=tmp_path, timeout=600)
    assert again.returncode == Exit.OK, again.stderr
    result = json.loads((tmp_path / "bisect.json").read_text())
    assert (result["last_good"]["date"], result["first_bad"]["date"]) == (
        "2025-08-13",
        "2025-08-14",
    )
    # probed now: 08-13 again and 08-14, which the mistake had kept the search from asking,
    # twice each (--repeat 2), and the script re-asked at the pair; the rest came from the
    # store: no start over; each of the 6 runs is stored
    assert stored_count(store) == before - 3 + 6
    assert f"(6 run now, {result['probes'] - 6} from the store)" in again.stdout

    nothing = torchbisect(*only, cwd=tmp_path, timeout=600)
    assert nothing.returncode == Exit.OK  # the new verdict of 08-13 is what it drops now
    wrong = [*only[:-1], "2025-07-01"]
    refused = torchbisect(*wrong, cwd=tmp_path, timeout=600)
    assert refused.returncode == Exit.MISTAKE
    assert refused.stderr.strip().splitlines()[-1].endswith(": nothing to forget")


def test_forget_alone_is_no_gpu_run_and_says_what_it_matched(stored, capsys, monkeypatch):
    """--forget alone probes nothing: --require-gpu does not stop it on a machine without one
    (this one, or any: no GPU is seen here whatever the machine has)."""
    from torchbisect.bisect import run
    from torchbisect.utils import gpus

    store, ids = stored
    monkeypatch.setattr(gpus, "list_gpus", lambda: [])
    monkeypatch.setattr(run, "list_gpus", lambda: [])
    code = call(
        "bisect",
        "--forget",
        "2025-08-13",
        "--store",
        str(store.path),
        "--cuda",
        "cu130",
        "--python",
        "3.12",
        "--require-gpu",
    )
    err = capsys.readouterr().err.strip().splitlines()
    # the rows here were probed on an H200: none answers on this GPU-less machine
    assert code == Exit.MISTAKE and len(err) == 1 and err[0].endswith(": nothing to forget"), err
    assert left(store) == set(ids.values())
