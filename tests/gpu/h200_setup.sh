#!/usr/bin/env bash
# Harness on the lent H200 (see README.md here): rebuild the carried wheels, check them against
# wheels.sha256, build the NCCL stub, and install nox plus torchbisect's dependencies offline.
set -euo pipefail
H=/tmp/h200
mkdir -p "$H/wheels"
for v in 2.12.0 2.13.0 2.14.1 2.15.0; do
  f="$H/wheels/torch-$v-cp312-cp312-manylinux_2_28_x86_64.whl"
  parts=(/tmp/parts/t$(echo "$v" | tr -d .)_*)
  [ -e "${parts[0]}" ] || continue  # not carried this time
  [ -s "$f" ] || cat "${parts[@]}" > "$f"
done
(cd "$H/wheels" && sha256sum -c --ignore-missing "$OLDPWD/tests/gpu/wheels.sha256")
gcc -shared -fPIC -o "$H/libncclstub.so" tests/gpu/nccl_stub.c
[ -s "$H/libnvshmem_host.so.3" ] || gunzip -c /tmp/parts/nvshmem.gz > "$H/libnvshmem_host.so.3"
python3 -m pip install -q --no-index --find-links "${WHEELS:-.whl}" nox
