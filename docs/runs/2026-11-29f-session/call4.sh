#!/usr/bin/env bash
# Session 2026-11-29f, call 4 (issues 16, 18): --compile on with the new defaults (collector paused, Triton key
# cached) against both off, in turns; then Qwen3-30B-A3B NVFP4's cold start with the defaults, against the floor.
set -uo pipefail
source scripts/device/env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -m quickmoe make-checkpoint /tmp/gpt-oss-20b --preset gpt-oss-20b -q > "$OUT/make_20b.log" 2>&1
echo "20b made: exit $? ($SECONDS s)"
comp() {  # comp NAME ENV...
  local name=$1; shift
  [ $SECONDS -gt 330 ] && { echo "skipped $name: $SECONDS s gone"; return; }
  env "$@" timeout 170 python3 -m quickmoe bench coldstart /tmp/gpt-oss-20b -n 2 --device cuda --compile on \
    --json "$OUT/compile_$name.json" > "$OUT/compile_$name.txt" 2>&1
  echo "== compile $name exit $? ($SECONDS s)"
  python3 - "$OUT/compile_$name.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for kind, runs in d["reports"].items():
  for r in runs:
    c = r.get("info", {}).get("compile") or {}
    p = r["phases"]
    print("  %-14s imports %.3f compile %.3f total %.3f | %s" % (kind, p["imports"], p.get("compile") or -1, r["total"],
          {k: round(c[k], 3) for k in ("imports_s", "dynamo_s", "backend_s", "key_s", "warmup_s") if isinstance(c.get(k), (int, float))}))
PY
}
comp defaults_a
comp off_a QUICKMOE_STARTUP_GC=normal QUICKMOE_TRITON_KEY_CACHE=0
if [ $SECONDS -lt 300 ]; then
  python3 -m quickmoe make-checkpoint /tmp/q3nvfp4 --preset qwen3-30b-a3b --weights nvfp4 -q > "$OUT/make_q3.log" 2>&1
  echo "q3 made: exit $? ($SECONDS s)"
fi
if [ -f /tmp/q3nvfp4/config.json ] && [ $SECONDS -lt 440 ]; then
  timeout $((560 - SECONDS)) python3 -m quickmoe bench coldstart /tmp/q3nvfp4 -n 3 --device cuda --import-floor \
    --json "$OUT/cold_q3nvfp4_defaults.json" > "$OUT/cold_q3nvfp4_defaults.txt" 2>&1
  echo "== q3 coldstart exit $? ($SECONDS s)"; grep -E "^(imports|build|load|process|weights_ready|total) |import torch alone" "$OUT/cold_q3nvfp4_defaults.txt"
fi
cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz . && ls | wc -l
