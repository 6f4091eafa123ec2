#!/usr/bin/env bash
# Harness on the lent H200 (issue 25): the docker backend on a real GPU, with no registry, no
# network and no NVIDIA Container Toolkit there.  Carried in .gpu-carry/ (made here by
# tests/gpu/docker_pack.sh): docker-bin.tar.xz (Debian's dockerd, docker, containerd, shim, runc,
# tini, libdevmapper), whl/ (docker, pydantic, uv for torchbisect), p00/ … p08/ (the torch wheel
# in 60 MB parts: carry `.gpu-carry/pNN`, one per call, back to back while the machine is warm;
# a machine given back in between loses them all).
#
#   h200_docker.sh up      unpack, start dockerd with the toolkit's stand-in, import the image,
#                          check the GPU through the product's own docker code, build the runner,
#                          probe the preinstalled cell in a container
#   h200_docker.sh part    keep the carried wheel part in /tmp/parts (the machine stays warm)
#   h200_docker.sh final   rebuild the wheel; the same matrix with --backend venv, then docker;
#                          compare their verdicts; bench (reports/bench/docker.json)
# Everything it writes for us lands in $OUT.
set -uo pipefail
export PYTHONUNBUFFERED=1 PIP_NO_INDEX=1 UV_OFFLINE=1 PATH=/opt/dk/bin:$PATH
export PYTHONPATH=$PWD/src
C=.gpu-carry
IMAGE=torchbisect/h200:torch-2.11.0
DRIVER_LIBS=/usr/local/nvidia/lib64
MATRIX=tests/gpu/h200.docker.matrix.yaml

up() {
  set -x
  python3 -m pip install -q --no-index --no-deps --no-compile "$C"/whl/*.whl || return 1
  mkdir -p /opt/dk /opt/ncclstub /opt/h200
  tar -C /opt/dk -xJf "$C/docker-bin.tar.xz" || return 1
  gcc -shared -fPIC -o /opt/ncclstub/libncclstub.so tests/gpu/nccl_stub.c || return 1
  # The stand-in for the NVIDIA Container Toolkit (see nvidia_standin.py).
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
  docker info 2>&1 | grep -E "Server Version|Storage Driver|Cgroup|Runtimes|Default Runtime"
  docker version --format '{{.Server.Version}}' || { tail -30 /tmp/dockerd.log; return 1; }
  python3 -c 'import ensurepip, venv; print("python3 has venv and ensurepip")'
  # The image: this machine's python + torch 2.11.0 (image_rootfs.py), imported, no registry.
  python3 tests/gpu/image_rootfs.py /tmp/img.list /opt/ncclstub
  began=$(date +%s%N)
  tar -C / --null --no-recursion -T /tmp/img.list --transform "$(cat /tmp/img.list.xform)" -cf - \
    2> /tmp/tar.err | docker import --change "ENV $(cat /tmp/img.list.env)" \
      --change "ENV LANG=C.UTF-8" - "$IMAGE"
  echo "image import: $(( ($(date +%s%N) - began) / 1000000 )) ms"; tail -3 /tmp/tar.err
  docker image ls
  set +x
  python3 tests/gpu/docker_gpu_check.py "$IMAGE" /tmp/check 2>&1
  # The runner image (containers/Dockerfile) on the imported image, as the wheel cell will.
  python3 - <<PY 2>&1
from pathlib import Path
import docker
from torchbisect.backends.docker_image import RunnerImages
images = RunnerImages(lambda: docker.from_env(timeout=300), ca_bundle=None, timeout=600)
print("runner image:", images.runner("$IMAGE", Path("/tmp/check/runner-build.log")))
PY
  tail -5 /tmp/check/runner-build.log
  printf 'defaults: {trials: 20}\npreinstalled: {image: "%s"}\n' "$IMAGE" > /tmp/pre.yaml
  python3 -m torchbisect matrix --backend docker --matrix /tmp/pre.yaml \
    --store /tmp/pre/results.sqlite --out /tmp/pre --fail-on none 2>&1
}

part() {
  mkdir -p /tmp/parts && cp "$C"/p*/* /tmp/parts/ && ls -la /tmp/parts
  docker ps -a --format '{{.Names}} {{.Status}}' | head -3
}

final() {
  local wheels=/tmp/h200/wheels w=torch-2.12.0-cp312-cp312-manylinux_2_28_x86_64.whl
  mkdir -p $wheels
  [ -s $wheels/$w ] || cat /tmp/parts/t2120_* > $wheels/$w
  (cd $wheels && sha256sum -c --ignore-missing "$OLDPWD/tests/gpu/wheels.sha256") || return 1
  nvidia-smi --query-gpu=index,name,driver_version,uuid --format=csv | tee /tmp/runs/gpus.txt
  for backend in venv docker; do
    began=$(date +%s%N)
    python3 -m torchbisect matrix --backend $backend --matrix $MATRIX --force --fail-on none \
      --store /tmp/runs/$backend/results.sqlite --out /tmp/runs/$backend 2>&1 \
      | tee /tmp/runs/$backend.log
    echo "$backend $(( ($(date +%s%N) - began) / 1000000 ))" >> /tmp/runs/walls.txt
  done
  python3 tests/gpu/docker_compare.py /tmp/runs/venv/results.sqlite \
    /tmp/runs/docker/results.sqlite | tee /tmp/runs/venv-vs-docker.txt
  python3 tests/gpu/docker_bench.py /tmp/runs "$IMAGE" /tmp/runs/docker.json
}

mkdir -p /tmp/runs
case "${1:-}" in
  up) up 2>&1 | tee /tmp/up.log; cp /tmp/up.log /tmp/dockerd.log "$OUT"/ 2>/dev/null
      tar -czf "$OUT/up.tgz" -C /tmp check pre img.list.env tar.err 2>/dev/null ;;
  part) part ;;
  final) final 2>&1 | tee /tmp/runs/final.log
         tar -czf "$OUT/runs.tgz" -C /tmp runs; cp /tmp/dockerd.log "$OUT"/ ;;
  *) echo "usage: $0 up|part|final" >&2; exit 2 ;;
esac
