#!/bin/bash
# session 2026-11-29 ninth, call 1: split-K MoE GEMMs: GPU tests, then the tuned decode configs in parts
source scripts/device/env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
python3 -m pytest -q -p no:cacheprovider \
  "tests/kernels/test_fused_moe.py::test_k_in_parts_on_the_gpu_are_deterministic_and_near_one_part" \
  tests/kernels/test_fused_moe.py::test_eight_row_tiles_give_the_sixteen_row_tiles_bits \
  > $OUT/gpu_tests.txt 2>&1
tail -3 $OUT/gpu_tests.txt
sweep() {  # name, args...
  local name=$1; shift
  timeout 300 python3 scripts/probes/moe_config_sweep.py --tuned-only --split 2,3,4,6 --top 8 "$@" \
    --json $OUT/sweep_$name.json > $OUT/sweep_$name.txt 2>&1
  echo "== $name rc $?"; grep -E 'tuned|split' $OUT/sweep_$name.txt | head -200 > /dev/null
}
sweep 20b --shape gpt-oss-20b --format mxfp4 --tokens 1,2,4,8,16,32,64
sweep q3fp8 --shape qwen3-30b-a3b --format fp8 --tokens 1,2,4,8,16,32
sweep q3nv --shape qwen3-30b-a3b --format nvfp4 --tokens 1,4,16
sweep mxfp8 --shape mixtral-8x7b --format fp8 --tokens 1,4,16
sweep 120b --shape gpt-oss-120b --format mxfp4 --tokens 1,4,16
python3 - <<'PY'
import json, glob, os
out = os.environ["OUT"]
for path in sorted(glob.glob(f"{out}/sweep_*.json")):
    for r in json.load(open(path)):
        best = {}
        for t in r["timed"]:
            best.setdefault(t["split_k"], t["us"])
        row = " ".join(f"s{k}={v:.1f}" for k, v in sorted(best.items()))
        print(f"{r['shape']:14s} {r['format']:6s} T={r['tokens']:<3d} gemm{r['gemm']} tuned {r['tuned_us']:.1f} | {row}")
PY
cd $OUT && tar czf all_logs.tgz *.txt *.json
