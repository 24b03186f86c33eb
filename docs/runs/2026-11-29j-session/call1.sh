#!/bin/bash
# session 2026-11-29 tenth, call 1: NVFP4 block scales one K step ahead at BLOCK_M >= 64 (as MXFP4's): GPU tests,
# bits against a75ffa5 (.ab/base), bench moe NVFP4 in turns new/base
source scripts/device/env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/gpu.txt
Q=tests/kernels/test_fused_moe_quantized.py
S=$Q::test_the_shipped_tuned_configs_compute_the_reference
timeout 240 python3 -m pytest -q -p no:cacheprovider "$Q::test_quantized_experts_bf16_on_the_gpu[nvfp4]" \
  "$S[mixtral-8x7b-nvfp4-1]" "$S[mixtral-8x7b-nvfp4-16]" "$S[mixtral-8x7b-nvfp4-1024]" "$S[mixtral-8x7b-nvfp4-8192]" \
  "$S[qwen3-30b-a3b-nvfp4-1]" "$S[qwen3-30b-a3b-nvfp4-128]" "$S[qwen3-30b-a3b-nvfp4-2048]" \
  "$S[gpt-oss-120b-mxfp4-128]" > $OUT/tests_new.txt 2>&1
echo "tests: $(tail -1 $OUT/tests_new.txt) ($SECONDS s)"
ITEMS=mixtral-8x7b:nvfp4:1,mixtral-8x7b:nvfp4:16,mixtral-8x7b:nvfp4:1024,mixtral-8x7b:nvfp4:4096,qwen3-30b-a3b:nvfp4:64,qwen3-30b-a3b:nvfp4:2048,gpt-oss-20b:mxfp4:1024
for t in new base; do
  root=$PWD; [ $t != new ] && root=$PWD/.ab/$t
  PYTHONPATH=/tmp/site:$root/src timeout 120 python3 .ab/moe_bits.py /tmp/bits_$t.pt $ITEMS > $OUT/bits_$t.txt 2>&1
  echo "bits $t exit $? ($SECONDS s)"
done
python3 - <<'PY' > $OUT/bits_compare.txt 2>&1
import torch
a, b = torch.load("/tmp/bits_new.pt"), torch.load("/tmp/bits_base.pt")
for k in a:
    print(k, "equal" if torch.equal(a[k], b[k]) else f"DIFFER max {(a[k].float()-b[k].float()).abs().max():.3g}")
PY
cat $OUT/bits_compare.txt
bm() {  # tree turn [extra]
  [ $SECONDS -gt 480 ] && { echo "skipping bench $1 $2: $SECONDS s gone"; return; }
  local root=$PWD; [ "$1" != new ] && root=$PWD/.ab/$1
  PYTHONPATH=/tmp/site:$root/src timeout 150 python3 -m quickmoe bench moe --shapes mixtral-8x7b,qwen3-30b-a3b \
    --formats nvfp4 --tokens 1,16,1024,2048,4096,8192 $3 -q --json $OUT/bench_moe_$1_$2.json > $OUT/bench_moe_$1_$2.txt 2>&1
  echo "-- bench moe $1 $2 exit $? ($SECONDS s)"
}
bm new a --no-baselines; bm base a --no-baselines; bm new b; bm base b --no-baselines
for f in $OUT/bench_moe_*.txt; do echo "== $(basename $f)"; grep -E '^(shape|qwen3|mixtral)' $f; done
cd $OUT && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz .
