"""Harness (issue 54.2): the tool with one of its own steps switched off, for the loop bench.

BENCH_TOOL_VARIANT names the variant; `apply()`, called from a sitecustomize.py on the path of
torchbisect's processes (loop_standins.py writes one; release_env/sitecustomize.py, on the GPU
machine, calls it too), switches it in a process whose command line runs torchbisect and leaves
every other process (the reproducer, uv, pip) as it is. Nothing in src/ changes.

    shipped       the tool as it is
    no-prefetch   Bisector.prefetch does nothing: each candidate installed when it is judged
    no-bytecode   the venv backend's `uv pip install` without --compile-bytecode
    old-adapter   probes/script.py as it was before 9ae1f3f (it imported torch to learn its
                  version before running the script), from the folder BENCH_TOOL_OLD_PROBES
"""

import os
import sys

VARIANTS = ("shipped", "no-prefetch", "no-bytecode", "old-adapter")
VARIANT = "BENCH_TOOL_VARIANT"
OLD_PROBES = "BENCH_TOOL_OLD_PROBES"


def apply():
    variant = os.environ.get(VARIANT, "shipped")
    if variant == "shipped" or "torchbisect" not in " ".join(getattr(sys, "orig_argv", [])):
        return
    if variant not in VARIANTS:
        raise SystemExit(f"{VARIANT}={variant!r}: not one of {', '.join(VARIANTS)}")
    if variant == "no-prefetch":
        from torchbisect.bisect import driver

        driver.Bisector.prefetch = lambda self, indexes: None
    elif variant == "old-adapter":
        from pathlib import Path

        from torchbisect.probe import scripts

        scripts._OWN = Path(os.environ[OLD_PROBES])
    elif variant == "no-bytecode":
        from torchbisect.backends import venv

        run = venv.proc.run

        def without(argv, *args, **kwargs):
            return run([a for a in argv if a != "--compile-bytecode"], *args, **kwargs)

        venv.proc.run = without
