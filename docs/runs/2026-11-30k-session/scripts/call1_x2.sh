#!/usr/bin/env bash
# Session 2026-11-30k call 1 (nvidia-h200-x2). The register-operand MoE GEMMs with 256 weight rows a program (two
# warpgroups sharing each step's activations) beside 128, alone in a graph (moe_register_rows_probe.py --wide):
# GPU 0 gpt-oss-20b at T = 64-1,024, GPU 1 the GPU tests of the register kernels, then gpt-oss-120b at T = 128-1,024.
set -uo pipefail
t0=$(date +%s)
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
export PYTHONPATH=src
( CUDA_VISIBLE_DEVICES=0 timeout -k 10 420 python3 scripts/probes/moe_register_rows_probe.py --shapes gpt-oss-20b \
    --tokens-20b 64,128,256,512,1024 --wide 16,32,64 --stages 3 --json "$OUT/rows_20b.json" > "$OUT/rows_20b.txt" 2>&1
  echo "probe 20b: exit $? at $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt" ) &
p0=$!
( CUDA_VISIBLE_DEVICES=1 timeout -k 10 200 python3 -m pytest -q -m gpu tests/kernels/test_moe_gemm_register.py \
    > "$OUT/gpu_tests.txt" 2>&1
  echo "gpu tests: exit $? at $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
  CUDA_VISIBLE_DEVICES=1 timeout -k 10 300 python3 scripts/probes/moe_register_rows_probe.py --shapes gpt-oss-120b \
    --tokens-120b 128,256,512,1024 --wide 16,32,64 --stages 3 --json "$OUT/rows_120b.json" > "$OUT/rows_120b.txt" 2>&1
  echo "probe 120b: exit $? at $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt" ) &
p1=$!
while kill -0 $p0 2>/dev/null || kill -0 $p1 2>/dev/null; do sleep 2; done
{ tail -3 "$OUT/gpu_tests.txt"; grep -E "^gpt-oss.*T .*:.*=" "$OUT/rows_20b.txt" "$OUT/rows_120b.txt";
  grep -E "Error|error" "$OUT/rows_20b.txt" "$OUT/rows_120b.txt" | head -5; } >> "$OUT/summary.txt"
echo "total $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
cat "$OUT/summary.txt"
