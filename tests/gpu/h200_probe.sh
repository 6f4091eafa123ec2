#!/usr/bin/env bash
# Harness on the lent H200 (issue 16), after the torch 2.15.0 wheel was carried in parts to
# /tmp/parts (see README.md here): rebuild it, run the simulated-build GPU tests (their documents
# land in $OUT, for tests/gpu/recorded/), then today's probe by hand on 2.11.0 and 2.15.0 with
# empty compile caches.  Carried: .torchbisect/gpu/{nvshmem.gz,whl/}.
set -uo pipefail
export PYTHONUNBUFFERED=1 PIP_NO_INDEX=1 UV_OFFLINE=1 WHEELS=$PWD/.torchbisect/gpu/whl
O=/tmp/o
mkdir -p "$O/recorded" /tmp/parts
cp .torchbisect/gpu/nvshmem.gz /tmp/parts/
bash tests/gpu/h200_setup.sh > "$O/setup.log" 2>&1 || { tail -20 "$O/setup.log"; exit 1; }
python3 -m pip install -q --no-deps --target /tmp/t215 \
  /tmp/h200/wheels/torch-2.15.0-cp312-cp312-manylinux_2_28_x86_64.whl >> "$O/setup.log" 2>&1
# The image's interpreter by its full path: inside a nox session `python3` is the session's venv,
# which lacks the image's CUDA libraries (libcusparseLt) that torch 2.15.0 loads from there.
cat > /tmp/h200/python-2.15.0 <<PY
#!/bin/sh
LD_PRELOAD="/tmp/h200/libncclstub.so /tmp/h200/libnvshmem_host.so.3" PYTHONPATH=/tmp/t215 \\
  exec $(command -v python3) "\$@"
PY
chmod +x /tmp/h200/python-2.15.0
/tmp/h200/python-2.15.0 -c "import torch; print(torch.__version__)" 2>&1 | tee -a "$O/setup.log"
nvidia-smi --query-gpu=index,name,driver_version,uuid --format=csv | tee "$O/gpus.txt"
TORCHBISECT_GPU_RECORD=$O/recorded python3 -m pytest tests/gpu/test_simulated_builds.py -v \
  -p no:cacheprovider > "$O/gpu-tests.txt" 2>&1
tail -15 "$O/gpu-tests.txt"
for v in 2.11.0 2.15.0; do
  py=python3; [ "$v" = 2.15.0 ] && py=/tmp/h200/python-2.15.0
  began=$(date +%s%N)
  TRITON_CACHE_DIR=/tmp/cold-$v/triton TORCHINDUCTOR_CACHE_DIR=/tmp/cold-$v/inductor \
    "$py" probes/stale_replay.py --json "$O/hand-$v.json" 2> "$O/hand-$v.log"
  echo "today's probe on $v by hand, cold caches: exit $?, $(( ($(date +%s%N) - began) / 1000000 )) ms" \
    | tee -a "$O/hand.txt"
done
tar -czf "$OUT/probe.tgz" -C /tmp o
