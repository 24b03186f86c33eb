#!/bin/bash
# Call 3 (2026-12-01 fourth session): positions in 32 bits in both attention kernels (the work tree) against the base
# (.ab/base = 54e6c29's src) in turns: bench attention's default grid (decode and prefill, gpt-oss); the prefill
# sweep of 1-3 stages on the new masks; the attention kernel tests on CUDA.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > $OUT/gpu.txt
timeout 200 python3 -m pytest -q -p no:cacheprovider -n 4 tests/kernels/test_attention_kernels.py \
  > $OUT/attention_tests.log 2>&1 &
tests=$!
for round in 1 2; do
  for tree in new base; do
    src=$PWD/src; [ $tree = base ] && src=$PWD/.ab/base/src
    PYTHONPATH=/tmp/site:$src timeout 100 python3 -m quickmoe bench attention \
      --json $OUT/attn_${tree}_r$round.json > $OUT/attn_${tree}_r$round.log 2>&1
    echo "attention $tree round $round rc $? ($SECONDS s)"
    [ $round = 1 ] && [ $tree = new ] && { wait $tests; echo "attention tests: $(tail -1 $OUT/attention_tests.log)"; \
      grep -E '^(FAILED|ERROR)' $OUT/attention_tests.log | head -5; }
  done
done
timeout 120 python3 scripts/probes/prefill_attention_sweep.py --block-q 16 --block-n 64 --warps 8 --stages 1,2,3 \
  --orders 1 --maxnreg 128 --json $OUT/stages_gptoss.json > $OUT/stages_gptoss.log 2>&1
echo "stage sweep rc $? ($SECONDS s)"; grep '^|' $OUT/stages_gptoss.log | head -6
python3 - $OUT <<'PY'
import json, sys, glob
out = sys.argv[1]
runs = {f.split('/')[-1][5:-5]: json.load(open(f)) for f in sorted(glob.glob(f"{out}/attn_*_r*.json"))}
keys = sorted(runs)
print("decode us: batch context window | " + " | ".join(keys) + " | SDPA (" + keys[0] + ")")
first = runs[keys[0]]
for i, r in enumerate(first["decode"]):
    print(f"{r['batch']:4d} {r['context']:6d} {r['window']:4d} | " + " | ".join(f"{runs[k]['decode'][i]['quickmoe_s']*1e6:7.1f}" for k in keys)
          + f" | {r['sdpa_s']*1e6:7.1f}")
print("prefill us")
for i, r in enumerate(first["prefill"]):
    print(f"{r['batch']:4d} {r['length']:6d} {r['window']:4d} | " + " | ".join(f"{runs[k]['prefill'][i]['quickmoe_s']*1e6:7.1f}" for k in keys)
          + (f" | {r['sdpa_s']*1e6:7.1f}" if r['sdpa_s'] else ""))
PY
