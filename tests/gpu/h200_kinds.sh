#!/usr/bin/env bash
# Harness on the lent H200 (issue 24): runner kinds and the docker preflight on a real GPU.
# Carried in .gpu-carry/ (tests/gpu/docker_pack.sh, without the torch parts): docker-bin.tar.xz
# and whl/ (torchbisect's dependencies the machine's python lacks).  Writes under $OUT:
#   kinds.log         every command below with its exit status
#   kinds.sqlite      the store of the H200 shard (its run and its attendance)
#   page.html         the page drawn with a runners file that also declares a kind that never ran
#
# 1. `matrix --runners runners.yaml --kind H200` (the shipped file) on the preinstalled torch:
#    the runner passes its kind's check and the shard's attendance is stored.
# 2. The same runner named as kinds it is not (GB300 on aarch64, H100 on x86_64): refused, exit 3.
# 3. `report --runners` with H200 and an H100 that never reported.
# 4. `preflight --backend docker` through the NVIDIA Container Toolkit's stand-in
#    (nvidia_standin.py, as in h200_docker.sh), the GPUs a `--gpus all` container saw.
set -uo pipefail
export PYTHONUNBUFFERED=1 PIP_NO_INDEX=1 UV_OFFLINE=1 PATH=/opt/dk/bin:$PATH
export PYTHONPATH=$PWD/src
C=.gpu-carry
IMAGE=torchbisect/h200:torch-2.11.0
DRIVER_LIBS=/usr/local/nvidia/lib64
tb() { echo "+ torchbisect $*"; python3 -m torchbisect "$@"; echo "exit $?"; }

python3 -m pip install -q --no-index --no-deps --no-compile "$C"/whl/*.whl || exit 1
nvidia-smi -L
python3 -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name(0))'
work=/tmp/kinds
mkdir -p "$work"
printf 'defaults: {trials: 20}\npreinstalled: true\n' > "$work/pre.yaml"

echo "=== 1. the shipped runners.yaml, kind H200"
tb matrix --matrix "$work/pre.yaml" --runners runners.yaml --kind H200 --backend current \
  --store "$work/kinds.sqlite" --out "$work/page1" --no-report --fail-on none --require-gpu
python3 - "$work/kinds.sqlite" <<'PY'
import sys
from torchbisect.store.db import Store
with Store(sys.argv[1], read_only=True) as s:
    for r in s.runs():
        print("run:", r.cell.id, r.gpu, r.driver, r.verdict)
    for a in s.attendance():
        print("attendance:", a.to_json())
PY

echo "=== 2. the same runner named as kinds it is not"
cat > "$work/wrong.yaml" <<'YAML'
kinds:
  - name: GB300
    gpu: NVIDIA GB300
    labels: [self-hosted, linux, ARM64, gb300]
    platform: linux_aarch64
  - name: H100
    gpu: NVIDIA H100
    labels: [self-hosted, linux, x64, h100]
    platform: linux_x86_64
YAML
for kind in GB300 H100; do
  tb matrix --matrix "$work/pre.yaml" --runners "$work/wrong.yaml" --kind "$kind" \
    --backend current --store "$work/wrong.sqlite" --no-report --fail-on none
done
ls "$work/wrong.sqlite" 2>&1

echo "=== 3. the page with a declared kind that never reported"
sed -n '/^kinds:/,/shards:/p' runners.yaml > "$work/two.yaml"
sed -n '/^  - name: H100/,$p' "$work/wrong.yaml" >> "$work/two.yaml"
cat "$work/two.yaml"
tb report --store "$work/kinds.sqlite" --runners "$work/two.yaml" --out "$work/page"
python3 - "$work/page/index.html" <<'PY'
import html, re, sys
text = open(sys.argv[1], encoding="utf-8").read()
plain = html.unescape(re.sub(r"<[^>]+>", " ", text))
for line in (" ".join(plain.split())).split(". "):
    if "H100" in line or "report" in line.lower():
        print("page:", line[:300])
PY

echo "=== 4. preflight --backend docker through the toolkit's stand-in"
mkdir -p /opt/dk /opt/h200
tar -C /opt/dk -xJf "$C/docker-bin.tar.xz" || exit 1
cp tests/gpu/nvidia_standin.py /opt/h200/
py=$(command -v python3)
printf '#!/bin/sh\nexec %s /opt/h200/nvidia_standin.py hook "$@"\n' "$py" \
  > /opt/dk/bin/nvidia-container-runtime-hook
printf '#!/bin/sh\nexec %s /opt/h200/nvidia_standin.py runtime --runc /opt/dk/bin/runc --driver-libs %s -- "$@"\n' \
  "$py" "$DRIVER_LIBS" > /opt/dk/bin/nvidia-standin-runtime
chmod +x /opt/dk/bin/nvidia-container-runtime-hook /opt/dk/bin/nvidia-standin-runtime
mkdir -p /etc/docker
cat > /etc/docker/daemon.json <<'JSON'
{"runtimes": {"nvidia": {"path": "/opt/dk/bin/nvidia-standin-runtime"}},
 "default-runtime": "nvidia", "storage-driver": "overlay2"}
JSON
LD_LIBRARY_PATH=/opt/dk/lib setsid -f dockerd --iptables=false --ip-forward=false \
  --ip-masq=false --bridge=none --userland-proxy=false > /tmp/dockerd.log 2>&1 < /dev/null
for _ in $(seq 60); do docker info > /dev/null 2>&1 && break; sleep 1; done
docker version --format 'dockerd {{.Server.Version}}' || { tail -30 /tmp/dockerd.log; exit 1; }
# A small image: the machine's own shell, ldconfig and C library (the stand-in binds nvidia-smi
# and the driver's libraries into it, as the toolkit does).
python3 - "$work/rootfs.list" <<'PY'
import os, shutil, subprocess, sys
paths = {"/bin/sh", "/bin/dash", "/usr/bin/dash", "/sbin/ldconfig", "/sbin/ldconfig.real",
         "/usr/sbin/ldconfig", "/etc/ld.so.conf"}  # Ubuntu: ldconfig wraps ldconfig.real
for binary in ("/bin/sh", shutil.which("nvidia-smi") or "/bin/sh"):  # and what nvidia-smi needs
    out = subprocess.run(["ldd", binary], capture_output=True, text=True).stdout
    paths |= {p for p in out.split() if p.startswith("/") and "nvidia" not in p}
for p in list(paths):
    if os.path.islink(p):
        paths.add(os.path.realpath(p))
with open(sys.argv[1], "w") as fh:
    fh.write("\n".join(sorted(p for p in paths if os.path.exists(p))) + "\n")
PY
tar -C / -chf - -T "$work/rootfs.list" 2>/dev/null | docker import - torchbisect/smi:h200
tb preflight --backend docker --image torchbisect/smi:h200
tb preflight --flags="--backend venv"
docker ps -a --format '{{.Names}} {{.Status}}'

cp "$work/kinds.sqlite" "$OUT/kinds.sqlite" 2>/dev/null
cp "$work/page/index.html" "$OUT/page.html" 2>/dev/null
