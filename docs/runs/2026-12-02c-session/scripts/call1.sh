#!/bin/bash
# Call 1 (2026-12-02 third session): the FP8 decode GPU test (tests/models/test_parity_families.py) on main; the
# masked-partials branch's kernel tests on CUDA (.ab/mask); the dense FP8 GEMV of several tokens a program
# (.ab/tok): its tests and the probe; then bench generate main / masked-partials in turns on Qwen3-30B-A3B FP8 and
# gpt-oss-20b (16 x 1000 -> 128: the batch-1 step).
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
Q=/tmp/qwen3-fp8 G=/tmp/g20
(timeout 200 python3 -m quickmoe make-checkpoint $Q --preset qwen3-30b-a3b --weights fp8 -q > $OUT/make_q.log 2>&1;
 echo "qwen3 checkpoint rc $?" >> $OUT/make_q.log) &
(timeout 200 python3 -m quickmoe make-checkpoint $G --preset gpt-oss-20b -q > $OUT/make_g.log 2>&1;
 echo "20b checkpoint rc $?" >> $OUT/make_g.log) &
timeout 150 python3 -m pytest -q -p no:cacheprovider -m gpu tests/models/test_parity_families.py > $OUT/test_families.log 2>&1
echo "families GPU test rc $? ($SECONDS s): $(tail -1 $OUT/test_families.log)"
cd .ab/mask && PYTHONPATH=/tmp/site:$PWD/src timeout 240 python3 -m pytest -q -p no:cacheprovider -n 6 \
  tests/kernels/test_router.py tests/kernels/test_dense_gemm.py tests/kernels/test_fp8_gemm.py \
  tests/kernels/test_fp8_gemv.py tests/kernels/test_moe_fp8_gemv.py tests/kernels/test_fused_moe_quantized.py \
  > $OUT/test_mask.log 2>&1; echo "mask kernel tests rc $? ($SECONDS s): $(tail -1 $OUT/test_mask.log)"; cd ../..
cd .ab/tok && PYTHONPATH=/tmp/site:$PWD/src timeout 100 python3 -m pytest -q -p no:cacheprovider -n 4 \
  tests/kernels/test_fp8_gemv.py > $OUT/test_tok.log 2>&1
echo "tok GEMV tests rc $? ($SECONDS s): $(tail -1 $OUT/test_tok.log)"
PYTHONPATH=/tmp/site:$PWD/src timeout 120 python3 scripts/probes/fp8_dense_gemv_probe.py --shapes qkv_proj,o_proj \
  --tokens 1,2,4,8 --sweep-tokens 2,4,8 --rows 2,4 --warps 1,2 --split 1 --per-program 1,2,4,8 \
  --json $OUT/tok_probe.json > $OUT/tok_probe.log 2>&1; echo "tok probe rc $? ($SECONDS s)"; cd ../..
tail -40 $OUT/tok_probe.log
wait; cat $OUT/make_q.log $OUT/make_g.log | grep rc
for round in 1 2; do
  for t in main mask; do
    root=$PWD; [ $t = mask ] && root=$PWD/.ab/mask
    for m in q g; do
      ck=$Q; [ $m = g ] && ck=$G
      PYTHONPATH=/tmp/site:$root/src timeout 75 python3 -m quickmoe bench generate $ck --num-prompts 16 \
        --input-len 1000 --output-len 128 > $OUT/gen_${m}_r${round}_$t.log 2>&1
      echo "round $round $t $m rc $? ($SECONDS s)"
      grep -E "^quickmoe |decode at batch 1: median" $OUT/gen_${m}_r${round}_$t.log | cut -c1-300
    done
  done
done
echo "($SECONDS s)"
