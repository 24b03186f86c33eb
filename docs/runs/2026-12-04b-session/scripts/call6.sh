# Call 6: the shipped-config reference test for Mixtral-8x7B bf16 with call 4's keys 256, 384 and 512 (T = 256, 384,
# 480) beside its earlier cases, against the float64 reference on the H200.
source scripts/device/env.sh
timeout 400 python3 -m pytest -q -p no:cacheprovider -n 4 tests/kernels/test_fused_moe_quantized.py \
  -k "shipped and mixtral and bf16" 2>&1 | tee "$OUT/pytest.log" | tail -5
