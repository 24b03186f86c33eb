#!/bin/bash
# session 2026-11-29 ninth, call 3: the FP8 activation scales correctly rounded (tests on the work tree and on
# fec76a0's code); bench moe for gpt-oss-20b / Mixtral at T = 1, 2 in turns; Mixtral NVFP4 (4 layers) bench generate
# in turns, the work tree (new) against fec76a0 (.ab/base)
source scripts/device/env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/gpu.txt
Q=tests/kernels/test_fused_moe_quantized.py
S=$Q::test_the_shipped_tuned_configs_compute_the_reference
timeout 200 python3 -m pytest -q -p no:cacheprovider $Q::test_fp8_activation_scales_are_the_correctly_rounded_quotient \
  $Q::test_fp8_activation_quantizer_is_bit_exact "$S[qwen3-30b-a3b-fp8-1]" "$S[qwen3-30b-a3b-fp8-16]" \
  "$S[mixtral-8x7b-nvfp4-1]" "$S[mixtral-8x7b-nvfp4-4]" "$S[mixtral-8x7b-nvfp4-16]" > $OUT/tests_new.txt 2>&1
tail -1 $OUT/tests_new.txt
PYTHONPATH=/tmp/site:$PWD/.ab/base/src timeout 100 python3 -m pytest -q -p no:cacheprovider \
  $Q::test_fp8_activation_scales_are_the_correctly_rounded_quotient > $OUT/tests_base.txt 2>&1
grep -E 'scales|passed|failed' $OUT/tests_base.txt | tail -3
bm() {  # tree turn
  local root=$PWD; [ "$1" != new ] && root=$PWD/.ab/$1
  PYTHONPATH=/tmp/site:$root/src timeout 150 python3 -m quickmoe bench moe --shapes gpt-oss-20b,mixtral-8x7b \
    --formats mxfp4,fp8,nvfp4 --tokens 1,2 --no-baselines -q --json $OUT/bench_moe_$1_$2.json > $OUT/bench_moe_$1_$2.txt 2>&1
  echo "-- bench moe $1 $2 exit $? ($SECONDS s)"
}
bm new a; bm base a; bm new b; bm base b
timeout 200 python3 -m quickmoe make-checkpoint /tmp/mxnv --preset mixtral-8x7b --weights nvfp4 --layers 4 -q \
  > $OUT/make_mixtral_nvfp4.log 2>&1
echo "mixtral nvfp4 checkpoint: exit $? ($SECONDS s)"
gen() {  # tree turn
  [ $SECONDS -gt 500 ] && { echo "skipping gen $1 $2: $SECONDS s gone"; return; }
  local root=$PWD; [ "$1" != new ] && root=$PWD/.ab/$1
  local log="$OUT/gen_mxnv_$1_$2.log"
  PYTHONPATH=/tmp/site:$root/src timeout 100 python3 -m quickmoe bench generate /tmp/mxnv --num-prompts 64 \
    --input-len 1000 --output-len 64 --json "$OUT/gen_mxnv_$1_$2.json" > "$log" 2>&1
  echo "-- gen $1 $2 exit $? ($SECONDS s)"
  grep -E '^decode at batch 1: median|^decode step at batch 1 ' "$log" | cut -c1-200
}
gen new a; gen base a; gen new b; gen base b
for f in $OUT/bench_moe_*.txt; do echo "== $(basename $f)"; grep -E '^(gpt-oss|mixtral)' $f; done
cd $OUT && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz .
