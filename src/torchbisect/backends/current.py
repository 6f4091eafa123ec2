"""The `current` backend: the interpreter's own torch, nothing installed.

The `preinstalled` cell probes the torch of the interpreter running torchbisect (in an NGC image,
the image's torch; `preinstalled.py` says how it is found and fingerprinted).  A wheel cell given
to this backend is overlaid on that same interpreter (`--no-deps` into a venv that sees its
site-packages), which is the venv backend's overlay mode.
"""

from __future__ import annotations

import dataclasses

from .base import BackendOptions, Capabilities
from .preinstalled import torch_fingerprint
from .venv import VenvBackend


class CurrentBackend(VenvBackend):
    """Probes this interpreter's torch; overlays wheel cells on it (never a full install)."""

    name = "current"
    label = "the current backend"
    can = Capabilities()  # the interpreter's own torch: nothing is kept between runs

    def __init__(self, options: BackendOptions | None = None):
        super().__init__(dataclasses.replace(options or BackendOptions(), overlay=True))

    def check(self) -> None:
        torch_fingerprint(self.python)
