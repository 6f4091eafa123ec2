#!/usr/bin/env bash
# Harness, run on a development machine (Debian bookworm, network): what the lent H200 needs for
# tests/gpu/h200_docker.sh, in DEST (default .gpu-carry, git-ignored), for the device tool to carry:
#   docker-bin.tar.xz  Debian's docker.io, containerd, runc and tini binaries and libdevmapper
#                      (`apt-get download` + `dpkg -x`; ~37 MB, carried in one call)
#   whl/               torchbisect's dependencies that the H200's python lacks, and uv
#   p00/ … p08/        torch 2.12.0 cp312 (PyPI, checked against wheels.sha256) in 60 MB parts,
#                      one folder per call (`carry: [".gpu-carry/p00"]`, then p01 …)
set -euo pipefail
DEST=$(realpath -m "${1:-.gpu-carry}")
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
mkdir -p "$DEST/whl"
(cd "$work" && apt-get download docker.io containerd runc tini libdevmapper1.02.1)
for f in "$work"/*.deb; do dpkg -x "$f" "$work/x"; done
mkdir -p "$work/dk/bin" "$work/dk/lib"
x=$work/x
cp $x/usr/sbin/dockerd $x/usr/bin/docker $x/usr/sbin/docker-proxy $x/usr/bin/containerd \
  $x/usr/bin/containerd-shim-runc-v2 $x/usr/sbin/runc $x/usr/bin/tini-static "$work/dk/bin/"
ln -sf tini-static "$work/dk/bin/docker-init"   # dockerd runs `init: true` containers with it
cp $x/lib/x86_64-linux-gnu/libdevmapper.so.1.02.1 "$work/dk/lib/"
tar -C "$work/dk" -cf - . | xz -9 -T0 > "$DEST/docker-bin.tar.xz"
pip=(env PIP_CONFIG_FILE=/dev/null python3 -m pip download -q --no-deps --only-binary=:all:
     --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64
     --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64)
"${pip[@]}" -d "$DEST/whl" docker==7.1.0 pydantic==2.14.4 pydantic-core==2.50.5 \
  annotated-types==0.8.0 typing-inspection==0.4.5 typing-extensions==4.16.0 uv==0.13.9
"${pip[@]}" -d "$work" torch==2.12.0
(cd "$work" && sha256sum -c --ignore-missing "$here/wheels.sha256")
split -b 60000000 -d "$work/torch-2.12.0-cp312-cp312-manylinux_2_28_x86_64.whl" "$work/t2120_"
for part in "$work"/t2120_*; do
  mkdir -p "$DEST/p${part##*_}" && mv "$part" "$DEST/p${part##*_}/"
done
rm -rf "$work"
ls -la "$DEST" "$DEST"/p*
