#!/usr/bin/env bash
# Harness on the lent H200: `nox -s bench` with every part (run after h200_evidence.sh).
set -uo pipefail
export PYTHONUNBUFFERED=1 PIP_NO_INDEX=1 PIP_FIND_LINKS=$PWD/.whl UV_OFFLINE=1
nox -s bench -- --parts workaround,overhead,rerun,plan,render,gpus \
  --gpu-matrix tests/gpu/h200.gpus.yaml --overhead-cases capture_data_ptr \
  --out reports/bench 2>&1 | tee "$OUT/bench.log"
tar -czf "$OUT/bench.tgz" reports/bench
