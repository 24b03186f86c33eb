#!/usr/bin/env bash
# Hot path call 4 (nvidia-h200): the committed dense_gemm table (K in parts). The quality GPU tests, the batch-1
# step (ab-profile) and bench generate 256 x 1000 -> 1000 in turns against base (0e7349a).
set -uo pipefail
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
s=$(date +%s)
AB_RUNS="new base new base" timeout -k 5 160 bash scripts/device/hotpath.sh ab-profile > "$OUT/ab_profile_run.log" 2>&1
echo "ab-profile: exit $? in $(( $(date +%s) - s )) s" | tee -a "$OUT/timeline.txt"
grep -E "^-- |decode at batch 1: median|by op family" "$OUT/ab_profile.txt" | cut -c1-200
for run in new base; do
  root=$PWD; [ "$run" != new ] && root=$PWD/.ab/$run
  s=$(date +%s)
  PYTHONPATH=/tmp/site:$root/src timeout -k 5 110 python3 -m quickmoe bench generate /tmp/gpt-oss-20b --num-prompts 256 \
    --input-len 1000 --output-len 1000 --json "$OUT/gen_$run.json" > "/tmp/gen_$run.log" 2>&1
  echo "gen $run: exit $? in $(( $(date +%s) - s )) s" >> "$OUT/timeline.txt"
  { echo "-- $run"; grep -E "^quickmoe |decode at batch 1: median|by step kind|batch 256 by op family" "/tmp/gen_$run.log" | cut -c1-240; } \
    | tee -a "$OUT/ab_generate.txt"
done
s=$(date +%s)
timeout -k 5 150 python3 -m pytest -q -p no:cacheprovider tests/models/test_quality_gpu.py tests/kernels/test_dense_gemm.py \
  > "$OUT/quality_tests.log" 2>&1
echo "quality + dense tests: exit $? in $(( $(date +%s) - s )) s: $(tail -1 "$OUT/quality_tests.log")" | tee -a "$OUT/timeline.txt"
