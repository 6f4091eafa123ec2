"""The environment a probe gets: an allow-list of this host's variables, never its credentials.

A probe is any script in the probes folder (a `bisect --script` command too), and whatever it
prints reaches logs, the store and published pages.  So it does not inherit torchbisect's
environment: only the variables a GPU program needs (PATH, HOME, locale, temporary folders,
loader paths, and the CUDA / NVIDIA / PyTorch / Triton / NCCL / threading families) pass,
and of those none whose name says it holds a secret (`masking.CREDENTIAL_NAME`: *TOKEN*,
*SECRET*, *PASSWORD*, …).  GITHUB_TOKEN, ACTIONS_*, AWS_*, AZURE_*, GOOGLE_*, HF_TOKEN, PyPI and
Docker credentials are therefore never seen by a probe.

Two ways to give a probe more, both explicit: `env:` in matrix.yaml (values written there, per
entry or in `defaults`), and `TORCHBISECT_PASS_ENV` on the host — a comma-separated list of
names or shell patterns (`HF_HOME,MY_*`) of variables to pass through as they are.
The docker backend starts from an empty environment inside the container and adds only the
cell's `env:`; the venv and current backends start from `allowed()`.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Mapping

from ..masking import CREDENTIAL_NAME

PASS_VAR = "TORCHBISECT_PASS_ENV"
NAMES = frozenset(
    {
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "SHELL",
        "TERM",
        "TZ",
        "LANG",
        "LANGUAGE",
        "HOSTNAME",
        "TMPDIR",
        "TEMP",
        "TMP",
        "XDG_CACHE_HOME",
        "XDG_RUNTIME_DIR",
        "LD_LIBRARY_PATH",
        "LD_PRELOAD",
        "PYTHONPATH",
        "PYTHONHASHSEED",
        "PYTHONUNBUFFERED",
        "PYTHONDONTWRITEBYTECODE",
        "PYTHONWARNINGS",
        "PYTHONFAULTHANDLER",
        "PYTHONIOENCODING",
        "PYTHONUTF8",
        "PYTHONPYCACHEPREFIX",
        "PYTHONNOUSERSITE",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
    }
)
PREFIXES = (
    "LC_",
    "CUDA_",
    "NVIDIA_",
    "CUDNN_",
    "CUBLAS",
    "NCCL_",
    "NVSHMEM_",
    "PYTORCH_",
    "TORCH_",
    "TORCHINDUCTOR_",
    "TORCHDYNAMO_",
    "INDUCTOR_",
    "TRITON_",
    "OMP_",
    "MKL_",
    "KMP_",
    "OPENBLAS_",
    "HIP_",
    "ROCM_",
    "HSA_",
)


def allowed(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables of `environ` (default: ours) that a probe may see."""
    environ = os.environ if environ is None else environ
    extra = [p.strip() for p in environ.get(PASS_VAR, "").split(",") if p.strip()]
    return {
        name: value
        for name, value in environ.items()
        if _default_allowed(name) or any(fnmatch.fnmatchcase(name, p) for p in extra)
    }


def _default_allowed(name: str) -> bool:
    listed = name in NAMES or name.startswith(PREFIXES)
    return listed and not CREDENTIAL_NAME.search(name)
