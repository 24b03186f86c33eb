#!/usr/bin/env bash
# Session 2026-11-29b, call 7 (issue 18): chunks of many small tensors landed whole and scattered on the GPU
# (kernels/scatter_bytes.py): the kernel and loader tests on CUDA, then Qwen3-30B-A3B NVFP4 cold starts with
# QUICKMOE_SCATTER_COPIES=1|0 in turns, against the import floor.
set -uo pipefail
source scripts/device/env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
(python3 -m quickmoe make-checkpoint /tmp/q3nvfp4 --preset qwen3-30b-a3b --weights nvfp4 -q > "$OUT/make.log" 2>&1; echo "made: exit $?" >> "$OUT/make.log") &
python3 -m pytest -q -p no:cacheprovider tests/kernels/test_scatter_bytes.py tests/unit/test_scatter_plan.py \
  tests/unit/test_loader.py tests/unit/test_batched_memcpy.py > "$OUT/tests.log" 2>&1
echo "tests: $(tail -1 "$OUT/tests.log")"; grep -E '^(FAILED|ERROR)' "$OUT/tests.log" | head
wait; echo "checkpoint made at $SECONDS s: $(tail -1 "$OUT/make.log")"
report() { grep -E "^(imports|config|build|load|process|weights_ready) |import torch alone|read \+ host" "$1"
  python3 -c "import json,sys; r=json.load(open(sys.argv[1]))['reports']['quickmoe']
for x in r: l=x['info']['loader']; print('  loader: seconds %.3f deliver %.3f validate %.3f wait %.3f copies %d calls %d scattered %d' % (l['seconds'], l['deliver_seconds'], l['validate_seconds'], l['wait_seconds'], l.get('direct_copies', -1), l.get('copy_calls', -1), l.get('scattered_pieces', -1)))" "$2" 2>&1 | tail -3; }
for turn in "1 a" "0 a" "1 b" "0 b"; do
  set -- $turn
  [ $SECONDS -gt 275 ] && { echo "stopping: $SECONDS s gone"; break; }
  QUICKMOE_SCATTER_COPIES=$1 python3 -m quickmoe bench coldstart /tmp/q3nvfp4 -n 3 --device cuda --import-floor \
    --json "$OUT/qwen_s$1_$2.json" > "$OUT/qwen_s$1_$2.txt" 2>&1
  echo "== Qwen3 NVFP4 scatter=$1 turn $2 exit $? ($SECONDS s)"; report "$OUT/qwen_s$1_$2.txt" "$OUT/qwen_s$1_$2.json"
done
cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz . && ls
