"""A made-up store of 21 releases, the size the page grows to (a TEST FIXTURE, not measured data).

2.2.2 predates `torch._lazy_clone` (every case not applicable), 2.3.x cannot compile on Python
3.12 (Dynamo), 2.11.0 is the machine's preinstalled torch, the rest are affected as the H200
measured 2.11–2.15; each run has a log of the tool's real shape (uv's warnings included).
"""

from __future__ import annotations

import dataclasses
import hashlib

from torchbisect.bench.synthetic import synthetic_run
from torchbisect.model import Channel, ProbeResult, Verdict

RELEASES = (
    "2.2.2",
    "2.3.0",
    "2.3.1",
    "2.4.0",
    "2.4.1",
    "2.5.0",
    "2.5.1",
    "2.6.0",
    "2.7.0",
    "2.7.1",
    "2.8.0",
    "2.9.0",
    "2.9.1",
    "2.10.0",
    "2.11.0",
    "2.12.0",
    "2.12.1",
    "2.13.0",
    "2.14.0",
    "2.14.1",
    "2.15.0",
)
_CUDA = {
    "2.2": "cu121",
    "2.3": "cu121",
    "2.4": "cu121",
    "2.5": "cu124",
    "2.6": "cu124",
    "2.7": "cu126",
    "2.8": "cu128",
    "2.9": "cu128",
    "2.10": "cu128",
    "2.15": "cu132",
}
STALE = {
    "capture_data_ptr": (5, 5),
    "capture_write": (5, 5),
    "side_stream": (20, 20),
    "compile_reduce_overhead": Verdict.AFFECTED,
    "raw_pointer_triton": (5, 5),
}
NO_API = "torch._lazy_clone does not exist in this build"
NO_DYNAMO = "Dynamo does not support Python 3.12"


def _log(version: str, cell_id: str) -> str:
    venv = f"/w/.torchbisect/venvs/{cell_id}"
    uv = (
        "warning: The `UV_NATIVE_TLS` environment variable is deprecated and will be removed in "
        "a future release. Use `UV_SYSTEM_CERTS` instead."
    )
    return "\n".join(
        [
            f"# torchbisect: {cell_id} started 2026-12-02T06:00:00Z backend=venv",
            f"$ /usr/local/bin/uv venv --no-project --python /usr/bin/python3 {venv}",
            uv,
            "$ /usr/bin/python3 -c 'import json, site, sys; print(json.dumps([p for p in sys.path "
            "if p.endswith(('\"'\"'site-packages'\"'\"',))]))'",
            '["/usr/lib/python3/dist-packages"]',
            f"$ /usr/local/bin/uv pip install --python {venv}/bin/python --no-deps 'torch @ "
            f"file:///tmp/wheels/torch-{version}-cp312-cp312-manylinux_2_28_x86_64.whl'",
            uv,
            f" + torch=={version}",
            f"$ {venv}/bin/python /w/probes/stale_replay.py --trials 20 --json "
            "/w/.torchbisect/x.json",
            "[stale_replay] capture_data_ptr         affected       0.6 s (5.0 s wall)",
            "[stale_replay] verdict: affected (exit 1) in 41.1 s",
        ]
    )


def _with_details(run, details: dict[str, str]):
    doc = dict(run.result.raw)
    doc["cases"] = {
        n: {**c, "detail": details.get(n, c["detail"])} for n, c in doc["cases"].items()
    }
    doc["env"] = {**doc["env"], "cudnn": 91900}
    return dataclasses.replace(run, result=ProbeResult.from_json(doc))


def release_runs() -> list:
    runs = []
    for version in RELEASES:
        cuda = _CUDA.get(".".join(version.split(".")[:2]), "cu130")
        cell_id = f"stable-{version}-{cuda}-cp312"
        started = f"2026-12-0{1 + len(runs) % 2}T06:{len(runs):02d}:00+00:00"
        if version == "2.2.2":
            outcomes = {n: Verdict.NOT_APPLICABLE for n in STALE}
            outcomes.update(
                control_clone=Verdict.NOT_APPLICABLE, control_stale=Verdict.NOT_APPLICABLE
            )
            details = dict.fromkeys(outcomes, NO_API)
        elif version.startswith("2.3."):
            outcomes = {**STALE, "compile_reduce_overhead": Verdict.NOT_APPLICABLE}
            details = {"compile_reduce_overhead": NO_DYNAMO}
        else:
            outcomes, details = (
                STALE,
                {"compile_reduce_overhead": "stale through torch.compile in custom_op_data_ptr"},
            )
        run = synthetic_run(
            f"{version}+{cuda}",
            outcomes,
            started=started,  # 2.2.2: no log
            log="" if version == "2.2.2" else _log(version, cell_id),
        )
        run = _with_details(run, details)
        if version == "2.11.0":  # the machine's own torch, a release
            run = dataclasses.replace(
                run,
                cell=dataclasses.replace(
                    run.cell,
                    channel=Channel.PREINSTALLED,
                    id="preinstalled",
                    version="2.11.0",
                    cuda="",
                    python="",
                    url=None,
                ),
            )
        runs.append(
            dataclasses.replace(
                run, backend="venv", wheel_sha256=hashlib.sha256(version.encode()).hexdigest()
            )
        )
    return runs
