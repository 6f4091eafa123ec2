#!/usr/bin/env bash
# Harness on the lent H200 (README.md here): every release since 2.2.2 measured by torchbisect.
#   lib    carry: [".gpu-carry/nvshmem"]  NVSHMEM 3's host library (cumsum run: 2.15.0), first
#   setup  carry: [".gpu-carry/setup"]  tools, wheels, the repository's copy and the evidence store
#          go to $H; the NCCL stub is built; h200_releases_daemon.py starts (setsid)
#   part N carry: [".gpu-carry/sNNN"]   the stream's part N goes to $H/incoming (the daemon reads it)
#   final  wait for the daemon; the store, the cells' logs, the lock and the daemon's log to $OUT
#   status what the daemon has done so far; sync / reprobe V: after a fix to the harness
#   bisect GOOD BAD  (H200_RELEASES_RUN=cumsum, after final) `torchbisect bisect --find-fix` over
#          the rebuilt releases, once with the probe and once with the same file as --script;
#          release_env/ gives each release its libraries
#   timing V…  (after final) the stale_replay probe's wall per build on each V (issue 54.3):
#          `matrix --force` three times on one venv: cold, again (its compile caches kept in it),
#          and again without Inductor's cache (Triton's kept): what each cache saves
#   bench GOOD BAD  (after final) `torchbisect bench --parts loop`: bisect --find-fix --script
#          with the cumsum reproducer against the hand loop over the same builds (issue 54.2);
#          BENCH_VARIANTS="shipped no-prefetch no-bytecode" runs it once per tool_variants.py
#          variant, each to $OUT/<variant>/
# GPU_RELEASES_RUN (or H200_RELEASES_RUN: lazy_clone, the default, cumsum, or h100) chooses the
# run: old_releases.RUNS. The h100 run is a kind's shard: `matrix --runners runners.yaml --kind
# H100` into $H/evidence/shard.sqlite, which starts empty.
# Each call prints the daemon's last lines, so a failure is seen at the next call.
set -uo pipefail
H=${H200_RELEASES:-/tmp/h200r}
tail_log() { echo "--- daemon"; tail -n "${1:-4}" "$H/daemon.log" 2>/dev/null; df -h /tmp | tail -1; }
case "${1:-}" in
lib)  # carry: [".gpu-carry/nvshmem"], before setup (with the tools it would pass 64 MiB)
  mkdir -p "$H" && mv .gpu-carry/nvshmem/libnvshmem_host.so.3.zst "$H/" && ls -la "$H" ;;
setup)
  mkdir -p "$H/incoming" "$H/no-triton" "$H/evidence"
  cp -r .gpu-carry/setup "$H/"
  chmod +x "$H"/setup/tools/bin/*
  rm -rf "$H/repo" && mkdir -p "$H/repo" && cp -r src probes tests matrix.yaml runners.yaml pyproject.toml "$H/repo/"
  run=${GPU_RELEASES_RUN:-${H200_RELEASES_RUN:-lazy_clone}}
  [ "$run" = h100 ] || [ -s "$H/evidence/results.sqlite" ] || cp reports/evidence/results.sqlite "$H/evidence/"
  python3 -m pip install -q --no-index --no-deps --target "$H/site" "$H"/setup/whl/*.whl
  gcc -shared -fPIC -o "$H/libncclstub.so" tests/gpu/nccl_stub.c
  echo "run: $run"
  mkdir -p "$H/bin"  # the carried tools, each with its own libraries only (never the machine's)
  for t in zstd zip readelf; do
    command -v $t >/dev/null && echo "machine has $t (the carried one is used: the same bytes)"
    printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' "$H/setup/tools/lib" \
      "$H/setup/tools/bin/$t" > "$H/bin/$t" && chmod +x "$H/bin/$t"
  done
  if [ -f "$H/libnvshmem_host.so.3.zst" ]; then  # 2.15.0 links NVSHMEM 3 (the `lib` call)
    "$H/bin/zstd" -q -d -f "$H/libnvshmem_host.so.3.zst" -o "$H/libnvshmem_host.so.3"
  fi
  python3 -c "import zlib, sys; print('python', sys.version.split()[0], 'zlib', zlib.ZLIB_RUNTIME_VERSION)"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  setsid nohup python3 "$H/repo/tests/gpu/h200_releases_daemon.py" > "$H/daemon.out" 2>&1 < /dev/null &
  sleep 1; tail_log ;;
part)
  n=$2; src=.gpu-carry/s$(printf %03d "$n")/part; dst=$H/incoming/s$(printf %03d "$n")
  mkdir -p "$dst" && mv "$src" "$dst/part" && touch "$dst/part.ready"
  echo "part $n: $(stat -c %s "$dst/part") bytes"; tail_log 3 ;;
sync)  # the harness fixed: the daemon's copy of the repository made anew (what runs next uses it)
  cp -r src probes tests matrix.yaml runners.yaml pyproject.toml "$H/repo/" && echo synced; tail_log ;;
reprobe)  # stand-ins and matrix for release $2 again, in the foreground
  python3 "$H/repo/tests/gpu/h200_releases_daemon.py" reprobe "$2"; tail -n 40 "$H/matrix.log"
  tail_log 8 ;;
status)
  tail_log 30; cat "$H/done" 2>/dev/null | tr '\n' ' '; echo; tail -n 5 "$H/daemon.out" ;;
final)
  until=${FINAL_UNTIL:-all}  # e.g. probed-2.7.1 when only the first parts were carried
  for _ in $(seq 1 "${2:-480}"); do grep -qx "$until" "$H/done" 2>/dev/null && break; sleep 1; done
  tail_log 60
  cp "$H"/evidence/*.sqlite "$H/daemon.log" "$H/matrix.log" "$OUT/"
  cp "$H/now.matrix.lock.json" "$OUT/h200.releases.matrix.lock.json" 2>/dev/null
  cp "$H"/now.matrix.locks/*.lock.json "$OUT/" 2>/dev/null  # a kind's run: <kind>.lock.json
  tar -C "$H/evidence" -czf "$OUT/logs.tgz" logs
  tar -C "$H" -czf "$OUT/standins.tgz" standins 2>/dev/null
  ls -la "$OUT" ;;
bisect)  # the fix, found by the tool over the rebuilt releases: probe, then --script
  good=$2; bad=$3; shift 3
  export PYTHONPATH="$PWD/tests/gpu/release_env:$PWD/src:$H/site" PATH="$H/site/bin:$PATH" \
    PYTHONUNBUFFERED=1 UV_OFFLINE=1 PIP_NO_INDEX=1 UV_CACHE_DIR="$H/uv-cache" UV_LINK_MODE=copy \
    H200_RELEASES="$H"
  common=(--bad "$bad" --good "$good" --find-fix --cuda auto --index-url "$H/wheels" --backend venv --overlay
          --python 3.12 --no-github --workdir "$H/bisect-work" "$@")
  for how in probe script; do
    if [ $how = probe ]; then decide=(--probe cumsum_64bit); else
      decide=(--script "python $PWD/probes/cumsum_64bit.py"); fi
    start=$(date +%s)
    python3 -m torchbisect bisect "${common[@]}" "${decide[@]}" --store "$H/bisect-$how.sqlite" \
      --json "$OUT/$how-bisect.json" --markdown "$OUT/$how-bisect.md" 2>&1 | tee "$OUT/$how-bisect.log"
    echo "$how bisect exit: ${PIPESTATUS[0]} in $(( $(date +%s) - start )) s" | tee -a "$OUT/$how-bisect.log"
    rm -rf "$H/bisect-work/venvs" "$H/uv-cache"
  done
  cp "$H"/bisect-*.sqlite "$OUT/" ;;
timing)  # issue 54.3: stale_replay cold, then again on the same venv (its compile caches kept)
  shift
  export PYTHONPATH="$PWD/src:$H/site" PATH="$H/site/bin:$PATH" PYTHONUNBUFFERED=1 UV_OFFLINE=1 \
    PIP_NO_INDEX=1 UV_CACHE_DIR="$H/uv-cache" UV_LINK_MODE=copy
  sed -e "s#\$H#$H#g" -e '/cumsum_64bit: {timeout/d' "tests/gpu/$(python3 -c 'import sys; sys.path.insert(0, "tests/gpu"); import old_releases as o; print(o.RUN.matrix)')" > "$H/timing.yaml"
  for v in "$@"; do
    for pass in cold rerun triton-only; do  # triton-only: Inductor's cache gone, Triton's kept
      [ $pass = triton-only ] && rm -rf "$H"/timing-work/venvs/stable-$v-*/compile-cache/inductor
      start=$(date +%s.%N)
      python3 -m torchbisect matrix --backend venv --matrix "$H/timing.yaml" --cells "stable-$v-*" \
        --force --no-report --store "$H/timing.sqlite" --out "$H/timing" --workdir "$H/timing-work" \
        --fail-on none > "$H/timing-$v-$pass.log" 2>&1
      echo "$v $pass: exit $? in $(python3 -c "import time; print(round(time.time() - $start, 1))") s (the matrix call)"
      grep -hE "import|compile|capture|side_stream|verdict|probed|seconds" "$H/timing-$v-$pass.log" | tail -n 12
    done
    du -sh "$H"/timing-work/venvs/*/compile-cache 2>/dev/null
  done | tee "$OUT/timing.txt"
  python3 - "$H/timing.sqlite" <<'PY' | tee -a "$OUT/timing.txt"
import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
for cell, verdict, install, probe, doc in db.execute(
        "SELECT cell_id, verdict, seconds_install, seconds_probe, probe_json FROM runs ORDER BY id"):
    d = json.loads(doc or "{}")
    cases = {k: (v.get("seconds"), v.get("wall_seconds")) for k, v in (d.get("cases") or {}).items()}
    print(cell, verdict, f"install {install:.1f} s, probe {probe:.1f} s", "doc:",
          {k: v for k, v in d.items() if k not in ("cases", "env", "schema")}, cases)
PY
  tar -C "$H/timing" -czf "$OUT/timing-logs.tgz" logs 2>/dev/null; cp "$H/timing.sqlite" "$OUT/" ;;
bench)  # issue 54.2: the tool against the hand loop over the rebuilt releases (cumsum reproducer)
  good=$2; bad=$3; shift 3
  export PYTHONPATH="$PWD/tests/gpu/release_env:$PWD/src:$H/site" PATH="$H/site/bin:$PATH" \
    PYTHONUNBUFFERED=1 UV_OFFLINE=1 PIP_NO_INDEX=1 H200_RELEASES="$H"
  unset UV_LINK_MODE  # uv's default (hard links from its cache), as a user's loop has it
  rm -rf "$H/work" "$H/uv-cache" "$H/timing-work"; df -h /tmp | tail -1
  # BENCH_VARIANTS="shipped no-prefetch no-bytecode": once per variant of tool_variants.py (the
  # tool with a step switched off, the loop again beside it), each to $OUT/<variant>/
  for variant in ${BENCH_VARIANTS:-shipped}; do
    out=$OUT; [ -z "${BENCH_VARIANTS:-}" ] || out=$OUT/$variant
    mkdir -p "$out"; echo "== variant $variant"
    BENCH_TOOL_VARIANT=$variant python3 -m torchbisect bench --parts loop --loop-good "$good" \
      --loop-bad "$bad" --loop-index "$H/wheels" --loop-script "$PWD/probes/cumsum_64bit.py" \
      --loop-workdir "$H/loop-bench" --out "$out" "$@" 2>&1 | tee "$out/bench.log"
    echo "bench exit ($variant): ${PIPESTATUS[0]}"
  done ;;
*) echo "usage: $0 setup|part N|status|sync|reprobe V|final [SECONDS]|bisect GOOD BAD [FLAGS]|timing V…|bench GOOD BAD" >&2; exit 2 ;;
esac
