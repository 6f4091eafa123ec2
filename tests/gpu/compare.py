"""Harness: do the tool's stored verdicts equal those of the probe run by hand? (prints a table)"""

import json
import sys
from pathlib import Path

from torchbisect.store.db import Store

store, hand_files = sys.argv[1], sys.argv[2:]
stored = {}
for run in Store(Path(store)).latest():
    if run.result:
        stored[run.result.env.get("torch", "").split("+")[0]] = run.result
same = True
for path in hand_files:
    doc = json.loads(Path(path).read_text())
    version = doc["env"]["torch"].split("+")[0]
    tool = stored.get(version)
    for name, case in doc["cases"].items():
        mine = tool.case(name).verdict.value if tool and tool.case(name) else "-"
        ok = mine == case["verdict"]
        same &= ok
        print(
            f"{version:8} {name:26} hand={case['verdict']:14} tool={mine:14} "
            f"{'same' if ok else 'DIFFERENT'}  hand: {case.get('detail', '')[:60]}"
        )
print("ALL SAME" if same else "SOME DIFFER")
