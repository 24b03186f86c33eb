#!/usr/bin/env bash
# Hot path call 3 (nvidia-h200): dense_gemm with K in parts, the one-program path as one loop over K. Tests on CUDA,
# the probe (bits; us against cuBLAS and base), the table picked on o_proj (this machine's copy only), then the
# batch-1 step (ab-profile) and bench generate 256 x 1000 -> 1000 in turns against base (0e7349a).
set -uo pipefail
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
s=$(date +%s)
timeout -k 5 200 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_dense_gemm.py > "$OUT/dense_tests.log" 2>&1
echo "dense tests: exit $? in $(( $(date +%s) - s )) s: $(tail -1 "$OUT/dense_tests.log")" | tee -a "$OUT/timeline.txt"
s=$(date +%s)
timeout -k 5 300 python3 scripts/probes/dense_gemm_probe.py --rows 1,16,32,64,128,256 --base .ab/base_dense_gemm.py \
  --json "$OUT/dense_probe.json" > "$OUT/dense_probe.log" 2>&1
echo "dense probe: exit $? in $(( $(date +%s) - s )) s" | tee -a "$OUT/timeline.txt"
grep -E "^bits|^\| o_proj" "$OUT/dense_probe.log" | cut -c1-200
python3 .ab/pick_dense.py "$OUT/dense_probe.json" src/quickmoe/kernels/dense_gemm.py 2>&1 | tee "$OUT/pick.txt" || exit 1
cp src/quickmoe/kernels/dense_gemm.py "$OUT/dense_gemm_picked.py"
s=$(date +%s)
AB_RUNS="new base" timeout -k 5 100 bash scripts/device/hotpath.sh ab-profile > "$OUT/ab_profile_run.log" 2>&1
echo "ab-profile: exit $? in $(( $(date +%s) - s )) s" | tee -a "$OUT/timeline.txt"
grep -E "^-- |decode at batch 1: median|by op family" "$OUT/ab_profile.txt" | cut -c1-200
for run in new base new base; do
  root=$PWD; [ "$run" != new ] && root=$PWD/.ab/$run
  s=$(date +%s)
  PYTHONPATH=/tmp/site:$root/src timeout -k 5 110 python3 -m quickmoe bench generate /tmp/gpt-oss-20b --num-prompts 256 \
    --input-len 1000 --output-len 1000 --json "$OUT/gen_$run.json" > "/tmp/gen_$run.log" 2>&1
  echo "gen $run: exit $? in $(( $(date +%s) - s )) s" >> "$OUT/timeline.txt"
  { echo "-- $run"; grep -E "^quickmoe |decode at batch 1: median|by step kind|batch 256 by op family" "/tmp/gen_$run.log" | cut -c1-240; } \
    | tee -a "$OUT/ab_generate.txt"
done
