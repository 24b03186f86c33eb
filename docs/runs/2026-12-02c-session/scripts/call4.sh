#!/bin/bash
# Call 4 (2026-12-02 third session): branch next/gemv2-preload (the work tree: the FP8 MoE GEMV 2 reads its expert's
# first 3 K steps of weights before its PDL wait, the quantizer ahead of it having let it launch at once); .ab/p1 the
# same with 1 step; .ab/main = main (3e49ea5, with this session's early triggers). The GEMV and PDL kernel tests on
# CUDA, then bench generate in turns on Qwen3-30B-A3B FP8 (16 x 1000 -> 128), two rounds.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
Q=/tmp/qwen3-fp8
(timeout 200 python3 -m quickmoe make-checkpoint $Q --preset qwen3-30b-a3b --weights fp8 -q > $OUT/make_q.log 2>&1;
 echo "qwen3 checkpoint rc $?" >> $OUT/make_q.log) &
timeout 150 python3 -m pytest -q -p no:cacheprovider -n 6 tests/kernels/test_pdl.py tests/kernels/test_moe_fp8_gemv.py \
  tests/kernels/test_fused_moe_quantized.py > $OUT/test_kernels.log 2>&1
echo "kernel tests rc $? ($SECONDS s): $(tail -1 $OUT/test_kernels.log)"; grep -E "^(FAILED|ERROR)" $OUT/test_kernels.log | head
wait; grep rc $OUT/make_q.log
for round in 1 2; do
  for t in main new p1; do
    root=$PWD; [ $t != new ] && root=$PWD/.ab/$t
    PYTHONPATH=/tmp/site:$root/src timeout 75 python3 -m quickmoe bench generate $Q --num-prompts 16 --input-len 1000 \
      --output-len 128 --json $OUT/gen_q_r${round}_$t.json > $OUT/gen_q_r${round}_$t.log 2>&1
    echo "round $round $t rc $? ($SECONDS s)"
    grep -E "^quickmoe |decode at batch 1: median|throughput run: GPU" $OUT/gen_q_r${round}_$t.log | cut -c1-160
  done
done
echo "($SECONDS s)"
