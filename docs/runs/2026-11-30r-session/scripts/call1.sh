#!/bin/bash
# Call 1 (2026-11-30 eighteenth session, issue 15): (a) decode attention at 12-48 sequences of full layers with 1, 2,
# 4 and 8 splits (SDPA led at 16-32 x 1k by 8-17%); (b) prefill attention's launch re-swept on the H200 since whole
# tiles landed (db417f2), with the new grid order (longest query tiles first) beside the old, bits checked.
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > $OUT/gpu.txt
for i in 1 2; do
  timeout 200 python3 scripts/probes/decode_attention_sweep.py --batches 12,16,24,32,48 \
    --contexts 1024,4096,16384 --windows 0 --no-extras --configs n64w2s6k,n64w2s4k --splits 1,2,4,8 \
    --json $OUT/decode_splits_$i.json > $OUT/decode_splits_$i.log 2>&1
  echo "decode sweep $i rc $? ($SECONDS s)"
done
timeout 300 python3 scripts/probes/prefill_attention_sweep.py --block-q 8,16,32 --block-n 64 --warps 4,8 \
  --stages 2,3,4 --orders 1,0 --json $OUT/prefill_sweep.json > $OUT/prefill_sweep.log 2>&1
echo "prefill sweep rc $? ($SECONDS s)"
tail -n 25 $OUT/prefill_sweep.log
python3 - <<'PY'
import json, os
out = os.environ["OUT"]
for i in (1, 2):
    try:
        rows = json.load(open(f"{out}/decode_splits_{i}.json"))
    except (OSError, ValueError) as exc:
        print("no json", i, exc); continue
    rows = rows["points"]
    for r in rows:
        grid = {}
        for g in r.get("grid", []):
            grid.setdefault(g["splits"], []).append(g["us"])
        print(i, r.get("batch"), r.get("context"), "sdpa", round(r.get("sdpa_us", 0), 1),
              {s: min(v) for s, v in sorted(grid.items())})
PY
