#!/bin/bash
# Call 2 (2026-12-04 fourth session, issue 18).
# 1. FP8 GEMM 1's step factors one K step ahead (HEAD, 1776c53) against .ab/pre (1776c53^) in the model: Qwen3-30B-A3B
#    FP8, 16 of 48 layers, bench generate 64 x 2000 -> 4 (prefill steps of 8,192 tokens), three rounds in turns.
#    Call 1 had the layer -1.3% at T = 8,192 (-0.4 to -2.0% at 1,024-8,192).
#    Prediction: the mixed steps' GPU median (prefill chunks of 8,192 tokens) -0.5 to -1.2% (the MoE about 60% of it).
# 2. Mixtral-8x7B NVFP4's key 65 (T = 65-72), the H200's last untuned key in docs/acceptance.md, by
#    scripts/device/moe_keys.sh against .ab/main (HEAD): 8 layers, 72 prompts (decode steps of 72 sequences).
#    Prediction: the pair 0-10% faster alone (Mixtral FP8's key 65 gained 12% alone, 6.6% a decode step).
source scripts/device/env.sh
base=$OUT
trap 'cd $base && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
M=/tmp/qwen3-fp8-16
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
timeout 300 python3 -m quickmoe make-checkpoint $M --preset qwen3-30b-a3b --weights fp8 --layers 16 -q --overwrite \
  > $OUT/make.log 2>&1
echo "checkpoint rc $? ($SECONDS s)"
run() {  # TREE TAG
  local root=$PWD; [ "$1" = pre ] && root=$PWD/.ab/pre
  PYTHONPATH=/tmp/site:$root/src timeout 150 python3 -m quickmoe bench generate $M --num-prompts 64 \
    --input-len 2000 --output-len 4 --json $OUT/gen_$2_$1.json > $OUT/gen_$2_$1.log 2>&1
  echo "$2 $1 rc $? ($SECONDS s): $(python3 -c "
import json; d = json.load(open('$OUT/gen_$2_$1.json'))['quickmoe']; s = d['steps']['by_kind']
print('; '.join(f\"{k} {v['steps']} steps, median {v['gpu_ms_median']:.3f} ms\" for k, v in sorted(s.items())),
      '; tok/s', round(d.get('output_tokens_per_s', 0)))" 2>&1 | tail -1)"
}
for round in 1 2 3; do
  if [ $((round % 2)) = 1 ]; then run head r$round; run pre r$round; else run pre r$round; run head r$round; fi
done
rm -rf $M
echo "== model A/B done ($SECONDS s)"
OUT=$base/mixtral_nvfp4 PRESET=mixtral-8x7b FMT=nvfp4 LAYERS=8 TOKENS=65 PROMPTS="72" ROUNDS_S=200 \
  bash scripts/device/moe_keys.sh
echo "== mixtral nvfp4 done ($SECONDS s)"
