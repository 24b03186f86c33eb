#!/usr/bin/env bash
# Session 2026-11-29e, call 2: (1) the rotary table computed on the CPU (work tree) or on the GPU (.ab/base = HEAD):
# the 20b's build alone in fresh processes, then bench coldstart in turns; (2) bf16 (dense) experts of Qwen3-30B-A3B
# and Mixtral-8x7B have no tuned file on any device (the fallback: 16-row plain tiles of 64 columns, K steps of 256,
# 4 warps): a sweep of decode-sized 8-row transposed tiles, each GEMM alone, the fallback timed beside ("tuned").
set -uo pipefail
source scripts/device/env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -m quickmoe make-checkpoint /tmp/gpt-oss-20b --preset gpt-oss-20b -q > "$OUT/make_20b.log" 2>&1; echo "20b made: exit $? ($SECONDS s)"
for turn in a b c; do
  for tree in new base; do
    root=$PWD; [ $tree != new ] && root=$PWD/.ab/base
    PYTHONPATH=/tmp/site:$root/src timeout 60 python3 .ab/build_probe.py /tmp/gpt-oss-20b > "$OUT/build_probe_${tree}_$turn.txt" 2>&1
    echo "build $tree $turn: $(grep -E '^cuda build \(first\)' "$OUT/build_probe_${tree}_$turn.txt")"
  done
done
for turn in a b; do
  for tree in new base; do
    root=$PWD; [ $tree != new ] && root=$PWD/.ab/base
    PYTHONPATH=/tmp/site:$root/src timeout 80 python3 -m quickmoe bench coldstart /tmp/gpt-oss-20b -n 3 --device cuda \
      --import-floor --json "$OUT/cold_20b_${tree}_$turn.json" > "$OUT/cold_20b_${tree}_$turn.txt" 2>&1
    echo "coldstart $tree $turn: exit $? ($SECONDS s)"
    grep -E "^(imports|build|load|process|kv_cache|capture|first_token|weights_ready|total) |weights_ready adds" "$OUT/cold_20b_${tree}_$turn.txt" | cut -c1-160
  done
done
sweep() {  # name shape tokens block_m limit_s
  local name=$1 shape=$2 tokens=$3 bm=$4 limit=$5
  timeout $limit python3 scripts/probes/moe_config_sweep.py --shape $shape --format bf16 --tokens $tokens --block-m $bm \
    --block-n 32,64 --warps 2,4 --block-k 128,256 --stages 3,4 --swap 1 --top 3 --time-tuned \
    --json "$OUT/sweep_$name.json" > "$OUT/sweep_$name.txt" 2>&1
  echo "-- sweep $name exit $? ($SECONDS s)"
}
left=$((575 - SECONDS))
sweep q3_bf16 qwen3-30b-a3b 1,2,4,8,16,32,64 8 $((left * 55 / 100))
sweep mx_bf16 mixtral-8x7b 1,2,4,8,16 8 $((575 - SECONDS))
python3 - "$OUT" <<'PY'
import json, sys, glob, os, re
for f in sorted(glob.glob(f"{sys.argv[1]}/sweep_*.txt")):
    print(os.path.basename(f))
    for line in open(f):
        if " gemm" in line and "tuned" in line:
            m = re.search(r"T=(\d+) block_m (\d+) gemm(\d): tuned (\S+ \S+)", line); head = m.groups() if m else line[:60]
        elif line.startswith("  ") and "us" in line and head:
            print("  T=%s bm%s g%s fallback %s -> %s" % (*head, line.strip())); head = None
PY
cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz . && ls | wc -l
