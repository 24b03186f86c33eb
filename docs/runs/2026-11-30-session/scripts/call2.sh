#!/usr/bin/env bash
# Hot path call 1 (nvidia-h200): dense_gemm with K in parts. Tests on CUDA, the probe (bits of every config at
# every row count; us against cuBLAS and the base tree's kernel), then the batch-1 step A/B in turns
# (new = o_proj with K in parts; qkv = new + QKV by dense_gemm in decode steps; base = 0e7349a).
set -uo pipefail
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
s=$(date +%s)
timeout -k 5 240 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_dense_gemm.py > "$OUT/dense_tests.log" 2>&1
echo "dense tests: exit $? in $(( $(date +%s) - s )) s: $(tail -1 "$OUT/dense_tests.log")" | tee -a "$OUT/timeline.txt"
s=$(date +%s)
timeout -k 5 300 python3 scripts/probes/dense_gemm_probe.py --rows 1,4,16,64,128,256 --base .ab/base_dense_gemm.py \
  --json "$OUT/dense_probe.json" > "$OUT/dense_probe.log" 2>&1
echo "dense probe: exit $? in $(( $(date +%s) - s )) s" | tee -a "$OUT/timeline.txt"
grep -E "^bits|^\|" "$OUT/dense_probe.log"
s=$(date +%s)
AB_RUNS="new base qkv new base qkv" timeout -k 5 330 bash scripts/device/hotpath.sh ab-profile > "$OUT/ab_profile_run.log" 2>&1
echo "ab-profile: exit $? in $(( $(date +%s) - s )) s" | tee -a "$OUT/timeline.txt"
grep -E "^-- |decode at batch 1: median|batch 1 by op family" "$OUT/ab_profile.txt" | cut -c1-220
