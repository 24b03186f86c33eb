#!/bin/bash
# Call 3 (2026-12-04 fourth session, issue 18).
# 1. tests/kernels/test_tune_moe_script.py on the GPU (the new --span tests beside the rest).
# 2. Mixtral-8x7B NVFP4's key 65 again, now with `tune_moe.py --span` (each time the mean of T = 65 and T = 72, the
#    last T the key serves). Call 2's winner at T = 65 alone (16-row tiles, 460 against 530 us) made the 72-sequence
#    decode step 0.5% slower. Prediction: at T = 72 the 16-row tiles lose most of their lead (18 rows an expert: two
#    tiles each), so the span's winner is a 32- or 64-row pair or the pair in use is kept; in the model 0 to -3%.
# 3. Two more rounds of call 2's model A/B of FP8 GEMM 1's factors ahead (HEAD against .ab/pre), where time is left:
#    call 2's head runs 1 and 3 were host-bound (the host 0.1-0.4 ms slower a batch-1 step even where the kernels
#    are the same), so only the profiled mixed step's kernel sums compared.
#    Prediction: the mixed steps' GPU median -0.5 to -1.2% where neither run is host-bound.
source scripts/device/env.sh
base=$OUT
trap 'cd $base && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_tune_moe_script.py > $OUT/gpu_tests.log 2>&1
echo "gpu tests: $(tail -1 $OUT/gpu_tests.log) ($SECONDS s)"
OUT=$base/mixtral_nvfp4 PRESET=mixtral-8x7b FMT=nvfp4 LAYERS=8 TOKENS=65 PROMPTS="72" ROUNDS_S=200 TUNE_ARGS=--span \
  bash scripts/device/moe_keys.sh
echo "== mixtral nvfp4 done ($SECONDS s)"
grep -E "T=65" $base/mixtral_nvfp4/tune.log
[ $SECONDS -lt 380 ] || exit 0
M=/tmp/qwen3-fp8-16
rm -rf /tmp/moe-keys-*
timeout 120 python3 -m quickmoe make-checkpoint $M --preset qwen3-30b-a3b --weights fp8 --layers 16 -q --overwrite \
  > $OUT/make.log 2>&1
echo "checkpoint rc $? ($SECONDS s)"
run() {  # TREE TAG
  local root=$PWD; [ "$1" = pre ] && root=$PWD/.ab/pre
  PYTHONPATH=/tmp/site:$root/src timeout 100 python3 -m quickmoe bench generate $M --num-prompts 64 \
    --input-len 2000 --output-len 4 --json $OUT/gen_$2_$1.json > $OUT/gen_$2_$1.log 2>&1
  echo "$2 $1 rc $? ($SECONDS s): $(python3 -c "
import json; d = json.load(open('$OUT/gen_$2_$1.json'))['quickmoe']; s = d['steps']['by_kind']
print('; '.join(f\"{k} {v['steps']} steps, median {v['gpu_ms_median']:.3f} ms\" for k, v in sorted(s.items())),
      '; tok/s', round(d.get('output_tokens_per_s', 0)))" 2>&1 | tail -1) | $(grep -o 'host: [0-9.]* ms to queue' $OUT/gen_$2_$1.log | tr '\n' ' ')"
}
for round in 4 5; do
  [ $SECONDS -lt 540 ] || break
  if [ $((round % 2)) = 1 ]; then run head r$round; run pre r$round; else run pre r$round; run head r$round; fi
done
echo "($SECONDS s)"
