"""E2: a probe gets no credentials (an allow-list, which `env:` and TORCHBISECT_PASS_ENV extend),
and token-shaped strings are masked in the log, the store and every page (second defence)."""

from __future__ import annotations

import os
import sqlite3
import sys

import pytest
from helpers import fake_torch_wheel
from helpers.cli import local_matrix, torchbisect

from torchbisect.backends import probe_env
from torchbisect.exits import Exit
from torchbisect.masking import mask

GITHUB_TOKEN = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0" * 2  # the shape of a real one
SECRETS = {
    "GITHUB_TOKEN": GITHUB_TOKEN,
    "ACTIONS_RUNTIME_TOKEN": "eyJ0eXAiOiJKV1QifQ.eyJzdWIiOiJydW5uZXIifQ.c2lnbmF0dXJlc2lnbmF0dXJl",
    "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE",
    "HF_TOKEN": "hf_" + "k" * 34,
    "TWINE_PASSWORD": "pypi-" + "A" * 60,
    "AZURE_CLIENT_SECRET": "azure-secret-value-123456",
    "GOOGLE_APPLICATION_CREDENTIALS": "/home/me/gcp-key.json",
    "DOCKER_AUTH_CONFIG": '{"auths": {"x": "dXNlcjpwYXNz"}}',
}
# printed by the probe itself, as a library or a test of a user's might: masked on the way in
PRINTED = {
    "ghp_" + "p" * 36: "ghp_***",
    "github_pat_" + "Q" * 40: "github_pat_***",
    "AKIAABCDEFGHIJKLMNOP": "AKIAABCD***",
    "Authorization: Bearer abcdefghijklmnop12345": "Bearer ***",
    "https://user:hunter2hunter2@proxy.example:3128/": "user:***@",
    "hf_" + "w" * 34: "hf_***",
}

PROBE = """
PROBE_OUTPUT = "document"
import argparse, json, os, sys
parser = argparse.ArgumentParser()
parser.add_argument("--cases"); parser.add_argument("--trials"); parser.add_argument("--json")
args = parser.parse_args()
for name, value in sorted(os.environ.items()):
    print("%s=%s" % (name, value))
printed = json.loads(PRINTED_JSON)
print(" ".join(printed))
seen = sorted(os.environ)
doc = {"schema": 1, "probe": "stale_replay", "probe_version": "1", "verdict": "skipped",
       "cases": {"capture_data_ptr": {"verdict": "skipped",
                 "detail": " ".join(printed) + " saw " + " ".join(seen)}},
       "env": {"torch_version": "2.99.0+cpu", "leak": os.environ.get("GITHUB_TOKEN", "")}}
json.dump(doc, open(args.json, "w"))
sys.exit(125)
"""


@pytest.mark.slow
def test_a_probe_sees_no_credentials_and_no_token_reaches_a_log_the_store_or_a_page(tmp_path):
    import json

    (tmp_path / "probes").mkdir()
    (tmp_path / "probes" / "stale_replay.py").write_text(
        PROBE.replace("PRINTED_JSON", repr(json.dumps(list(PRINTED))))
    )
    wheel = fake_torch_wheel(tmp_path / "wheels", "2.99.0+cpu")
    (tmp_path / "matrix.yaml").write_text(
        f"dev:\n  - wheel: {wheel}\n    name: leak\n    overlay: true\n"
        "    env: {FROM_MATRIX: given}\n"
    )
    env = {
        **os.environ,
        **SECRETS,
        "TORCHBISECT_PROBES": str(tmp_path / "probes"),
        "CUDA_MODULE_LOADING": "LAZY",
        "HOST_ONLY": "kept out",
        "PASSED_ON": "asked for",
        "TORCHBISECT_PASS_ENV": "PASSED_*",
    }
    done = torchbisect(
        *local_matrix(),
        cwd=tmp_path,
        env=env,
        timeout=300,
    )
    assert done.returncode == Exit.OK, done.stderr
    log = (tmp_path / "reports" / "logs" / "dev-leak.log").read_text()
    # the allow-list: what a GPU program needs, what the matrix and the host explicitly give
    assert "FROM_MATRIX=given" in log and "PASSED_ON=asked for" in log
    assert "CUDA_MODULE_LOADING=LAZY" in log and "\nPATH=" in log
    assert "HOST_ONLY" not in log
    for name in SECRETS:
        assert f"\n{name}=" not in log, name
    with sqlite3.connect(tmp_path / "results.sqlite") as db:
        stored = "\n".join(db.iterdump())
    pages = {
        name: (tmp_path / "reports" / name).read_text()
        for name in ("index.html", "results.json", "summary.md", "affected.json")
    }
    for where, text in {"log": log, "store": stored, **pages}.items():
        for value in SECRETS.values():
            assert value not in text, (where, value)
        for token in PRINTED:
            assert token not in text, (where, token)
    for shown in PRINTED.values():
        assert shown in log
    assert "ghp_***" in stored and "ghp_***" in pages["results.json"]


def test_the_allow_list_keeps_what_a_gpu_program_needs_and_drops_credentials():
    host = {
        **SECRETS,
        "PATH": "/usr/bin",
        "HOME": "/root",
        "LANG": "C.UTF-8",
        "LD_PRELOAD": "/opt/nccl-stub.so",
        "CUDA_VISIBLE_DEVICES": "0",
        "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
        "TRITON_CACHE_DIR": "/t",
        "NCCL_DEBUG": "INFO",
        "OMP_NUM_THREADS": "4",
        "LC_ALL": "C",
        "TORCH_HUB_TOKEN": "looks-allowed-but-is-a-token",
        "CUDA_API_KEY": "nope-nope-nope",
        "GITHUB_ACTIONS": "true",
        "ACTIONS_ID_TOKEN_REQUEST_URL": "https://x",
        "NPM_TOKEN": "npm_x",
        "PIP_INDEX_URL": "https://u:p@mirror/simple",
        "SSH_AUTH_SOCK": "/tmp/agent",
        "KUBECONFIG": "/root/.kube/config",
    }
    seen = probe_env.allowed(host)
    assert set(seen) == {
        "PATH",
        "HOME",
        "LANG",
        "LD_PRELOAD",
        "CUDA_VISIBLE_DEVICES",
        "PYTORCH_CUDA_ALLOC_CONF",
        "TRITON_CACHE_DIR",
        "NCCL_DEBUG",
        "OMP_NUM_THREADS",
        "LC_ALL",
    }
    more = probe_env.allowed({**host, "TORCHBISECT_PASS_ENV": "HF_TOKEN, KUBE*"})
    assert set(more) - set(seen) == {"HF_TOKEN", "KUBECONFIG"}


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        *PRINTED.items(),
        ("gho_" + "a1" * 18, "gho_***"),
        ("ghs_" + "B2" * 18, "ghs_***"),
        ("ASIAY34FZKBOKMUTVV7A", "ASIAY34F***"),
        ("pypi-AgEIcHlwaS5vcmc" + "x" * 50, "pypi-***"),
        ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N", "***"),
        ("-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----", "PRIVATE KEY"),
    ],
)
def test_token_shapes_are_masked_and_ordinary_text_is_not(text, shown):
    masked = mask(f"before {text} after")
    assert shown in masked and text not in masked and masked.startswith("before ")
    plain = (
        "torch 2.15.0+cu132 sha256=" + "ab" * 32 + " Bearer of bad news; https://x.org/a:b "
        "capture_data_ptr stale on 3/3 replays; TypeError: invalid token"
    )
    assert mask(plain) == plain


def test_the_values_of_our_own_secrets_are_masked_whatever_their_shape(monkeypatch):
    from torchbisect import masking

    monkeypatch.setenv("MY_SERVICE_TOKEN", "plain-words-no-shape")
    masking.refresh()  # read once per process: the environment torchbisect started with
    try:
        assert mask("it printed plain-words-no-shape here") == "it printed *** here"
    finally:
        monkeypatch.undo()
        masking.refresh()


def test_a_docker_probe_starts_from_an_empty_environment():
    from torchbisect.backends.container import Containers

    boxes = Containers(lambda: None, ca_bundle=None)
    with pytest.MonkeyPatch.context() as mp:
        for name, value in {**SECRETS, "HTTPS_PROXY": "http://u:pw@proxy:3128"}.items():
            mp.setenv(name, value)
        probe = boxes._environment({"FROM_MATRIX": "given"}, None, network=False)
        install = boxes._environment({}, None, network=True)
    assert not set(probe) & (set(SECRETS) | {"HTTPS_PROXY"}) and probe["FROM_MATRIX"] == "given"
    assert install["HTTPS_PROXY"] and not set(install) & set(SECRETS)


@pytest.mark.slow
def test_a_bisect_script_is_a_probe_and_sees_no_credentials(tmp_path, monkeypatch):
    from torchbisect.backends import BackendOptions, choose_backend
    from torchbisect.bisect.verdicts import Rule
    from torchbisect.model import Cell, Channel, RunStatus
    from torchbisect.run import execute

    version = "2.10.0.dev20250801+cpu"
    wheel = fake_torch_wheel(tmp_path / "wheels", version)
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    seen = tmp_path / "seen.txt"
    rule = Rule(script=f"env > {seen}")
    cell = Cell(
        id="nightly-20250801-cpu-test",
        channel=Channel.NIGHTLY,
        version=version,
        cuda="cpu",
        python=f"{sys.version_info.major}.{sys.version_info.minor}",
        url=str(wheel),
        date="2025-08-01",
        probe=rule.probe_name,
        env=rule.env,
        timeout=120,
    )
    backend = choose_backend("venv", BackendOptions(workdir=tmp_path / "work"), say=print)
    run = execute.run_cell(backend, cell, gpu=None, logs_dir=tmp_path / "logs")
    assert run.status is RunStatus.OK, run.reason
    names = {line.split("=", 1)[0] for line in seen.read_text().splitlines() if "=" in line}
    assert "PATH" in names and "TORCHBISECT_DATE" in names
    assert not names & set(SECRETS), names & set(SECRETS)
