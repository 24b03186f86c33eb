#!/usr/bin/env bash
# Session 2026-11-30k call 8 (nvidia-h200-x2): a stage's two K steps as one 3-D TMA box of each operand ("slabs",
# the work tree) against two 2-D boxes a step (1acaf57, .ab/k2): the register GEMMs alone in a graph on gpt-oss-20b,
# new on GPU 0 beside k2 on GPU 1, then swapped; then the register kernels' and the 20b fused_moe GPU tests.
set -uo pipefail
t0=$(date +%s)
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
probe() {  # tree gpu
  local tree=$1 gpu=$2 root=$PWD; [ "$tree" != new ] && root=$PWD/.ab/$tree
  CUDA_VISIBLE_DEVICES=$gpu PYTHONPATH=/tmp/site:$root/src timeout -k 5 100 python3 scripts/probes/moe_register_rows_probe.py \
    --shapes gpt-oss-20b --tokens-20b 64,128,256 --two-steps 32,64 --variants reg32,reg32k2s2,reg64,reg64k2s2 \
    > "$OUT/rows_$tree.txt" 2>&1
  echo "probe $tree gpu $gpu: exit $? at $(( $(date +%s) - t0 )) s" >> "$OUT/rows_${tree}_all.txt"
  cat "$OUT/rows_$tree.txt" >> "$OUT/rows_${tree}_all.txt"; rm "$OUT/rows_$tree.txt"
}
for round in 1 2; do
  if [ $round = 1 ]; then a=new b=k2; else a=k2 b=new; fi
  probe $a 0 & p=$!; probe $b 1; wait $p
done
grep -hE "^probe|^gpt-oss.*T .*:.*=" "$OUT"/rows_*_all.txt >> "$OUT/summary.txt"
left=$(( 200 - ($(date +%s) - t0) ))
( CUDA_VISIBLE_DEVICES=0 timeout -k 5 $left python3 -m pytest -q -m gpu tests/kernels/test_moe_gemm_register.py \
    > "$OUT/tests0.txt" 2>&1; echo "tests0: exit $? $(tail -1 $OUT/tests0.txt)" >> "$OUT/summary.txt" ) &
p=$!
CUDA_VISIBLE_DEVICES=1 timeout -k 5 $left python3 -m pytest -q -m gpu tests/kernels/test_fused_moe.py -k gpt_oss_20b_shapes \
  > "$OUT/tests1.txt" 2>&1; echo "tests1: exit $? $(tail -1 $OUT/tests1.txt)" >> "$OUT/summary.txt"
wait $p
grep -hE "^(FAILED|ERROR)" "$OUT"/tests*.txt | cut -c1-200 | head >> "$OUT/summary.txt"
echo "total $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
cat "$OUT/summary.txt"
