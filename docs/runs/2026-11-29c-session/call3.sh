#!/usr/bin/env bash
# Session 2026-11-29c, call 3 (issue 15): the H200 20b files with 8-row tiles at T = 1-16 (from call 2's sweep).
# GPU tests (bits of 8- vs 16-row tiles, both 8-row decode tiles, every format; the 20b shapes against float64)
# beside the checkpoint's making; the sweep at T = 32-256; bench moe and the batch-1/64 steps, work tree against
# .ab/base (HEAD).
set -uo pipefail
source scripts/device/env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
(python3 -m quickmoe make-checkpoint /tmp/gpt-oss-20b --preset gpt-oss-20b -q > "$OUT/make.log" 2>&1; echo "made: exit $?" >> "$OUT/make.log") &
python3 -m pytest -q -p no:cacheprovider tests/kernels/test_fused_moe.py -k "eight_row or gpt_oss_20b_shapes or one_token" \
  tests/kernels/test_moe_configs.py > "$OUT/moe_tests.log" 2>&1
echo "tests: $(tail -1 "$OUT/moe_tests.log") ($SECONDS s)"; grep -E '^(FAILED|ERROR)|differ' "$OUT/moe_tests.log" | head
wait; echo "checkpoint: $(tail -1 "$OUT/make.log") ($SECONDS s)"
python3 scripts/probes/moe_config_sweep.py --tokens 32,64,128,256 --block-m 8,16 --block-n 32,64 --block-k 256 \
  --warps 2,4 --stages 3 --swap 1 --top 4 --json "$OUT/sweep.json" > "$OUT/sweep.txt" 2>&1
echo "sweep exit $? ($SECONDS s)"; grep -v "^$" "$OUT/sweep.txt" | head -90
for run in new base new base; do
  [ $SECONDS -gt 390 ] && { echo "stopping bench moe: $SECONDS s gone"; break; }
  root=$PWD; [ "$run" != new ] && root=$PWD/.ab/$run
  f="$OUT/bench_moe_${run}_$SECONDS.txt"
  PYTHONPATH=/tmp/site:$root/src python3 -m quickmoe bench moe --shapes gpt-oss-20b --tokens 1,2,4,8,16 --no-baselines \
    > "$f" 2>&1
  echo "-- bench moe $run ($SECONDS s)"; tail -6 "$f"
done
[ $SECONDS -lt 470 ] && AB_RUNS="new base" bash scripts/device/hotpath.sh ab-profile 2>&1 | grep -E "^-- |median step|by op family" | head -20
cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz . && ls
