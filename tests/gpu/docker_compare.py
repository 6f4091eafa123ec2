"""Harness: are the verdicts stored by one backend's run those of another's, case for case?

python3 tests/gpu/docker_compare.py VENV_STORE DOCKER_STORE   (prints a table; exit 1 if not)
"""

import sys
from pathlib import Path

from torchbisect.store.db import Store


def latest(path: str) -> dict:
    return {run.cell.id: run for run in Store(Path(path)).latest()}


first, second = latest(sys.argv[1]), latest(sys.argv[2])
same = bool(first) and first.keys() == second.keys()
for cell in sorted(first.keys() | second.keys()):
    a, b = first.get(cell), second.get(cell)
    names = [c.name for c in (a.result.cases if a and a.result else ())]
    names += [c.name for c in (b.result.cases if b and b.result else ()) if c.name not in names]
    if not names:
        same = False
        print(
            f"{cell:24} no verdict: {a and (a.backend, a.reason)} / {b and (b.backend, b.reason)}"
        )
    for name in names:
        va = a.result.case(name) if a and a.result else None
        vb = b.result.case(name) if b and b.result else None
        ok = va is not None and vb is not None and va.verdict == vb.verdict
        same &= ok
        print(
            f"{cell:24} {name:24} {a.backend if a else '-'}={va.verdict.value if va else '-':13} "
            f"{b.backend if b else '-'}={vb.verdict.value if vb else '-':13} "
            f"{'same' if ok else 'DIFFERENT'}  stale {va and va.stale_trials}/{va and va.trials}"
            f" vs {vb and vb.stale_trials}/{vb and vb.trials}"
        )
    for run in (a, b):
        if run and run.result:
            print(
                f"{'':24} {run.backend}: torch {run.result.env.get('torch')} "
                f"({run.result.env.get('git_version', '')[:8]}), {run.gpu}, driver "
                f"{run.driver}, wheel {run.wheel_sha256[:40]}"
            )
print("ALL SAME" if same else "SOME DIFFER")
sys.exit(0 if same else 1)
