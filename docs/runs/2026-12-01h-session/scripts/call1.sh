#!/bin/bash
# Call 1 (2026-12-01 eighth session): FP8 experts' GEMM 1 quantizes GEMM 2's activations in its epilogue (the last
# program of each 128-column group by ticket; work tree) against main as it was (9effe88, .ab/base: the standalone
# quantizer between the GEMMs). GPU tests of the FP8 kernels on the work tree; then bench moe FP8 (Qwen3-30B-A3B,
# Mixtral-8x7B) in turns, two rounds; the per-kernel split at T = 8,192 on both trees.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
BASE=/tmp/site:$PWD/.ab/base/src
NEW=/tmp/site:$PWD/src
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
timeout 240 python3 -m pytest -q -p no:cacheprovider -n 4 tests/kernels/test_moe_gemm1_fp8_out.py \
  tests/kernels/test_fused_moe_quantized.py > $OUT/gpu_tests.log 2>&1
echo "gpu tests: $(tail -1 $OUT/gpu_tests.log) ($SECONDS s)"
for round in 1 2; do
  for tree in new base; do
    P=$NEW; [ $tree = base ] && P=$BASE
    PYTHONPATH=$P timeout 150 python3 -m quickmoe bench moe --shapes qwen3-30b-a3b,mixtral-8x7b --formats fp8 \
      --tokens 1,4,16,64,256,1024,2048,8192 --no-baselines -q --json $OUT/moe_${tree}_r$round.json \
      > $OUT/moe_${tree}_r$round.log 2>&1
    echo "bench moe $tree round $round rc $? ($SECONDS s)"
  done
done
for tree in new base; do
  P=$NEW; [ $tree = base ] && P=$BASE
  PYTHONPATH=$P timeout 90 python3 scripts/probes/moe_kernel_split_probe.py --shapes qwen3-30b-a3b --format fp8 \
    --tokens 16,8192 > $OUT/split_$tree.log 2>&1
  echo "split $tree rc $? ($SECONDS s)"
done
python3 - <<'PY'
import json, glob, os, collections
out = os.environ["OUT"]
rows = collections.defaultdict(dict)
for path in sorted(glob.glob(f"{out}/moe_*_r*.json")):
    tree, rnd = os.path.basename(path)[4:-5].split("_")
    data = json.load(open(path))
    fp8 = data["ceilings"].get("fp8_tflops", 0)
    for r in data["rows"]:
        key = (r["shape"], r["format"], r["tokens"])
        rows[key][f"{tree}_{rnd}"] = (r["quickmoe_graph_s"] * 1e6, r["tflops"] / fp8 * 100 if fp8 else 0)
    print(path, data["ceilings"])
for key in sorted(rows, key=lambda k: (k[0], k[2])):
    cells = " ".join(f"{n} {us:9.1f} us {pct:4.1f}%" for n, (us, pct) in sorted(rows[key].items()))
    print(f"{key[0]:14s} T={key[2]:<5d} {cells}")
PY
for f in $OUT/split_*.log; do echo "== $f"; tail -30 $f; done
echo "($SECONDS s)"
