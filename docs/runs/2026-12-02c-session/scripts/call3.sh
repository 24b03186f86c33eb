#!/bin/bash
# Call 3 (2026-12-02 third session): branch next/pdl-early-weights after gemv_step was written out again (call 2:
# the MoE GEMVs' SASS had changed with it). The PDL and GEMV kernel tests on CUDA, then bench generate in turns,
# main (.ab/main) and the branch, on Qwen3-30B-A3B FP8 and gpt-oss-20b (16 x 1000 -> 128), with --json (op
# families' longest kernels).
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
Q=/tmp/qwen3-fp8 G=/tmp/g20
(timeout 200 python3 -m quickmoe make-checkpoint $Q --preset qwen3-30b-a3b --weights fp8 -q > $OUT/make_q.log 2>&1;
 echo "qwen3 checkpoint rc $?" >> $OUT/make_q.log) &
(timeout 200 python3 -m quickmoe make-checkpoint $G --preset gpt-oss-20b -q > $OUT/make_g.log 2>&1;
 echo "20b checkpoint rc $?" >> $OUT/make_g.log) &
timeout 240 python3 -m pytest -q -p no:cacheprovider -n 6 tests/kernels/test_pdl.py tests/kernels/test_fp8_gemv.py \
  tests/kernels/test_moe_fp8_gemv.py > $OUT/test_kernels.log 2>&1
echo "kernel tests rc $? ($SECONDS s): $(tail -1 $OUT/test_kernels.log)"; grep -E "^(FAILED|ERROR)" $OUT/test_kernels.log | head
wait; cat $OUT/make_q.log $OUT/make_g.log | grep rc
for round in 1 2; do
  for t in main new; do
    root=$PWD; [ $t = main ] && root=$PWD/.ab/main
    early=1; [ $t = early0 ] && early=0
    for m in q g; do
      ck=$Q; [ $m = g ] && ck=$G
      QUICKMOE_PDL_EARLY=$early PYTHONPATH=/tmp/site:$root/src timeout 75 python3 -m quickmoe bench generate $ck \
        --num-prompts 16 --input-len 1000 --output-len 128 --json $OUT/gen_${m}_r${round}_$t.json \
        > $OUT/gen_${m}_r${round}_$t.log 2>&1
      echo "round $round $t $m rc $? ($SECONDS s)"
      grep -E "^quickmoe |decode at batch 1: median|decode step at batch (1|16) by" $OUT/gen_${m}_r${round}_$t.log | cut -c1-300
    done
  done
done
echo "($SECONDS s)"
