#!/usr/bin/env bash
# Session 2026-11-30b call 3 (nvidia-h200): the post-attention norm + router in one kernel (norm_router_route).
# Tests on CUDA; the probe (fused vs two launches); the model A/B in turns against .ab/base (0e5d46c).
set -uo pipefail
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
(python3 -m quickmoe make-checkpoint /tmp/gpt-oss-20b --preset gpt-oss-20b -q > "$OUT/make_ckpt.log" 2>&1) &
mk=$!
s=$(date +%s)
timeout -k 5 200 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_norm_router.py tests/kernels/test_router.py \
  tests/kernels/test_glue_kernels.py tests/models/test_kernel_count.py > "$OUT/tests.log" 2>&1
echo "kernel tests: exit $? in $(( $(date +%s) - s )) s: $(tail -1 "$OUT/tests.log")" | tee -a "$OUT/timeline.txt"
grep -E '^(FAILED|ERROR)' "$OUT/tests.log" | head
s=$(date +%s)
timeout -k 5 120 python3 scripts/probes/norm_router_probe.py --json "$OUT/norm_router_probe.json" \
  > "$OUT/norm_router_probe.log" 2>&1
echo "probe: exit $? in $(( $(date +%s) - s )) s" | tee -a "$OUT/timeline.txt"
grep -v -i warn "$OUT/norm_router_probe.log" | cut -c1-230
wait $mk
s=$(date +%s)
AB_RUNS="new base new base" timeout -k 5 200 bash scripts/device/hotpath.sh ab-profile > "$OUT/ab_profile_run.log" 2>&1
echo "ab-profile: exit $? in $(( $(date +%s) - s )) s" | tee -a "$OUT/timeline.txt"
grep -E "^-- |decode at batch 1: median|by op family" "$OUT/ab_profile.txt" | cut -c1-250
s=$(date +%s)
timeout -k 5 150 env QUICKMOE_TEST_DEVICE=cuda python3 -m pytest -q -p no:cacheprovider tests/models/test_engine.py \
  tests/models/test_cuda_graphs.py > "$OUT/engine_tests.log" 2>&1
echo "engine tests on cuda: exit $? in $(( $(date +%s) - s )) s: $(tail -1 "$OUT/engine_tests.log")" | tee -a "$OUT/timeline.txt"
grep -E '^(FAILED|ERROR)' "$OUT/engine_tests.log" | head
