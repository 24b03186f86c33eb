#!/usr/bin/env bash
# Session 2026-11-29h, call 2 (issue 18, Qwen3 FP8 decode): the FP8 dense GEMM with K in parts (the work tree)
# against d2ee7c4 (.ab/base): its tests on CUDA, the probe's table for both trees, then Qwen3-30B-A3B FP8's
# bench generate (batch-1 decode step, decode steps at 64) in turns.
set -uo pipefail
source scripts/device/env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_fp8_gemm.py > "$OUT/tests.log" 2>&1
echo "tests: $(tail -1 "$OUT/tests.log") ($SECONDS s)"; grep -E '^(FAILED|ERROR)|^E  ' "$OUT/tests.log" | head -8
for turn in new base; do
  pp=$PWD; [ $turn = base ] && pp=$PWD/.ab/base
  PYTHONPATH=/tmp/site:$pp/src timeout 90 python3 $pp/scripts/probes/fp8_gemm_probe.py --tokens 1,4,16,64 \
    --json "$OUT/probe_$turn.json" > "$OUT/probe_$turn.txt" 2>&1
  echo "== probe $turn exit $? ($SECONDS s)"; cat "$OUT/probe_$turn.txt" | cut -c1-80
done
python3 -m quickmoe make-checkpoint /tmp/q3fp8 --preset qwen3-30b-a3b --weights fp8 -q > "$OUT/make_q3fp8.log" 2>&1
echo "checkpoint: exit $? ($SECONDS s)"
gen() {  # tree turn
  [ $SECONDS -gt 480 ] && { echo "skipping gen $1 $2: $SECONDS s gone"; return; }
  local root=$PWD; [ "$1" != new ] && root=$PWD/.ab/$1
  local log="$OUT/gen_q3fp8_$1_$2.log"
  PYTHONPATH=/tmp/site:$root/src timeout 110 python3 -m quickmoe bench generate /tmp/q3fp8 --num-prompts 64 \
    --input-len 1000 --output-len 64 --json "$OUT/gen_q3fp8_$1_$2.json" > "$log" 2>&1
  echo "-- gen $1 $2 exit $? ($SECONDS s)"
  grep -E '^decode at batch 1: median|^decode step at batch|^throughput run by step' "$log" | cut -c1-260
}
gen new a; gen base a; gen new b; gen base b
cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz . && ls | wc -l
