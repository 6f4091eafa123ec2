"""The GPU figures of `torchbisect bench`: the workaround's cost, and how long a probe run takes.

* `workaround`: runs bench/workaround.py (a standalone script) with an interpreter whose torch is
  measured; writes `<stem>.json` and `<stem>.svg` (default stem: `workaround-<torch version>`).
* `probe`: whole probe runs with an earlier probe script and with today's, side by side
  (`probe.json`, `probe.svg`).

`out` None writes nothing (a machine without a GPU keeps reports/bench/ as measured on one); the
numbers are printed either way.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..utils import proc
from . import plots

# The probe before it imported torch once and forked its cases (PROBE_VERSION 1).
BASELINE_PROBE = "2665c53:probes/stale_replay.py"
_SCRIPT = Path(__file__).resolve().parent / "workaround.py"


def write(out: Path | None, name: str, text: str) -> None:
    if out is not None:
        (out / name).write_text(text)


def workaround(python: str, *, sizes_mib: str, out: Path | None, stem: str | None) -> None:
    """`stem`.json/.svg, or workaround-<torch version> when None."""
    print(f"bench: workaround cost with {python}", file=sys.stderr)
    done = proc.run(
        [python, str(_SCRIPT), "--sizes-mib", sizes_mib],
        timeout=1800,
        echo=lambda line: print(line, file=sys.stderr),
    )
    doc = json.loads(done.output[done.output.index("{") :])
    if "rows" not in doc:
        print(f"bench: workaround cost skipped: {doc.get('skipped')}", file=sys.stderr)
        return
    stem = stem or f"workaround-{doc['torch'].replace('+', '-')}"
    write(out, f"{stem}.json", json.dumps(doc, indent=2) + "\n")
    write(out, f"{stem}.svg", _workaround_chart(doc))
    for r in doc["rows"]:
        share = r["graph_clone_node_fraction_of_peak"]
        print(
            f"  {r['size_mib']:>5} MiB  clone {r['eager_clone_ms']:.3f} ms  "
            f"lazy+materialize {r['eager_lazy_materialize_ms']:.3f} ms  graph clone node "
            f"{r['graph_clone_node_ms']:.4f} ms "
            f"({'within noise' if share is None else f'{share:.0%} of peak'})",
            file=sys.stderr,
        )


def _workaround_chart(doc: dict[str, Any]) -> str:
    rows = doc["rows"]
    return plots.line_chart(
        f"clone() vs lazy clone on {doc['gpu']} (torch {doc['torch']})",
        "tensor size (MiB)",
        "GB/s copied",
        [r["size_mib"] for r in rows],
        {
            "eager clone()": [r["eager_clone_gbps"] for r in rows],
            "eager lazy clone + data_ptr()": [r["eager_lazy_materialize_gbps"] for r in rows],
            "clone node in a CUDA Graph": [r["graph_clone_node_gbps"] or 0 for r in rows],
        },
        hline=("device copy peak", doc["peak_copy_gbps"]),
    )


def probe(python: str, *, baseline: Path | None, out: Path | None) -> None:
    """Whole probe runs, the baseline script against today's, with `python`'s torch."""
    from .stage import probe_speed

    doc = probe_speed(python=python, baseline=baseline or _baseline_from_git())
    write(out, "probe.json", json.dumps(doc, indent=2) + "\n")
    bars = {
        f"{label} ({kind})": doc[kind][label]
        for kind in ("cold", "warm")
        for label in ("before", "after")
    }
    write(
        out,
        "probe.svg",
        plots.bar_chart(
            f"seconds per probe run, all cases: {doc['gpu']}, torch {doc['torch']}",
            "",
            bars,
            {k: doc["goal_seconds"] for k in bars if k.startswith("after")},
        ),
    )
    print(json.dumps(doc, indent=2))


def _baseline_from_git() -> Path:
    checkout = Path(__file__).resolve().parents[3]
    path = Path(tempfile.mkdtemp(prefix="torchbisect-baseline-")) / "stale_replay.py"
    # stdout is the file's text: it goes whole into the file, apart from git's stderr
    done = proc.run(["git", "-C", str(checkout), "show", BASELINE_PROBE], stdout=path, check=False)
    if done.returncode != 0:
        shutil.rmtree(path.parent)
        raise ConfigError(
            f"the 'probe' part needs the earlier probe, and git cannot show "
            f"{BASELINE_PROBE} here: pass --probe-baseline SCRIPT"
        )
    return path
