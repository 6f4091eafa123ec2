"""Which cells a matrix run probes on a machine without a GPU, and the one sentence that says so.

`run_matrix` (matrix_run.py) calls it; nothing here reads the command line.  Which
plan a run uses is plan/planning.py's; the preinstalled cell is cells.py's, its torch
backends/preinstalled.py's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from ..backends import Purpose, capabilities, default_backend
from ..backends.preinstalled import (
    interpreter_of,
    torch_version,
)
from ..cells import preinstalled_cell
from ..model import Cell, Channel
from ..probe.scripts import default_probe
from ..utils.words import count

Say = Callable[[str], None]
_EACH = "the torch wheel of each build alone is 0.7-1 GB"


def no_gpu_cells(
    cells: tuple[Cell, ...],
    *,
    python: str,
    backend: str | None,
    say: Say,
    selected: bool = False,
    probes: Sequence[str] = (),
) -> tuple[tuple[Cell, ...], str | None]:
    """Without a GPU: only the preinstalled torch (the interpreter's, or an image's under the
    docker backend), with one sentence saying so; and the backend that runs it.  When `cells`
    were `selected` (--cells, --skip, --shard), the preinstalled torch only if it is among them,
    and the selected cells that are not probed are named.  `probes`: what matrix.yaml's
    `defaults` run, for the interpreter's torch when the matrix has no preinstalled entry."""
    # What --allow-no-gpu costs: every build downloaded and installed; what it gives is the
    # probe's (the shipped ones say `skipped` or "cannot tell", a CPU-only check its verdicts)
    again = (
        f"--allow-no-gpu would install and probe every cell anyway, though a probe that needs "
        f"a GPU tells nothing without one: {_EACH}, and `torchbisect plan` gives the total, so "
        "choose a few with --cells first."
    )
    if selected:
        left = [c.id for c in cells if c.channel is not Channel.PREINSTALLED]
        if left:
            say(
                f"No GPU is visible (nvidia-smi lists none), so these selected cells are not "
                f"probed: {', '.join(left)}; --allow-no-gpu would install and probe them anyway "
                f"({count(len(left), 'download')}: {_EACH}), though a probe that needs a GPU "
                "tells nothing without one."
            )
        if len(left) == len(cells):
            return (), backend
    # one cell per probe of the matrix's preinstalled entry; without one, the interpreter's torch
    # with the probes matrix.yaml names (`probe: check` ran the shipped probe instead)
    mine = [c for c in cells if c.channel is Channel.PREINSTALLED] or [
        preinstalled_cell(probe=probe) for probe in probes or (default_probe(),)
    ]
    if mine[0].base_image and (backend is None or capabilities(backend).containers):
        say(
            f"No GPU is visible (nvidia-smi lists none), so only the torch in image "
            f"{mine[0].base_image} is probed; {again}"
        )
        return tuple(mine), backend
    interpreter = interpreter_of(mine[0], python)
    if torch_version(interpreter) is None:
        say(
            f"No GPU is visible (nvidia-smi lists none) and {interpreter} has no torch, so "
            f"nothing is probed; {again}"
        )
        return (), default_backend(Purpose.OWN_TORCH).name
    say(
        f"No GPU is visible (nvidia-smi lists none), so only the torch of {interpreter} is "
        f"probed; {again}"
    )
    return (
        tuple(dataclasses.replace(c, base_image=None) for c in mine),
        default_backend(Purpose.OWN_TORCH).name,
    )


def own_interpreter(cells: Sequence[Cell]) -> str | None:
    """The interpreter matrix.yaml's `preinstalled.interpreter` names when it is all a run
    probes (the no-GPU case): the `current` backend runs, and checks, that interpreter's torch,
    not the one running torchbisect; None otherwise."""
    named = {c.interpreter for c in cells if c.channel is Channel.PREINSTALLED and not c.base_image}
    if len(named) != 1 or len(cells) != sum(c.channel is Channel.PREINSTALLED for c in cells):
        return None
    return next(iter(named))
