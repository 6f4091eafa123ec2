"""How often a flaky --script gives a wrong exact answer with exit 0: seeded runs of the real
bisection driver (`Bisector.search`, then `check_repeats`, over a real SQLite store), whose
script answers like a race that shows up on half the runs of a bad build.

Not a test (nothing here asserts): the measurement of issue 32, run against any checkout, so the
same seeds can be replayed on the code before and after a change:

    python tests/flaky_rate.py --src src --seeds 200 --repeat 2
    git worktree add /tmp/before 3efd06d && python tests/flaky_rate.py --src /tmp/before/src

Each seed picks the first bad of 30 nightlies; a good nightly always answers good (exit 0), a bad
one between the ends answers bad (exit 1) with probability --bad-shows (default 0.5) and good
otherwise; --bad, where the user saw the bug, always shows it.  Each run ends "right" (exact, the
true first bad), "wrong" (exact, another nightly: the bug), "flaky" (the driver said so: exit
1), "range" (not exact: exit 8) or "ends" (an end read otherwise: exit 2).
"""

from __future__ import annotations

import argparse
import inspect
import json
import random
import sys
import tempfile
from collections import Counter
from pathlib import Path
from types import SimpleNamespace


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", type=Path, required=True, help="the checkout's src/ folder")
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=2, help="--repeat (2: the default)")
    parser.add_argument("--nightlies", type=int, default=30)
    parser.add_argument("--bad-shows", type=float, default=0.5)
    args = parser.parse_args()
    sys.path.insert(0, str(args.src.resolve()))
    outcomes = Counter(_one(seed, args) for seed in range(args.seeds))
    print(
        json.dumps(
            {
                "src": str(args.src),
                "seeds": args.seeds,
                "repeat": args.repeat,
                "nightlies": args.nightlies,
                "bad_shows": args.bad_shows,
                "outcomes": dict(sorted(outcomes.items())),
                "wrong_exact_rate": outcomes["wrong"] / args.seeds,
            }
        )
    )
    return 0


def _one(seed: int, args: argparse.Namespace) -> str:
    from torchbisect.bisect.candidates import build_candidates
    from torchbisect.bisect.driver import Bisector
    from torchbisect.bisect.search import EndsError
    from torchbisect.bisect.verdicts import FlakyScript, Rule
    from torchbisect.model import Cell, Channel
    from torchbisect.outcome import Direction
    from torchbisect.store.db import Store

    rnd = random.Random(seed)
    days = [f"2025-{8 + i // 28:02d}-{1 + i % 28:02d}" for i in range(args.nightlies)]
    culprit = days[rnd.randrange(1, len(days) - 1)]
    wheels = [
        SimpleNamespace(
            nightly_date=d,
            version=f"2.10.0.dev{d.replace('-', '')}+cpu",
            url=f"http://x/{d}.whl",
            sha256=f"{i:064x}",
        )
        for i, d in enumerate(days)
    ]
    rule = Rule(script="flaky")
    template = Cell(
        id="",
        channel=Channel.NIGHTLY,
        version="",
        cuda="cpu",
        python="3.11",
        cases=(),
        probe=rule.probe_name,
    )
    cands = build_candidates(
        wheels,
        older=days[0],
        newer=days[-1],
        older_flag="--good",
        newer_flag="--bad",
        cell_template=template,
    )
    backend = _flaky_backend(
        lambda day: day == days[-1] or (day >= culprit and rnd.random() < args.bad_shows)
    )
    # ignore_cleanup_errors: a prefetch still writing its log when a flaky answer stops the search
    with (
        tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp,
        Store(Path(tmp) / "s.sqlite") as store,
    ):
        kwargs = dict(
            backend=backend,
            store=store,
            rule=rule,
            direction=Direction.REGRESSION,
            logs=Path(tmp) / "logs",
        )
        if "repeat" in inspect.signature(Bisector).parameters:  # the driver after issue 32
            kwargs["repeat"] = args.repeat
        bisector = Bisector(**kwargs)
        try:
            search = bisector.search(cands)
            bisector.check_repeats(search, args.repeat)
        except FlakyScript:
            return "flaky"
        except EndsError:
            return "ends"
    if not search.exact:
        return "range"
    return "right" if cands.candidates[search.first_bad].date == culprit else "wrong"


def _flaky_backend(shows_bad):
    from torchbisect.backends.base import Backend, Prepared, ProbeOutput

    class Flaky(Backend):
        name = "flaky"

        def check(self):
            pass

        def fingerprint(self, cell):
            return cell.sha256

        def prepare(self, cell, *, log):
            return Prepared(cell=cell, python=sys.executable, wheel_sha256=cell.sha256)

        def probe(self, prepared, *, gpu, probe_args, log):
            bad = shows_bad(prepared.cell.date)
            verdict = "affected" if bad else "not_affected"
            doc = {
                "schema": 1,
                "probe": "script",
                "probe_version": "1",
                "verdict": verdict,
                "cases": {
                    "script": {
                        "verdict": verdict,
                        "detail": f"exit {int(bad)}",
                        "exit_status": int(bad),
                        "seconds": 0.0,
                    }
                },
                "env": {"torch_version": prepared.cell.version, "git_version": ""},
            }
            return ProbeOutput(json_text=json.dumps(doc), exit_code=int(bad), seconds=0.0)

    return Flaky()


if __name__ == "__main__":
    sys.exit(main())
