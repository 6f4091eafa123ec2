"""Benchmarks (`torchbisect bench`, `nox -s bench`): every measurement the project reports.

* figures.py: what the workaround costs on this GPU, and how long a whole probe run takes.
* stage.py: the run stage's overhead per cell, an unchanged re-run, the probe before and after.
* tool.py: the tool parts (overhead, re-run, planning 1,000 dates, rendering 2,000 cells, GPUs).
* loop.py: from a reproducer to an answer, `bisect --script` against the hand loop (fresh venv,
  install, run) over the same builds, and the reproducer's own time (the floor).
* scale.py: `report` on a store the size of three years of daily nightlies on four GPU kinds
  (no GPU needed: it measures the report).
* plots.py: the SVG charts; workaround.py: the standalone script run in the measured interpreter;
  nightly_index.py: the local index the planning benchmark reads.

Numbers are measured and reported, never asserted.  Nothing here imports the test suite.
"""

from __future__ import annotations

from .tool import PARTS as TOOL_PARTS

PARTS = ("workaround", "probe", *TOOL_PARTS, "scale", "loop")
