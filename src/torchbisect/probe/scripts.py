"""Where the probe scripts live and which version of them a result came from.

The scripts in the repository's `probes/` folder are standalone (they run in containers that do not
have this package), so the package only locates them and fingerprints them: a stored result is
reused only while the script that produced it is byte-for-byte the same.  A wheel carries them as
`torchbisect/_probes/` (setup.py copies them in); a checkout's editable install reads `probes/`.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
from functools import cache
from pathlib import Path

from ..defaults import PROBE as DEFAULT_PROBE
from ..errors import ConfigError

SCRIPT_PROBE = "script"  # runs `bisect --script CMD`; torchbisect's own, never a user's folder


def _own() -> Path:
    """The installed copy beside the package's modules, else the checkout's `probes/`."""
    package = Path(importlib.util.find_spec("torchbisect").origin).resolve().parent
    installed = package / "_probes"
    return installed if installed.is_dir() else package.parents[1] / "probes"


_OWN = _own()


def probes_dir() -> Path:
    """`$TORCHBISECT_PROBES`, else torchbisect's own probes (installed, or the checkout's)."""
    env = os.environ.get("TORCHBISECT_PROBES")
    return Path(env) if env else _OWN


def probe_path(name: str = DEFAULT_PROBE) -> Path:
    """`<folder>/<name>.py`; a name `file:variant` (a --script's `script:<sha12>`) runs `file.py`
    (the variant tells the runs apart in the store, not the script that makes them)."""
    stem = name.partition(":")[0]
    path = (_OWN if stem == SCRIPT_PROBE else probes_dir()) / f"{stem}.py"
    if not path.is_file():
        raise ConfigError(f"probe {name!r} not found: expected {path}")
    return path


@cache
def probe_version(name: str = DEFAULT_PROBE) -> str:
    """`<declared PROBE_VERSION>+<first 12 hex of the script's sha256>`."""
    text = probe_path(name).read_bytes()
    match = re.search(rb'^PROBE_VERSION\s*=\s*["\']([^"\']+)["\']', text, re.MULTILINE)
    declared = match.group(1).decode() if match else "0"
    return f"{declared}+{hashlib.sha256(text).hexdigest()[:12]}"
