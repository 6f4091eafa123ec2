#!/usr/bin/env bash
# Make a Docker engine answer and give it an offline base image, for the docker backend's tests.
#
# Idempotent: each step is skipped when its result is already there, and says so.
#   1. Debian's docker.io and debootstrap, when missing (needs root and apt).
#   2. dockerd in the background, when no engine answers; wait until it does.
#   3. IMAGE (default torchbisect/base:bookworm): no registry is reachable here, so the base image is
#      a debootstrapped Debian bookworm (python3.11 with venv, pip and headers; gcc and libc headers,
#      which Triton needs to build its launcher) imported with `docker import`.
#   4. TORCH_IMAGE (IMAGE with "-torch" appended to its tag): IMAGE plus the torch 2.13.0+cpu cp311
#      wheel pip-installed into its system python, a stand-in for an NGC image in `preinstalled`
#      and overlay cells.  The wheel: $TORCHBISECT_TEST_WHEEL, else pip's find-links folders (as
#      the tests look for it); skipped when there is none.  Dependencies come from PyPI.
#
# Usage: .ci/docker-setup.sh [IMAGE]
# Env:   DOCKERD_LOG (default /var/log/dockerd.log);
#        CA_BUNDLE for pip in step 4 (default: $SSL_CERT_FILE, else pip's `cert`)
set -euo pipefail

IMAGE=${1:-torchbisect/base:bookworm}
TORCH_IMAGE=${IMAGE}-torch
SUITE=bookworm
DOCKERD_LOG=${DOCKERD_LOG:-/var/log/dockerd.log}

say() { printf 'docker-setup: %s\n' "$*"; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

install_packages() {
    local missing=()
    command -v dockerd >/dev/null || missing+=(docker.io)
    command -v debootstrap >/dev/null || [ -x /usr/sbin/debootstrap ] || missing+=(debootstrap)
    if [ ${#missing[@]} -eq 0 ]; then
        say "docker.io and debootstrap are installed"
        return
    fi
    say "installing ${missing[*]}"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
}

engine_answers() { docker info >/dev/null 2>&1; }

start_engine() {
    if engine_answers; then
        say "the Docker engine answers"
        return
    fi
    say "starting dockerd in the background (log: $DOCKERD_LOG)"
    # setsid: dockerd must outlive this script and not get its terminal's signals.
    as_root setsid dockerd >>"$DOCKERD_LOG" 2>&1 < /dev/null &
    for _ in $(seq 1 60); do
        if engine_answers; then
            say "the Docker engine answers"
            return
        fi
        sleep 1
    done
    say "dockerd did not answer within 60 s; the end of $DOCKERD_LOG:"
    tail -n 20 "$DOCKERD_LOG" >&2 || true
    exit 1
}

build_base_image() {
    if docker image inspect "$IMAGE" >/dev/null 2>&1; then
        say "image $IMAGE exists"
        return
    fi
    local root
    root=$(mktemp -d /tmp/torchbisect-rootfs.XXXXXX)
    # The rootfs holds root-owned device nodes: remove it whatever happens.
    trap 'as_root rm -rf "$root"; trap - RETURN' RETURN
    say "debootstrapping Debian $SUITE into $root (about a minute)"
    as_root debootstrap --variant=minbase \
        --include=python3,python3-venv,python3-pip,python3-dev,gcc,libc6-dev,ca-certificates \
        "$SUITE" "$root" >/dev/null
    as_root rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
    say "importing $root as $IMAGE"
    as_root tar -C "$root" -c . | docker import \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'CMD ["/bin/bash"]' - "$IMAGE" >/dev/null
    say "image $IMAGE is ready ($(docker run --rm "$IMAGE" python3 --version))"
}

torch_wheel() {
    if [ -f "${TORCHBISECT_TEST_WHEEL:-}" ]; then
        printf '%s' "$TORCHBISECT_TEST_WHEEL"
        return
    fi
    local folders
    folders=$(python3 -m pip config list 2>/dev/null | sed -n "s/^[^=]*find-links='\(.*\)'$/\1/p")
    for folder in $folders; do
        for wheel in "$folder"/torch-2.13.0+cpu-cp311-*.whl; do
            [ -f "$wheel" ] && { printf '%s' "$wheel"; return; }
        done
    done
}

ca_bundle() {
    local cert=${CA_BUNDLE:-${SSL_CERT_FILE:-}}
    [ -n "$cert" ] || cert=$(python3 -m pip config get global.cert 2>/dev/null || true)
    [ -f "$cert" ] || cert=/etc/ssl/certs/ca-certificates.crt
    printf '%s' "$cert"
}

build_torch_image() {
    if docker image inspect "$TORCH_IMAGE" >/dev/null 2>&1; then
        say "image $TORCH_IMAGE exists"
        return
    fi
    local box=torchbisect-setup-$$ wheel name cert
    wheel=$(torch_wheel)
    if [ -z "$wheel" ]; then
        say "no torch 2.13.0+cpu wheel (TORCHBISECT_TEST_WHEEL, pip's find-links): not building $TORCH_IMAGE"
        return
    fi
    name=$(basename "$wheel")
    cert=$(ca_bundle)
    trap 'docker rm -f "$box" >/dev/null 2>&1; trap - RETURN' RETURN
    say "installing $name into $TORCH_IMAGE (dependencies from PyPI; CA bundle $cert)"
    # --no-compile, then one import: byte-compiles what an import needs, not all of torch.
    docker run --name "$box" \
        -v "$wheel:/tmp/$name:ro" -v "$cert:/etc/torchbisect/ca-bundle.crt:ro" \
        -e PIP_CERT=/etc/torchbisect/ca-bundle.crt "$IMAGE" sh -c "
            python3 -m pip install -q --no-cache-dir --no-compile --break-system-packages \
                --root-user-action=ignore --disable-pip-version-check /tmp/$name &&
            python3 -c 'import torch' 2>/dev/null"
    docker commit --change 'CMD ["/bin/bash"]' "$box" "$TORCH_IMAGE" >/dev/null
    say "image $TORCH_IMAGE is ready (torch $(docker run --rm "$TORCH_IMAGE" \
        python3 -c 'import torch; print(torch.__version__)' 2>/dev/null))"
}

install_packages
start_engine
build_base_image
build_torch_image
