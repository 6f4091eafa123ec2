#!/usr/bin/env bash
# Harness on a lent GPU (issue 54.3): where the shipped probe's wall goes on the machine's own torch,
# and what a build's compile caches save: probes/stale_replay.py three times with
# TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR in one fresh folder, as the venv backend now sets
# them inside each build's venv: cold (empty caches), again (both kept: a rerun of that build),
# and again with Inductor's removed (Triton's kept).
# Each run's document and log go to $OUT; timing.txt has the import, per-case and whole seconds.
set -u
export PYTHONUNBUFFERED=1
{
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c 'import sys, torch, triton; print("torch", torch.__version__, "triton", triton.__version__, "python", sys.version.split()[0])'
date -u +%FT%TZ
C=$(mktemp -d)/compile-cache
for pass in cold rerun triton-only; do
  [ "$pass" = triton-only ] && rm -rf "$C/inductor"
  start=$(date +%s.%N)
  TORCHINDUCTOR_CACHE_DIR=$C/inductor TRITON_CACHE_DIR=$C/triton \
    python3 probes/stale_replay.py --json "$OUT/$pass.json" > "$OUT/$pass.log" 2>&1
  code=$?
  python3 - "$OUT/$pass.json" "$pass" "$code" "$start" <<'PY'
import json, sys, time
doc = json.load(open(sys.argv[1]))
wall = time.time() - float(sys.argv[4])
print(f"{sys.argv[2]}: exit {sys.argv[3]}, wall {wall:.1f} s, probe {doc['seconds']:.1f} s, "
      f"import torch {doc.get('import_seconds')} s, verdict {doc['verdict']}")
for name, case in doc["cases"].items():
    print(f"  {name:<24} {case.get('verdict'):<14} {case.get('seconds', 0):6.2f} s "
          f"({case.get('wall_seconds', 0) or 0:.2f} s wall)")
PY
done
du -sh "$C"/* 2>/dev/null
} 2>&1 | tee "$OUT/timing.txt"
