#!/usr/bin/env bash
# Session 2026-11-30o call 8 (nvidia-h200): moe_gemm.py split into its host code and two kernel modules
# (moe_gemm1_kernel.py, moe_gemm2_kernel.py; tile_of / valid_rows into moe_tiles.py): the MoE kernels' tests on CUDA,
# the GPU tests of the kernel warm-up, precompile and compile workers, then a 20b start with an empty kernel cache
# (the precompile's workers import the kernels by their new module) and one with the cache it filled.
set -uo pipefail
t0=$(date +%s)
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
S=$OUT/summary.txt
timeout -k 10 150 python3 -m quickmoe make-checkpoint /tmp/gpt-oss-20b --preset gpt-oss-20b -q > "$OUT/make.log" 2>&1 &
timeout -k 10 330 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_fused_moe.py tests/kernels/test_moe_gemm_register.py \
  tests/kernels/test_glue_kernels.py > "$OUT/kernel_tests.log" 2>&1 &
timeout -k 10 330 python3 -m pytest -q -p no:cacheprovider -m gpu tests/models/test_kernel_warmup.py \
  tests/models/test_kernel_precompile.py tests/unit/test_compile_workers.py > "$OUT/warmup_tests.log" 2>&1 &
wait
echo "kernel tests: $(tail -1 "$OUT/kernel_tests.log")" >> $S; grep -E '^(FAILED|ERROR)' "$OUT/kernel_tests.log" | head >> $S
echo "warm-up tests: $(tail -1 "$OUT/warmup_tests.log")" >> $S; grep -E '^(FAILED|ERROR)' "$OUT/warmup_tests.log" | head >> $S
export QUICKMOE_CACHE_DIR=/tmp/qc8
for run in empty filled; do
  timeout -k 10 120 python3 -m quickmoe generate /tmp/gpt-oss-20b -p "Hello world" --max-tokens 8 --temperature 0 \
    --device cuda --startup-json "$OUT/start_$run.json" > "$OUT/gen_$run.txt" 2> "$OUT/gen_$run.log"
  echo "generate ($run kernel cache): exit $? at $(( $(date +%s) - t0 )) s" >> $S
  python3 - "$OUT/start_$run.json" >> $S <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
info = d.get("info", {})
print("  precompile:", json.dumps(info.get("precompile"))[:300])
print("  triton cache:", json.dumps(info.get("kernel_cache") or info.get("triton_cache"))[:300])
print("  phases:", {k: round(v, 3) for k, v in d.get("phases", {}).items() if isinstance(v, float)})
PY
  cat "$OUT/gen_$run.txt" | head -3 >> $S
done
cat $S
