#!/bin/bash
# Call 3 (2026-11-30 eighteenth session, issue 15): decode attention with deeper software pipelines. Triton gives the
# split kernel's gathered K/V tiles one shared buffer at 3-4 stages and two at 6 (ttgir, compiled on the development
# machine): at 2-4 programs an SM (16-48 sequences) one or two tiles in flight a program may not cover HBM's latency.
# 2 warps at 4-12 stages (6 the H200 rule at 9-512 programs, 4 beyond), split counts 1/2/4 and the default, full
# layers twice, the 128-key window once.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > $OUT/gpu.txt
for i in 1 2; do
  timeout 220 python3 scripts/probes/decode_attention_sweep.py --batches 1,8,16,24,32,48,64,128,256 \
    --contexts 1024,4096,16384 --windows 0 --no-extras --configs n64w2s4k,n64w2s6k,n64w2s8k,n64w2s10k,n64w2s12k \
    --splits 1,2,4 --json $OUT/deep_$i.json > $OUT/deep_$i.log 2>&1
  echo "full layers sweep $i rc $? ($SECONDS s)"
done
timeout 120 python3 scripts/probes/decode_attention_sweep.py --batches 1,8,16,32,64,256 \
  --contexts 4096 --windows 128 --no-extras --configs n64w4s2,n64w2s4k,n64w2s6k,n64w2s8k,n64w4s4,n64w4s6 \
  --json $OUT/deep_window.json > $OUT/deep_window.log 2>&1
echo "window sweep rc $? ($SECONDS s)"
python3 - <<'PY'
import json, os
out = os.environ["OUT"]
for name in ("deep_1", "deep_2", "deep_window"):
    try:
        points = json.load(open(f"{out}/{name}.json"))["points"]
    except (OSError, ValueError) as exc:
        print("no json", name, exc); continue
    print("==", name)
    for r in points:
        best = sorted(r["grid"] + [{"config": f"w{c['num_warps']}s{c['num_stages']}", "splits": "d", "us": c["us"]} for c in r.get("configs", [])],
                      key=lambda g: g["us"])[:4]
        print(r["batch"], r["context"], r["window"], "default", round(r["default_us"], 1), "sdpa", round(r["sdpa_us"], 1),
              "; ".join(f"{g['config']}@{g['splits']} {g['us']}" for g in best))
PY
