"""Stand-in for probes/stale_replay.py in the act rehearsal: same command line, JSON document and
exit codes (0 not affected, 1 affected), no GPU.  The stand-in torch wheels say whether they are
"affected" in `torch.STALE_LAZY_CLONE`, so the workflows see real verdicts that change by build.
"""

PROBE_VERSION = "act"

import argparse
import json
import sys


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", default="capture_data_ptr,control_clone")
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--json")
    args = parser.parse_args()
    import torch

    stale = bool(getattr(torch, "STALE_LAZY_CLONE", False))
    verdict = "affected" if stale else "not_affected"
    cases = {}
    for case in [c for c in args.cases.split(",") if c]:
        if case == "control_clone":
            cases[case] = {"verdict": "not_affected", "detail": "correct (stand-in)"}
        elif case == "control_stale":
            cases[case] = {"verdict": "affected", "detail": "stale as expected (stand-in)"}
        else:
            cases[case] = {"verdict": verdict, "detail": "stand-in probe: %s" % verdict}
    doc = {"schema": 1, "probe": "stale_replay", "probe_version": PROBE_VERSION,
           "verdict": verdict, "cases": cases,
           "env": {"torch": torch.__version__, "git_version": torch.version.git_version,
                   "cuda_available": False}}
    text = json.dumps(doc)
    if args.json:
        with open(args.json, "w") as fh:
            fh.write(text)
    else:
        sys.stdout.write(text + "\n")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
