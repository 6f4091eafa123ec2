#!/usr/bin/env bash
# Harness on the lent H200: bisect over the carried releases 2.12.0 … 2.15.0 (a flat folder, the
# air-gapped mirror) with the probe, then with --script.  Results land in $OUT.
set -uo pipefail
export PYTHONUNBUFFERED=1 PIP_NO_INDEX=1 PIP_FIND_LINKS=$PWD/.whl UV_OFFLINE=1
bash tests/gpu/h200_setup.sh > "$OUT/setup.log" 2>&1 || { cat "$OUT/setup.log"; exit 1; }
export LD_PRELOAD="/tmp/h200/libncclstub.so /tmp/h200/libnvshmem_host.so.3"
common=(--good 2.12.0 --bad 2.15.0 --cuda cu130 --index-url /tmp/h200/wheels --backend venv
        --overlay --store /tmp/bisect.sqlite --no-github)
nox -s bisect -- "${common[@]}" --json "$OUT/probe-bisect.json" 2>&1 | tee "$OUT/probe-bisect.log"
echo "probe bisect exit: ${PIPESTATUS[0]}" | tee -a "$OUT/probe-bisect.log"
nox -s bisect -- "${common[@]}" --json "$OUT/script-bisect.json" --markdown \
  "$OUT/script-bisect.md" --script "python $PWD/tests/gpu/cuda_ge_132.py" 2>&1 \
  | tee "$OUT/script-bisect.log"
echo "script bisect exit: ${PIPESTATUS[0]}" | tee -a "$OUT/script-bisect.log"
