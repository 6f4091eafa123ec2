#!/usr/bin/env bash
# Harness on the lent H200 (issue 24, second session): the scheduled service's store chain with
# today's code on a real GPU, and the scale benchmark measured on the GPU machine.  Carries
# .gpu-carry/whl/ (tests/gpu/docker_pack.sh's wheels: torchbisect's dependencies the machine's
# python lacks).  Writes under $OUT:
#   service.log   every command below with its exit status, and what the pages said
#   runs/         the stores of run 501 (the H200 shard merged with its roll call) and run 502
#   bench/        `bench --parts scale`: scale.json (no Chromium there: the phone is not measured)
#
# 1. Run 501: `matrix --runners runners.yaml --kind H200` on the preinstalled torch as the probe
#    job runs it (GITHUB_RUN_ID=501), its store as a store-shard artifact folder.
# 2. The build of run 501: `merge --shards --roll-call`, `report --runners` with H200 and an H100
#    that never reported.
# 3. Run 502, in which no shard of any kind reported: `merge --shards` of an empty folder with its
#    roll call; the page must say H200 did not report in run 502, not that it reported.
# 4. `bench --parts scale`.
set -uo pipefail
export PYTHONUNBUFFERED=1 PIP_NO_INDEX=1 PYTHONPATH=$PWD/src
tb() { echo "+ torchbisect $*"; python3 -m torchbisect "$@"; echo "exit $?"; }
said() {  # the runner kinds' sentences of a page's results.json
  python3 - "$1" <<'PY'
import json, sys
for k in json.load(open(sys.argv[1]))["models"]["kinds"]:
    print("kind:", k["name"], k["state"], "-", k["text"])
PY
}
{
python3 -m pip install -q --no-index --no-deps --no-compile .gpu-carry/whl/*.whl || exit 1
nvidia-smi -L
python3 -c 'import torch; print("torch", torch.__version__, torch.version.git_version[:8], torch.cuda.get_device_name(0))'
work=/tmp/service
rm -rf "$work"; mkdir -p "$work/shards-501/store-shard-H200-1" "$work/shards-502"
printf 'defaults: {trials: 20}\npreinstalled: true\n' > "$work/pre.yaml"
sed -n '/^kinds:/,/shards:/p' runners.yaml > "$work/two.yaml"
printf '  - name: H100\n    gpu: NVIDIA H100\n    labels: [self-hosted, linux, x64, h100]\n    platform: linux_x86_64\n' >> "$work/two.yaml"
cat "$work/two.yaml"

echo "=== 1. run 501, the H200 shard"
GITHUB_RUN_ID=501 GITHUB_RUN_ATTEMPT=1 tb matrix --matrix "$work/pre.yaml" --runners "$work/two.yaml" \
  --kind H200 --backend current --store "$work/shards-501/store-shard-H200-1/shard.sqlite" \
  --no-report --fail-on none --require-gpu

echo "=== 2. the build of run 501"
GITHUB_RUN_ID=501 GITHUB_RUN_ATTEMPT=1 tb merge "$work/site-501.sqlite" "$work/none.sqlite" \
  --allow-missing "$work/none.sqlite" --shards "$work/shards-501" --roll-call
tb report --store "$work/site-501.sqlite" --runners "$work/two.yaml" --out "$work/page-501"
said "$work/page-501/results.json"
python3 - "$work/page-501/results.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
for r in doc["runs"]:
    print("run:", r["cell"]["id"], r["gpu"], r["driver"], r["status"], r["verdict"],
          r["env"].get("torch"))
print("headlines:", doc["headlines"])
PY

echo "=== 3. run 502: no shard of any kind reported"
GITHUB_RUN_ID=502 GITHUB_RUN_ATTEMPT=1 tb merge "$work/site-502.sqlite" "$work/site-501.sqlite" \
  --shards "$work/shards-502" --roll-call
tb report --store "$work/site-502.sqlite" --runners "$work/two.yaml" --out "$work/page-502"
said "$work/page-502/results.json"

echo "=== 4. bench --parts scale"
tb bench --parts scale --out "$OUT/bench"
mkdir -p "$OUT/runs"
cp "$work"/site-50?.sqlite "$work/shards-501/store-shard-H200-1/shard.sqlite" "$OUT/runs/"
} > "$OUT/service.log" 2>&1
tail -40 "$OUT/service.log"
