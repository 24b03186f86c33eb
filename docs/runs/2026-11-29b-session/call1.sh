#!/usr/bin/env bash
# Session 2026-11-29b, call 1: the capped batched host->device copies (MAX_BATCH = 64) on the GPU: a batch-size probe,
# the loader's CUDA tests, q3many (the start that crashed uncapped) and the real Qwen3-30B-A3B NVFP4 with
# QUICKMOE_BATCHED_COPIES and QUICKMOE_HEADER_CACHE in turns, against the import floor.
set -uo pipefail
source scripts/device/env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
git log --oneline -1 > "$OUT/tree.txt" 2>/dev/null
python3 .ab/batch_probe.py 2>&1 | tee "$OUT/batch_probe.txt"
python3 -m pytest -q -p no:cacheprovider tests/unit/test_loader.py tests/unit/test_stacked_loading.py \
  tests/unit/test_batched_memcpy.py tests/unit/test_header_cache.py > "$OUT/loader_tests.log" 2>&1
echo "loader tests: $(tail -1 "$OUT/loader_tests.log")"; grep -E '^(FAILED|ERROR)' "$OUT/loader_tests.log" | head
report() { grep -E "^(imports|config|build|load|process|weights_ready|total) |import torch alone|read \+ host|pieces copied" "$1"
  python3 -c "import json,sys; r=json.load(open(sys.argv[1]))['reports']['quickmoe']
for x in r: l=x['info']['loader']; print('  loader: seconds %.3f deliver %.3f validate %.3f wait %.3f copies %d calls %d' % (l['seconds'], l['deliver_seconds'], l['validate_seconds'], l['wait_seconds'], l.get('direct_copies', -1), l.get('copy_calls', -1)))" "$2" 2>&1 | tail -3; }
start=$SECONDS
python3 scripts/probes/many_tensors_probe.py write /tmp/q3many --weights nvfp4 > /dev/null 2>&1
echo "wrote /tmp/q3many in $((SECONDS - start)) s"
for batched in 1 0; do
  QUICKMOE_BATCHED_COPIES=$batched python3 -m quickmoe bench coldstart /tmp/q3many -n 3 --device cuda \
    --json "$OUT/many_b${batched}.json" > "$OUT/many_b${batched}.txt" 2>&1
  echo "== q3many batched=$batched exit $?"; report "$OUT/many_b${batched}.txt" "$OUT/many_b${batched}.json"
done
start=$SECONDS
python3 -m quickmoe make-checkpoint /tmp/q3nvfp4 --preset qwen3-30b-a3b --weights nvfp4 -q > /dev/null 2>&1
echo "made the Qwen3 NVFP4 checkpoint in $((SECONDS - start)) s"
for turn in "1 1 a" "0 1 a" "1 0 a" "1 1 b" "0 1 b"; do
  set -- $turn
  [ $SECONDS -gt 540 ] && { echo "stopping: $SECONDS s gone"; break; }
  tag=qwen_b$1_h$2_$3
  QUICKMOE_BATCHED_COPIES=$1 QUICKMOE_HEADER_CACHE=$2 python3 -m quickmoe bench coldstart /tmp/q3nvfp4 -n 3 \
    --device cuda --import-floor --json "$OUT/$tag.json" > "$OUT/$tag.txt" 2>&1
  echo "== Qwen3 NVFP4 batched=$1 header_cache=$2 turn $3 exit $? ($SECONDS s)"; report "$OUT/$tag.txt" "$OUT/$tag.json"
done
cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz . && ls
