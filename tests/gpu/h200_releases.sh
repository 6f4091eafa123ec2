#!/usr/bin/env bash
# Harness on the lent H200 (README.md here): every release since 2.2.2 measured by torchbisect.
#   setup  carry: [".gpu-carry/setup"]  tools, wheels, the repository's copy and the evidence store
#          go to $H; the NCCL stub is built; h200_releases_daemon.py starts (setsid)
#   part N carry: [".gpu-carry/sNNN"]   the stream's part N goes to $H/incoming (the daemon reads it)
#   final  wait for the daemon; the store, the cells' logs, the lock and the daemon's log to $OUT
#   status what the daemon has done so far; sync / reprobe V: after a fix to the harness
# Each call prints the daemon's last lines, so a failure is seen at the next call.
set -uo pipefail
H=${H200_RELEASES:-/tmp/h200r}
tail_log() { echo "--- daemon"; tail -n "${1:-4}" "$H/daemon.log" 2>/dev/null; df -h /tmp | tail -1; }
case "${1:-}" in
setup)
  mkdir -p "$H/incoming" "$H/no-triton" "$H/evidence"
  cp -r .gpu-carry/setup "$H/"
  chmod +x "$H"/setup/tools/bin/*
  rm -rf "$H/repo" && mkdir -p "$H/repo" && cp -r src probes tests matrix.yaml pyproject.toml "$H/repo/"
  [ -s "$H/evidence/results.sqlite" ] || cp reports/evidence/results.sqlite "$H/evidence/"
  python3 -m pip install -q --no-index --no-deps --target "$H/site" "$H"/setup/whl/*.whl
  gcc -shared -fPIC -o "$H/libncclstub.so" tests/gpu/nccl_stub.c
  mkdir -p "$H/bin"  # the carried tools, each with its own libraries only (never the machine's)
  for t in zstd zip readelf; do
    command -v $t >/dev/null && echo "machine has $t (the carried one is used: the same bytes)"
    printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' "$H/setup/tools/lib" \
      "$H/setup/tools/bin/$t" > "$H/bin/$t" && chmod +x "$H/bin/$t"
  done
  python3 -c "import zlib, sys; print('python', sys.version.split()[0], 'zlib', zlib.ZLIB_RUNTIME_VERSION)"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  setsid nohup python3 "$H/repo/tests/gpu/h200_releases_daemon.py" > "$H/daemon.out" 2>&1 < /dev/null &
  sleep 1; tail_log ;;
part)
  n=$2; src=.gpu-carry/s$(printf %03d "$n")/part; dst=$H/incoming/s$(printf %03d "$n")
  mkdir -p "$dst" && mv "$src" "$dst/part" && touch "$dst/part.ready"
  echo "part $n: $(stat -c %s "$dst/part") bytes"; tail_log 3 ;;
sync)  # the harness fixed: the daemon's copy of the repository made anew (what runs next uses it)
  cp -r src probes tests matrix.yaml pyproject.toml "$H/repo/" && echo synced; tail_log ;;
reprobe)  # stand-ins and matrix for release $2 again, in the foreground
  python3 "$H/repo/tests/gpu/h200_releases_daemon.py" reprobe "$2"; tail -n 40 "$H/matrix.log"
  tail_log 8 ;;
status)
  tail_log 30; cat "$H/done" 2>/dev/null | tr '\n' ' '; echo; tail -n 5 "$H/daemon.out" ;;
final)
  for _ in $(seq 1 "${2:-480}"); do grep -qx all "$H/done" 2>/dev/null && break; sleep 1; done
  tail_log 60
  cp "$H/evidence/results.sqlite" "$H/daemon.log" "$H/matrix.log" "$OUT/"
  cp "$H/now.matrix.lock.json" "$OUT/h200.releases.matrix.lock.json" 2>/dev/null
  tar -C "$H/evidence" -czf "$OUT/logs.tgz" logs
  tar -C "$H" -czf "$OUT/standins.tgz" standins 2>/dev/null
  ls -la "$OUT" ;;
*) echo "usage: $0 setup|part N|status|sync|reprobe V|final [SECONDS]" >&2; exit 2 ;;
esac
