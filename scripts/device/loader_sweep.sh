#!/usr/bin/env bash
# Loader and prefetch settings in fresh processes (QUICKMOE_LOADER), gpt-oss-20b, on the device machine:
# warm page cache (load phase GB/s against pinned H2D) and dropped page cache (imports, load, weights ready).
# Needs the wheels of scripts/device/fetch_wheels.sh carried in .whl/. Logs under $OUT.
set -uo pipefail
source "$(dirname "$0")/env.sh"
[ -f /tmp/gpt-oss-20b/config.json ] || python3 -m quickmoe make-checkpoint /tmp/gpt-oss-20b --preset gpt-oss-20b -q
summary() {  # summary LABEL JSON
  python3 - "$1" "$2" <<'PY'
import json, sys
label, path = sys.argv[1:]
d = json.load(open(path))
s = d["summary"]["quickmoe"]
rate = d["load_bytes"] / 1e9 / s["load"][1]
h2d = d.get("pinned_h2d_gb_per_s") or float("nan")
print(f"{label:<48} imports {s['imports'][1]:6.2f}  load {s['load'][1]:6.3f} s ({rate:5.1f} GB/s, {100 * rate / h2d:3.0f}% of "
      f"{h2d:.1f})  weights_ready {s['weights_ready'][1]:6.2f} (min {s['weights_ready'][0]:6.2f})  total {s['total'][1]:6.2f}")
PY
}
run() {  # run LABEL LOADER_OPTIONS BENCH_ARGS...
  local label=$1 opts=$2; shift 2
  QUICKMOE_LOADER=$opts python3 -m quickmoe bench coldstart /tmp/gpt-oss-20b --device cuda "$@" \
    --json "$OUT/$label.json" > "$OUT/$label.log" 2>&1 || { echo "$label failed"; tail -5 "$OUT/$label.log"; return; }
  summary "$label [$opts]" "$OUT/$label.json" | tee -a "$OUT/sweep.txt"
}
MODE=${1:-all}
# WARM_SETTINGS: the warm-cache settings to time, "LABEL=OPTIONS" words (OPTIONS as QUICKMOE_LOADER takes them,
# empty for the defaults), in order; WARM_RUNS starts each (default 3).
WARM_SETTINGS=${WARM_SETTINGS:-"default= b32=buffers=32 t12_b24=threads=12,buffers=24 c64=chunk_mib=64"}
if [ "$MODE" != dropped ]; then
  cat /tmp/gpt-oss-20b/*.safetensors > /dev/null
  echo "$(nproc) CPUs" | tee -a "$OUT/sweep.txt"
  for setting in $WARM_SETTINGS; do
    run "warm_${setting%%=*}" "${setting#*=}" -n "${WARM_RUNS:-3}"
  done
fi
if [ "$MODE" != warm ]; then
  QUICKMOE_PREFETCH=0 run dropped_noprefetch "" -n 2 --drop-caches
  run dropped_p2_4m_ra "prefetch_threads=2,prefetch_read_kib=4096,prefetch_readahead=1" -n 2 --drop-caches
  run dropped_p1_2m_nora "prefetch_threads=1,prefetch_read_kib=2048,prefetch_readahead=0" -n 2 --drop-caches
  run dropped_p2_1m_nora "prefetch_threads=2,prefetch_read_kib=1024,prefetch_readahead=0" -n 2 --drop-caches
fi
