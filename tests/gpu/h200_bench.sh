#!/usr/bin/env bash
# Harness on the lent H200 (after h200_probe.sh set up torch 2.15.0 and nox): `nox -s bench` with
# the workaround cost on 2.11.0 (the image's torch) beside 2.15.0, and the probe before (commit
# 2665c53, carried as .torchbisect/bench/stale_replay_v1.py) beside today's, in one run.
set -uo pipefail
export PYTHONUNBUFFERED=1 PIP_NO_INDEX=1 PIP_FIND_LINKS=$PWD/.torchbisect/bench/whl UV_OFFLINE=1
nox --force-venv-backend virtualenv -s bench -- --parts workaround,probe --compare-interpreter /tmp/h200/python-2.15.0 \
  --probe-baseline .torchbisect/bench/stale_replay_v1.py --out reports/bench 2>&1 \
  | tee /tmp/bench.log
tar -czf "$OUT/bench.tgz" reports/bench -C /tmp bench.log
