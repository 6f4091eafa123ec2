"""Stand-in for probes/stale_replay.py in tests and the act rehearsal: the same command line, JSON
document and exit codes, no GPU.

A stand-in torch that says whether it is affected (`torch.STALE_LAZY_CLONE`, the act rehearsal's
wheels) gets that verdict (exit 1 affected, 0 not affected), so workflows see verdicts that change
by build; any other torch reads as `skipped` (exit 125), as the real probe does without a GPU.
TB_FAKE_SLEEP (seconds before answering) and TB_FAKE_MODE choose the behaviour: ok (default),
crash, hang, badjson, nojson, exit3, mismatch, write_then_crash.  TB_FAKE_RECORD names a file that
gets the argv, the interesting environment variables and which torch was imported.
TB_FAKE_WAIT_FOR names a file the probe waits for before answering: the test decides when.
TB_FAKE_KILL_RUN names a file: the first probe that finds it missing makes it and answers; the
next one kills the `torchbisect` run that started it with SIGKILL (a shard killed mid-run).
"""

PROBE_VERSION = "test"
BISECT_CASE = "capture_data_ptr"  # as probes/stale_replay.py declares them
TRIAL_CASES = {"side_stream": 1}

import argparse
import json
import os
import signal
import sys
import time


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", default="capture_data_ptr,control_clone")
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--json")
    args = parser.parse_args()
    mode = os.environ.get("TB_FAKE_MODE", "ok")
    mark = os.environ.get("TB_FAKE_KILL_RUN")
    if mark:
        if os.path.exists(mark):
            _kill_the_run()
        open(mark, "w").close()
    time.sleep(float(os.environ.get("TB_FAKE_SLEEP", "0")))
    gate = os.environ.get("TB_FAKE_WAIT_FOR")
    if gate:  # answer only once the test creates this file; PATH.waiting says we are waiting
        open(gate + ".waiting", "w").close()
        while not os.path.exists(gate):
            time.sleep(0.02)
    import torch

    if os.environ.get("TB_FAKE_RECORD"):
        keep = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "TB_ENTRY_VAR", "PYTHONNOUSERSITE")
        with open(os.environ["TB_FAKE_RECORD"], "w") as fh:
            caches = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")
            json.dump({"argv": sys.argv[1:], "env": {k: os.environ.get(k) for k in keep},
                       "caches": {k: os.environ.get(k) for k in caches},
                       "torch": torch.__file__, "version": torch.__version__}, fh)
    sys.stderr.write("fake probe: mode %s\n" % mode)
    if mode == "hang":
        time.sleep(3600)
    if mode == "crash":
        os.kill(os.getpid(), signal.SIGSEGV)
    if mode == "exit3":
        sys.stderr.write("Traceback: something broke\n")
        return 3
    if mode == "nojson":
        return 125
    cases = [c for c in args.cases.split(",") if c]
    if hasattr(torch, "STALE_LAZY_CLONE") and mode == "ok":
        return _told(torch, cases, args.json)
    doc = {"schema": 1, "probe": "stale_replay", "probe_version": PROBE_VERSION,
           "verdict": "not_affected" if mode == "mismatch" else "skipped",
           "cases": {c: {"verdict": "skipped", "detail": "no CUDA device"} for c in cases},
           "env": {"torch_version": torch.__version__}}
    _write("{not json" if mode == "badjson" else json.dumps(doc), args.json)
    if mode == "write_then_crash":
        os.kill(os.getpid(), signal.SIGSEGV)
    return 125


def _told(torch, cases, out):
    """The verdict a stand-in torch states, with the controls behaving as they should."""
    stale = bool(torch.STALE_LAZY_CLONE)
    verdict = "affected" if stale else "not_affected"
    fixed = {"control_clone": ("not_affected", "correct (stand-in)"),
             "control_stale": ("affected", "stale as expected (stand-in)")}
    doc = {"schema": 1, "probe": "stale_replay", "probe_version": PROBE_VERSION,
           "verdict": verdict,
           "cases": {c: dict(zip(("verdict", "detail"), fixed.get(
               c, (verdict, "stand-in probe: %s" % verdict)))) for c in cases},
           "env": {"torch_version": torch.__version__, "git_version": torch.version.git_version,
                   "cuda_available": False}}
    _write(json.dumps(doc), out)
    return 1 if stale else 0


def _kill_the_run():
    """SIGKILL the nearest ancestor that is a `torchbisect` command, as a runner's kill -9 would."""
    pid = os.getppid()
    while pid > 1:
        with open("/proc/%d/cmdline" % pid, "rb") as fh:
            argv = fh.read().split(b"\0")
        if any(b"torchbisect" in a for a in argv):
            os.kill(pid, signal.SIGKILL)
            sys.exit(137)
        with open("/proc/%d/stat" % pid) as fh:
            pid = int(fh.read().rsplit(")", 1)[1].split()[1])
    sys.exit("fake probe: no torchbisect process above this one")


def _write(text, out):
    if out:
        with open(out, "w") as fh:
            fh.write(text)
    else:
        sys.stdout.write(text + "\n")


if __name__ == "__main__":
    sys.exit(main())
