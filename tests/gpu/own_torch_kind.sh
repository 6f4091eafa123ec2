#!/usr/bin/env bash
# Harness on a lent GPU (issues 54.1 and 54.3), carrying nothing but torchbisect's missing
# dependencies (carry: [".gpu-carry/setup/whl"]): both shipped probes over the machine's own torch
# as the service runs a kind (`matrix --runners runners.yaml --kind KIND` into a shard store that
# starts empty, KIND read from nvidia-smi: H100 or H200), then probe_timing.sh (the probe's wall,
# cold and again with a build's compile caches kept).  Everything comes back in $OUT: the shard,
# the matrix's output, the cells' logs (logs.tgz), the timing (timing.txt, timing.tgz).
set -u
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --target /tmp/site .gpu-carry/setup/whl/*.whl 2>&1 | tail -1
export PYTHONPATH=$PWD/src:/tmp/site PATH=/tmp/site/bin:$PATH UV_OFFLINE=1
repo=$PWD
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$gpu" in *H100*) kind=H100 ;; *H200*) kind=H200 ;; *) kind=unknown ;; esac
echo "gpu: $gpu; kind: $kind; $(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)"
mkdir -p /tmp/proj && cd /tmp/proj
cat > matrix.yaml <<'Y'
probes:
  stale_replay: {trials: 20}
  cumsum_64bit: {timeout: 600}
preinstalled: true
Y
start=$(date +%s)
python3 -m torchbisect matrix --matrix matrix.yaml --runners "$repo/runners.yaml" --kind "$kind" \
  --require-gpu --store shard.sqlite --out site --workdir w 2>&1 | tee "$OUT/matrix.log"
echo "matrix exit ${PIPESTATUS[0]} in $(( $(date +%s) - start )) s" | tee -a "$OUT/matrix.log"
cp shard.sqlite "$OUT/$kind-shard.sqlite"
tar -czf "$OUT/logs.tgz" site/logs w/logs 2>/dev/null || tar -czf "$OUT/logs.tgz" site
cd "$repo"
mkdir -p /tmp/timing
OUT=/tmp/timing bash tests/gpu/probe_timing.sh > /dev/null 2>&1
cp /tmp/timing/timing.txt "$OUT/" && tar -C /tmp -czf "$OUT/timing.tgz" timing
cat "$OUT/timing.txt"; ls -la "$OUT"
