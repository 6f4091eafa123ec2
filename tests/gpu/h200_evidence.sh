#!/usr/bin/env bash
# Harness on the lent H200: the evidence matrix through the tool, then the same probe by hand in
# the same environments, and a comparison of their verdicts.  Everything lands in $OUT.
set -uo pipefail
export PYTHONUNBUFFERED=1 PIP_NO_INDEX=1 PIP_FIND_LINKS=$PWD/.whl UV_OFFLINE=1
bash tests/gpu/h200_setup.sh 2>&1 | tee "$OUT/setup.log" || exit 1
nvidia-smi --query-gpu=index,name,driver_version --format=csv | tee "$OUT/gpus.txt"
start=$(date +%s)
# reports/evidence keeps only measured data (store, logs): its page is reports/h200, drawn from
# this store by `nox -s pages` once the run is back.
nox -s matrix -- --backend venv --matrix tests/gpu/h200.matrix.yaml --no-report \
  --store reports/evidence/results.sqlite --out reports/evidence 2>&1 | tee "$OUT/matrix.log"
echo "matrix wall: $(( $(date +%s) - start )) s" | tee -a "$OUT/matrix.log"
mkdir -p "$OUT/hand"
stub=/tmp/h200/libncclstub.so
hand() {  # version python ld_preload gpu
  CUDA_VISIBLE_DEVICES=$4 LD_PRELOAD="$3" "$2" probes/stale_replay.py \
    --json "$OUT/hand/h200-torch-$1.json" > "$OUT/hand/$1.log" 2>&1
  echo "hand $1: exit $?"
}
v=.torchbisect/venvs
hand 2.11.0 python3 "" 0 & hand 2.12.0 $v/stable-2.12.0-cu130-cp312/bin/python $stub 1 & wait
hand 2.13.0 $v/stable-2.13.0-cu130-cp312/bin/python $stub 0 &
hand 2.14.1 $v/stable-2.14.1-cu130-cp312/bin/python $stub 1 & wait
hand 2.15.0 $v/stable-2.15.0-cu132-cp312/bin/python "$stub /tmp/h200/libnvshmem_host.so.3" 0
PYTHONPATH=src python3 tests/gpu/compare.py reports/evidence/results.sqlite "$OUT"/hand/*.json \
  | tee "$OUT/compare.txt"
tar -czf "$OUT/evidence.tgz" reports/evidence reports/logs tests/gpu/h200.matrix.lock.json \
  -C "$OUT" hand 2>/dev/null
ls -la "$OUT"
