#!/usr/bin/env bash
# Session 2026-11-29c, call 2 (issue 15): 8-row MoE tiles in the transposed orientation (block_m 8: the tokens are
# the mma's n8 side, half the HMMAs and activation moves of a 16-row tile at T <= 8). GPU tests (bits 8 vs 16 rows,
# every format), the config sweep at T = 1-16 with block_m 8 and 16, bench moe and the batch-1 step in turns
# between the work tree (H200 20b files: block_m 8 at T = 1, 2) and .ab/base (HEAD).
set -uo pipefail
source scripts/device/env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
(python3 -m quickmoe make-checkpoint /tmp/gpt-oss-20b --preset gpt-oss-20b -q > "$OUT/make.log" 2>&1; echo "made: exit $?" >> "$OUT/make.log") &
python3 -m pytest -q -p no:cacheprovider tests/kernels/test_fused_moe.py -k "eight_row or one_token or gpt_oss_20b_shapes" \
  > "$OUT/moe_tests.log" 2>&1
echo "tests: $(tail -1 "$OUT/moe_tests.log") ($SECONDS s)"; grep -E '^(FAILED|ERROR)|differ' "$OUT/moe_tests.log" | head
python3 scripts/probes/moe_config_sweep.py --tokens 1,2,4,8,16 --block-m 8,16 --block-n 32,64 --block-k 256 \
  --warps 2,4 --stages 3,4 --swap 1 --top 6 --json "$OUT/sweep.json" > "$OUT/sweep.txt" 2>&1
echo "sweep exit $? ($SECONDS s)"; cat "$OUT/sweep.txt" | grep -v "^$" | head -150
for run in new base new base; do
  [ $SECONDS -gt 380 ] && { echo "stopping bench moe: $SECONDS s gone"; break; }
  root=$PWD; [ "$run" != new ] && root=$PWD/.ab/$run
  PYTHONPATH=/tmp/site:$root/src python3 -m quickmoe bench moe --shapes gpt-oss-20b --tokens 1,2,4,8 --no-baselines \
    > "$OUT/bench_moe_$run.txt" 2>&1
  echo "-- bench moe $run ($SECONDS s)"; tail -14 "$OUT/bench_moe_$run.txt"
done
wait; echo "checkpoint: $(tail -1 "$OUT/make.log") ($SECONDS s)"
[ $SECONDS -lt 430 ] && AB_RUNS="new base new base" bash scripts/device/hotpath.sh ab-profile 2>&1 | tail -30
cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz . && ls
