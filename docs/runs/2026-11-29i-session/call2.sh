#!/bin/bash
# session 2026-11-29 ninth, call 2: K in parts at T = 1 in the whole model: gpt-oss-20b and Mixtral FP8 (4 layers)
# bench generate, the work tree (new) against fec76a0 (.ab/base), in turns; Mixtral NVFP4's GEMMs in parts at T = 1
source scripts/device/env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/gpu.txt
T=tests/kernels/test_fused_moe_quantized.py::test_the_shipped_tuned_configs_compute_the_reference
timeout 200 python3 -m pytest -q -p no:cacheprovider "$T[gpt-oss-120b-mxfp4-1]" "$T[mixtral-8x7b-fp8-1]" \
  "$T[mixtral-8x7b-fp8-4]" "$T[gpt-oss-120b-mxfp4-8]" "$T[mixtral-8x7b-fp8-16]" \
  tests/kernels/test_fused_moe.py::test_fused_moe_gpt_oss_20b_shapes_on_the_gpu > $OUT/tests.txt 2>&1
tail -1 $OUT/tests.txt
timeout 120 python3 -m quickmoe make-checkpoint /tmp/gpt-oss-20b --preset gpt-oss-20b -q > $OUT/make_20b.log 2>&1
echo "20b checkpoint: exit $? ($SECONDS s)"
gen() {  # checkpoint tag tree turn
  local root=$PWD; [ "$3" != new ] && root=$PWD/.ab/$3
  local log="$OUT/gen_$2_$3_$4.log"
  PYTHONPATH=/tmp/site:$root/src timeout 120 python3 -m quickmoe bench generate $1 --num-prompts 64 \
    --input-len 1000 --output-len 64 --json "$OUT/gen_$2_$3_$4.json" > "$log" 2>&1
  echo "-- gen $2 $3 $4 exit $? ($SECONDS s)"
  grep -E '^decode at batch 1: median|^decode step at batch' "$log" | cut -c1-200
}
gen /tmp/gpt-oss-20b 20b new a; gen /tmp/gpt-oss-20b 20b base a; gen /tmp/gpt-oss-20b 20b new b; gen /tmp/gpt-oss-20b 20b base b
rm -rf /tmp/gpt-oss-20b
timeout 150 python3 -m quickmoe make-checkpoint /tmp/mxfp8 --preset mixtral-8x7b --weights fp8 --layers 4 -q \
  > $OUT/make_mixtral_fp8.log 2>&1
echo "mixtral checkpoint: exit $? ($SECONDS s)"
gen /tmp/mxfp8 mxfp8 new a; gen /tmp/mxfp8 mxfp8 base a; gen /tmp/mxfp8 mxfp8 new b; gen /tmp/mxfp8 mxfp8 base b
[ $SECONDS -lt 480 ] && timeout 90 python3 scripts/probes/moe_config_sweep.py --tuned-only --split 2,4 --top 8 \
  --shape mixtral-8x7b --format nvfp4 --tokens 1,2 > $OUT/sweep_mixtral_nvfp4.txt 2>&1
grep -E 'tuned|split' $OUT/sweep_mixtral_nvfp4.txt | head -30
cd $OUT && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz .
