#!/bin/bash
# Call 1 (2026-12-02 fourth session): the qk-norm-in-decode (5f58662, .ab/qk) and L2-prefetch-before-wait (da3c926,
# the tree) commits. Their kernel tests on CUDA, then bench generate in turns, main (128cb37, .ab/main), qk and
# the tree, on Qwen3-30B-A3B FP8 (16 x 1000 -> 128), and main / tree on gpt-oss-20b, with --json (op families).
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
Q=/tmp/qwen3-fp8 G=/tmp/g20
(timeout 200 python3 -m quickmoe make-checkpoint $Q --preset qwen3-30b-a3b --weights fp8 -q > $OUT/make_q.log 2>&1;
 echo "qwen3 checkpoint rc $?" >> $OUT/make_q.log) &
(timeout 200 python3 -m quickmoe make-checkpoint $G --preset gpt-oss-20b -q > $OUT/make_g.log 2>&1;
 echo "20b checkpoint rc $?" >> $OUT/make_g.log) &
timeout 200 python3 -m pytest -q -p no:cacheprovider -n 6 tests/kernels/test_pdl.py tests/kernels/test_dense_gemm.py \
  tests/kernels/test_moe_fp8_gemv.py > $OUT/test_kernels.log 2>&1
echo "kernel tests rc $? ($SECONDS s): $(tail -1 $OUT/test_kernels.log)"; grep -E "^(FAILED|ERROR)" $OUT/test_kernels.log | head
timeout 120 python3 -m pytest -q -p no:cacheprovider -n 6 tests/kernels/test_attention_kernels.py \
  -k "rotary or normalises or qk_norm or bf16" > $OUT/test_attention.log 2>&1
echo "attention tests rc $? ($SECONDS s): $(tail -1 $OUT/test_attention.log)"
grep -E "^(FAILED|ERROR)" $OUT/test_attention.log | head
wait; cat $OUT/make_q.log $OUT/make_g.log | grep rc
for round in 1 2; do
  for t in main qk new; do
    root=$PWD; [ $t != new ] && root=$PWD/.ab/$t
    for m in q g; do
      [ $m = g ] && [ $t = qk ] && continue
      ck=$Q; [ $m = g ] && ck=$G
      PYTHONPATH=/tmp/site:$root/src timeout 75 python3 -m quickmoe bench generate $ck \
        --num-prompts 16 --input-len 1000 --output-len 128 --json $OUT/gen_${m}_r${round}_$t.json \
        > $OUT/gen_${m}_r${round}_$t.log 2>&1
      echo "round $round $t $m rc $? ($SECONDS s)"
      grep -E "^quickmoe |decode at batch 1: median|decode step at batch (1|16) by" $OUT/gen_${m}_r${round}_$t.log | cut -c1-300
    done
  done
done
timeout 110 python3 -m pytest -q -p no:cacheprovider -n 4 -m gpu tests/models/test_parity_families.py > $OUT/test_models.log 2>&1
echo "model tests rc $? ($SECONDS s): $(tail -1 $OUT/test_models.log)"; grep -E "^(FAILED|ERROR)" $OUT/test_models.log | head
echo "($SECONDS s)"
