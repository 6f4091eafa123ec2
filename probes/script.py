"""Runs the command of `torchbisect bisect --script CMD` as a probe, where the build is installed.

The command comes in the environment (`TORCHBISECT_SCRIPT`, which torchbisect sets from --script)
and decides as `git bisect run` does: exit 0 good, 125 skip, 1-127 bad, above 127 (or a signal)
stops the bisection.  This script turns that exit status into the probe document every probe
writes, with one case, `script`, so torchbisect installs, runs, times out, stores and judges a
script exactly as it does its own probe, on every backend (the venv on this host, or a container).

The command runs through `/bin/sh -c` with the build's interpreter first on PATH and these set:
TORCHBISECT_PYTHON (that interpreter), TORCHBISECT_TORCH_VERSION (its torch's version) and
TORCHBISECT_DATE (YYYY-MM-DD of a nightly, empty for a release).

Standalone by contract (see probes/README.md): stdlib + torch only, Python 3.8 syntax, no import of
torchbisect; torch is asked for its version in a child interpreter, so a torch that cannot even be
imported still lets the command decide.

Usage: TORCHBISECT_SCRIPT=CMD python script.py [--cases script] [--trials N] --json PATH
"""

import argparse
import json
import os
import re
import subprocess
import sys
import time

PROBE_VERSION = "1"
CASE = "script"
_ASK_TORCH = "import torch; print(torch.__version__); print(torch.version.git_version)"


def torch_versions(env):
    """(version, git_version) of the torch this interpreter imports; "" for what it cannot tell."""
    try:
        out = subprocess.run([sys.executable, "-c", _ASK_TORCH], env=env, timeout=300,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             text=True)
    except (OSError, subprocess.TimeoutExpired):
        return "", ""
    lines = out.stdout.strip().splitlines() if out.returncode == 0 else []
    return (lines[-2].strip(), lines[-1].strip()) if len(lines) >= 2 else ("", "")


def nightly_date(version):
    match = re.search(r"\.dev(\d{4})(\d{2})(\d{2})", version)
    return "-".join(match.groups()) if match else ""


def command_env(version):
    """This process's environment with the build's interpreter first on PATH."""
    env = dict(os.environ)
    bindir = os.path.dirname(sys.executable)
    env["PATH"] = os.pathsep.join([bindir, env.get("PATH", os.defpath)])
    env["TORCHBISECT_PYTHON"] = sys.executable
    env["TORCHBISECT_TORCH_VERSION"] = version
    env["TORCHBISECT_DATE"] = nightly_date(version)
    if os.path.isfile(os.path.join(os.path.dirname(bindir), "pyvenv.cfg")):
        env["VIRTUAL_ENV"] = os.path.dirname(bindir)
    return env


def verdict_of(status):
    """The `git bisect run` reading of an exit status, as a probe verdict."""
    if status == 0:
        return "not_affected", "exit 0"
    if status == 125:
        return "inconclusive", "exit 125 (skip)"
    if 1 <= status <= 127:
        return "affected", f"exit {status}"
    if status < 0:
        return "error", f"killed by signal {-status}"
    return "error", f"exit {status} (above 127: stops the bisection)"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=CASE, help="accepted for the contract; one case")
    parser.add_argument("--trials", help="accepted for the contract; the command decides alone")
    parser.add_argument("--json", metavar="PATH", required=True)
    args = parser.parse_args(argv)
    command = os.environ.get("TORCHBISECT_SCRIPT", "")
    if not command.strip():
        sys.stderr.write("script.py: TORCHBISECT_SCRIPT is empty: nothing to run\n")
        return 128
    version, git_version = torch_versions(dict(os.environ))
    started = time.monotonic()
    status = subprocess.call(["/bin/sh", "-c", command], env=command_env(version))
    verdict, detail = verdict_of(status)
    document = {
        "schema": 1, "probe": CASE, "probe_version": PROBE_VERSION, "verdict": verdict,
        "cases": {CASE: {"verdict": verdict, "detail": detail, "exit_status": status,
                         "seconds": round(time.monotonic() - started, 3)}},
        "env": {"torch_version": version, "git_version": git_version},
    }
    with open(args.json, "w") as fh:
        json.dump(document, fh, indent=2)
    return {"not_affected": 0, "affected": 1}.get(verdict, 125)


if __name__ == "__main__":
    sys.exit(main())
