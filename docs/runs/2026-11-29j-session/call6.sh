#!/bin/bash
# session 2026-11-29 tenth, call 6: the fix of call 5's NaN (NVFP4 scales ahead only off 4-warp transposed tiles,
# whose code is now a75ffa5's instruction for instruction): GPU tests, GEMM bits against a75ffa5, bench moe NVFP4
source scripts/device/env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/gpu.txt
Q=tests/kernels/test_fused_moe_quantized.py
S=$Q::test_the_shipped_tuned_configs_compute_the_reference
timeout 200 python3 -m pytest -q -p no:cacheprovider "$Q::test_quantized_experts_bf16_on_the_gpu[nvfp4]" \
  "$S[qwen3-30b-a3b-nvfp4-8192]" "$S[qwen3-30b-a3b-nvfp4-2048]" "$S[qwen3-30b-a3b-nvfp4-1]" "$S[qwen3-30b-a3b-nvfp4-128]" \
  "$S[mixtral-8x7b-nvfp4-16]" "$S[mixtral-8x7b-nvfp4-1024]" "$S[mixtral-8x7b-nvfp4-1536]" "$S[mixtral-8x7b-nvfp4-2048]" \
  "$S[mixtral-8x7b-nvfp4-4096]" "$S[mixtral-8x7b-nvfp4-8192]" "$S[gpt-oss-120b-mxfp4-128]" > $OUT/tests.txt 2>&1
echo "tests: $(tail -1 $OUT/tests.txt) ($SECONDS s)"
root() { if [ $1 = new ]; then echo $PWD; else echo $PWD/.ab/$1; fi; }
for t in new base; do
  PYTHONPATH=/tmp/site:$(root $t)/src timeout 120 python3 .ab/nan_probe.py $(root $t) /tmp/probe_$t.pt > $OUT/probe_$t.txt 2>&1
  echo "== probe $t exit $? ($SECONDS s)"; grep -v Warning $OUT/probe_$t.txt
done
python3 - <<'PY' 2>&1 | tee $OUT/probe_bits.txt
import torch
d = {t: torch.load(f"/tmp/probe_{t}.pt") for t in ("base", "new")}
for k in d["base"]:
    eq = [torch.equal(a.nan_to_num(7.0), b.nan_to_num(7.0)) for a, b in zip(d["base"][k], d["new"][k])]
    print(f"{k} base vs new: gemm1 {'equal' if eq[0] else 'DIFFER'}, gemm2 {'equal' if eq[1] else 'DIFFER'}")
PY
if [ $SECONDS -lt 330 ]; then
  timeout 100 python3 -m quickmoe bench moe --shapes mixtral-8x7b,qwen3-30b-a3b --formats nvfp4 \
    --tokens 1,1024,2048,4096,8192 --no-baselines -q > $OUT/bench_moe.txt 2>&1
  echo "-- bench exit $? ($SECONDS s)"; grep -E '^(mixtral|qwen3)' $OUT/bench_moe.txt
fi
cd $OUT && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz .
