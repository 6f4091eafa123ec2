"""`torchbisect plan --runners runners.yaml`: every declared runner kind planned for its own
platform and driver, one lock per kind, and the job matrix of the kinds' shards (with
`--online-runners`, only of the kinds GitHub says have a runner online: plan/online.py).

Nothing is read from the machine that plans (no GPU, no driver, no platform): the declaration is
the truth, so the plan job needs no GPU runner.  A kind's lock is `<lock-dir>/<name>.lock.json`,
the file `matrix --runners … --kind NAME` reads by default too (plan/lock.py's `lock_path`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from ..config.runners import Kind, Runners
from ..plan.cost import describe, estimate
from ..plan.lock import lock_path
from ..utils import files
from ..utils.words import count
from .plan_table import plan_one, stored_cells, stored_runs

if TYPE_CHECKING:
    from .plan_options import PlanOptions


def chosen(runners: Runners, name: str | None) -> tuple[Kind, ...]:
    """`--kind NAME` (empty: the first declared), else every kind."""
    if name is None:
        return runners.kinds
    return (runners.kind(name) if name else runners.kinds[0],)


def run_kinds(options: PlanOptions) -> int:
    runners, kinds = options.runners, options.kinds
    assert runners is not None, "run_kinds plans the kinds of --runners"
    if options.kinds_only:
        assert options.github_output is not None  # plan_options requires it
        _write_kinds(options.github_output, runners, kinds[0])
        return 0
    offline: tuple[Kind, ...] = ()
    if options.online_runners:
        from ..plan.online import check

        found = check(kinds, options.online_runners)
        for line in found.said:
            print(f"online runners: {line}")
        offline = found.offline
    probes: list[dict[str, object]] = []
    for kind in kinds:
        shards = _plan_kind(options, kind, runners)  # planned and locked, online or not
        if kind in offline and shards:
            print(f"{kind.name}: {count(len(shards), 'shard')} not queued: no runner online")
            shards = []
        probes += shards
    if options.github_output:
        with options.github_output.open("a", encoding="utf-8") as out:
            out.write(f"probes={json.dumps(probes)}\n")
    return 0


def _plan_kind(options: PlanOptions, kind: Kind, runners: Runners) -> list[dict[str, object]]:
    """Plan one kind, print its table under its name; its shards as job-matrix entries."""
    print(
        f"\n{kind.name}: {kind.gpu}, {kind.platform}, "
        f"driver {kind.driver or 'not declared'} ({runners.path}:{kind.line})"
    )
    if kind.driver is None:
        print(
            f"note: {kind.name} declares no driver, so `cuda: auto` takes the newest CUDA tag "
            f"of each release; add `driver:` (its runners' oldest) at {runners.path}:"
            f"{kind.line} to plan only what they can run"
        )
    previous = None
    if options.previous_lock_dir is not None:
        previous = lock_path(options.matrix, lock_dir=options.previous_lock_dir, kind=kind.name)
        if not previous.is_file():
            print(
                f"note: no previous lock of {kind.name} at {previous}: its first run, so new "
                "pins only"
            )
            previous = None
    lock = lock_path(options.matrix, lock_dir=options.lock_dir, kind=kind.name)
    locked = plan_one(
        options,
        lock=lock,
        previous=previous,
        driver=kind.driver,
        platform=kind.platform,
        host_driver=False,
        kind=kind,
    )
    plan = locked.plan
    stored = stored_cells(options.store, plan, kind=kind)
    cost = estimate(
        plan.cells,
        stored=[c for c, s in stored.items() if s == "yes"],
        lock=locked.lock,
        runs=stored_runs(options.store, kind),
        gpus=kind.shards,
    )
    print(describe(cost))
    if options.json_dir:
        files.write_text(
            options.json_dir / f"{kind.name}.plan.json",
            json.dumps({**plan.to_json(), "cost": cost.to_json()}, indent=2) + "\n",
        )
    if not plan.cells:
        print(f"{kind.name}: no cell to probe, so no runner of this kind is asked for")
        return []
    # never more shards than cells: a GPU runner with nothing to probe is a wasted job
    total = min(kind.shards, len(plan.cells))
    print(f"{kind.name}: {count(total, 'shard')} on {list(kind.labels)}")
    return [
        {"kind": kind.name, "labels": list(kind.labels), "shard": f"{i}/{total}"}
        for i in range(1, total + 1)
    ]


def _write_kinds(output: Path, runners: Runners, kind: Kind) -> None:
    names = " ".join(k.name for k in runners.kinds)
    print(f"kinds: {names}; {kind.name} runs on {list(kind.labels)}")
    with output.open("a", encoding="utf-8") as out:
        out.write(f"kinds={names}\nkind={kind.name}\nlabels={json.dumps(list(kind.labels))}\n")
