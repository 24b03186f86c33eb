#!/usr/bin/env bash
# Hot path call 2 (nvidia-h200): the dense_gemm probe (every config's bits; us against cuBLAS and the base kernel),
# then the table picked from it on o_proj (written into this machine's copy only), then the batch-1 step in turns.
set -uo pipefail
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
s=$(date +%s)
timeout -k 5 420 python3 scripts/probes/dense_gemm_probe.py --rows 1,4,16,32,64,128,256 --base .ab/base_dense_gemm.py \
  --json "$OUT/dense_probe.json" > "$OUT/dense_probe.log" 2>&1
echo "dense probe: exit $? in $(( $(date +%s) - s )) s" | tee -a "$OUT/timeline.txt"
grep -E "^bits|^\|" "$OUT/dense_probe.log" | cut -c1-200
python3 .ab/pick_dense.py "$OUT/dense_probe.json" src/quickmoe/kernels/dense_gemm.py 2>&1 | tee "$OUT/pick.txt" || exit 1
cp src/quickmoe/kernels/dense_gemm.py "$OUT/dense_gemm_picked.py"
s=$(date +%s)
AB_RUNS="new base new base" timeout -k 5 150 bash scripts/device/hotpath.sh ab-profile > "$OUT/ab_profile_run.log" 2>&1
echo "ab-profile: exit $? in $(( $(date +%s) - s )) s" | tee -a "$OUT/timeline.txt"
grep -E "^-- |decode at batch 1: median|batch 1 by op family" "$OUT/ab_profile.txt" | cut -c1-220
grep -E "kernels a step" "$OUT/ab_profile.txt" | cut -c1-160
