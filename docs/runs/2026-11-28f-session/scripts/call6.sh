#!/bin/bash
# call 6: the quantizer rule (1 or >= 4 values a thread) on the GPU; the MXFP8 quantizer's launches; Mixtral NVFP4 tuned at T = 4096
source scripts/device/env.sh
O=/tmp/o6; mkdir -p $O/configs
NEW=$PYTHONPATH
echo "== probe $(date +%T)"
timeout 200 python3 scripts/probes/fp8_quant_tiles_probe.py --no-tiles --json $O/quant_tiles.json 2>&1 | grep -v "^\[transformers\]" | tail -14 | tee $O/quant_tiles.log
echo "== tests $(date +%T)"
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_mxfp8_quant.py tests/kernels/test_fused_moe_quantized.py -k "quantizer or mxfp8 or bit_identical or pads or rounds" 2>&1 | tail -4 | tee $O/gpu_tests_quantizers.log
echo "== tune mixtral nvfp4 4096 $(date +%T)"
cp src/quickmoe/kernels/configs/*.json $O/configs/
timeout 200 python3 scripts/tune_moe.py --shapes mixtral-8x7b --tokens 4096 --format nvfp4 --out $O/configs 2>&1 | grep -v skipped | tee $O/tune.txt
rm -rf .ab/tuned && cp -r src .ab/tuned_src_tmp && mkdir -p .ab/tuned && mv .ab/tuned_src_tmp .ab/tuned/src
cp $O/configs/E8_*nvfp4_NVIDIA_H200.json .ab/tuned/src/quickmoe/kernels/configs/
echo "== bench moe nvfp4 mixtral: tuned / new $(date +%T)"
for t in tuned new; do
  if [ $t = new ]; then export PYTHONPATH=$NEW; else export PYTHONPATH=/tmp/site:$PWD/.ab/tuned/src; fi
  echo "-- $t" >> $O/ab_bench_moe_nvfp4.txt
  timeout 100 python3 -m quickmoe bench moe --shapes mixtral-8x7b --formats nvfp4 --tokens 2048,4096,8192 -q 2>&1 | grep -v "^\[transformers\]" >> $O/ab_bench_moe_nvfp4.txt
done
grep -E "^--|nvfp4 " $O/ab_bench_moe_nvfp4.txt
cp $O/configs/E8_*nvfp4_NVIDIA_H200.json $OUT/ 2>/dev/null
cp $O/*.txt $O/*.log $O/*.json $OUT/
echo "== done $(date +%T)"
