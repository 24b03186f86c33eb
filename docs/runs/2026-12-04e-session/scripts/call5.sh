#!/bin/bash
# Call 5 (2026-12-04 fifth session, issue 18): the shipped-config reference tests of Qwen3's new key 512 (NVFP4 and FP8,
# T = 500), then a second round of call 4's FP8 A/B at 512 sequences (Qwen3-30B-A3B FP8, 16 layers, bench generate
# --max-num-seqs 512, 512 x 1000 -> 300, .ab/main first this time).
# Prediction: both tests pass; the decode step -6 to -10% again (call 4: 9.81 against 10.70 ms).
source scripts/device/env.sh
base=$OUT
trap 'cd $base && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
F=/tmp/qwen3-fp8-16
(timeout 200 python3 -m quickmoe make-checkpoint $F --preset qwen3-30b-a3b --weights fp8 --layers 16 -q \
   --overwrite > $OUT/make_f.log 2>&1; echo "fp8 rc $?" >> $OUT/make_f.log) &
timeout 120 python3 -m pytest -p no:cacheprovider -q -rf tests/kernels/test_fused_moe_quantized.py \
  -k "shipped and (nvfp4-500 or fp8-500)" > $OUT/tests.log 2>&1
echo "tests rc $? ($SECONDS s): $(tail -1 $OUT/tests.log)"; grep -E "^(FAILED|ERROR)" $OUT/tests.log | head
wait; tail -1 $OUT/make_f.log
run() {  # TREE PROMPTS
  local root=$PWD; [ "$1" = base ] && root=$PWD/.ab/main
  PYTHONPATH=/tmp/site:$root/src timeout 100 python3 -m quickmoe bench generate $F --num-prompts $2 --max-num-seqs 512 \
    --input-len 1000 --output-len 300 --json $OUT/gen_f_$2_$1.json > $OUT/gen_f_$2_$1.log 2>&1
  echo "f $2 $1 rc $? ($SECONDS s): $(python3 -c "
import json; d = json.load(open('$OUT/gen_f_$2_$1.json'))['quickmoe']; s = d['steps']['by_kind']
print('tok/s', round(d['output_tokens_per_s'], 1), '; decode', s['decode']['steps'], 'x', round(s['decode']['gpu_ms_median'], 3),
      'ms; batch median', d['steps']['batch_size_median'])" 2>&1 | tail -1)"
}
run base 512; run new 512
echo "done ($SECONDS s)"
