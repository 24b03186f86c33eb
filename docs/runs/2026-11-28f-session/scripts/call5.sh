#!/bin/bash
# call 5: the FP8 quantizer fix on the GPU; tuned H200 FP8 decode configs A/B
source scripts/device/env.sh
O=/tmp/o5; mkdir -p $O
NEW=$PYTHONPATH
echo "== probe $(date +%T)"
timeout 200 python3 scripts/probes/fp8_quant_tiles_probe.py --no-tiles --json $O/quant_tiles_new.json 2>&1 | tail -12 | tee $O/quant_tiles_new.log
echo "== tests $(date +%T)"
timeout 300 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_fused_moe_quantized.py 2>&1 | tail -6 | tee $O/gpu_tests_fused_moe_quantized.log
echo "== quant timing new/head $(date +%T)"
for t in new head new; do
  if [ $t = new ]; then export PYTHONPATH=$NEW; else export PYTHONPATH=/tmp/site:$PWD/.ab/head/src; fi
  echo "-- $t" >> $O/quant_timing.txt
  timeout 60 python3 scripts/probes/fp8_quant_probe.py >> $O/quant_timing.txt 2>&1
done
tail -40 $O/quant_timing.txt
echo "== bench moe fp8 decode: new / cfgold $(date +%T)"
for t in new cfgold new cfgold; do
  if [ $t = new ]; then export PYTHONPATH=$NEW; else export PYTHONPATH=/tmp/site:$PWD/.ab/cfgold/src; fi
  echo "-- $t" >> $O/ab_bench_moe_fp8_decode.txt
  timeout 150 python3 -m quickmoe bench moe --shapes qwen3-30b-a3b,mixtral-8x7b --formats fp8 --tokens 1,2,4,8,16,32,64 \
    --no-baselines -q 2>&1 | grep -v "^\[transformers\]" >> $O/ab_bench_moe_fp8_decode.txt
done
export PYTHONPATH=$NEW
grep -E "^--|fp8 " $O/ab_bench_moe_fp8_decode.txt
echo "== done $(date +%T)"
cp $O/* $OUT/
