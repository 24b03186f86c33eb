#!/bin/bash
# Call 3 (2026-12-01 eighth session): where a Qwen3-30B-A3B FP8 decode step goes on main (9effe88): the FP8
# checkpoint (make-checkpoint --weights fp8), then bench generate 16 x 1000 -> 128 with the serving defaults; its
# profiles give the batch-1 and batch-16 steps by op family and by kernel (JSON).
source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
Q=/tmp/qwen3-fp8
timeout 300 python3 -m quickmoe make-checkpoint $Q --preset qwen3-30b-a3b --weights fp8 -q > $OUT/make.log 2>&1
echo "checkpoint rc $? ($SECONDS s)"
timeout 240 python3 -m quickmoe bench generate $Q --num-prompts 16 --input-len 1000 --output-len 128 \
  --json $OUT/gen_q3fp8.json > $OUT/gen_q3fp8.log 2>&1
echo "generate rc $? ($SECONDS s)"
grep -E "by op family|decode step|output tok/s" $OUT/gen_q3fp8.log | cut -c1-240
python3 - <<'PY'
import json, os
d = json.load(open(os.environ["OUT"] + "/gen_q3fp8.json"))
def walk(x, path=""):
    if isinstance(x, dict):
        for k, v in x.items():
            if k in ("top", "top_kernels", "kernels") and isinstance(v, (list, dict)):
                print("==", path + "/" + k)
                items = v.items() if isinstance(v, dict) else v
                for it in list(items)[:24]:
                    print("  ", it)
            else:
                walk(v, path + "/" + k)
    elif isinstance(x, list):
        for i, v in enumerate(x[:4]):
            walk(v, f"{path}[{i}]")
walk(d)
PY
