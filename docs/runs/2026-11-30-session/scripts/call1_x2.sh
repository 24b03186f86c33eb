#!/usr/bin/env bash
# Issue 20 check on nvidia-h200-x2: the exit-hang fix (d99bb88) and EP's foreign assignments (7fc063b) on two GPUs.
set -uo pipefail
source scripts/device/env.sh
export NCCL_NVLS_ENABLE=0 NCCL_CUMEM_ENABLE=0
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
git log --oneline -1 > "$OUT/tree.txt" 2>/dev/null || true
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
s=$(date +%s)
timeout -k 5 200 python3 -m pytest -q -p no:cacheprovider -m gpu tests/distributed/test_two_gpus.py \
  tests/unit/test_llm_shutdown.py > "$OUT/two_gpu_tests.log" 2>&1
echo "two-GPU tests: exit $? in $(( $(date +%s) - s )) s" | tee -a "$OUT/timeline.txt"
tail -3 "$OUT/two_gpu_tests.log"
TP=2 timeout -k 5 380 bash scripts/device/tp.sh generate generate-ep > "$OUT/tp_stages.txt" 2>&1
echo "tp.sh generate generate-ep: exit $?" | tee -a "$OUT/timeline.txt"
cp /tmp/quickmoe-out/timeline.txt "$OUT/tp_timeline.txt" 2>/dev/null || true
cat "$OUT/tp_stages.txt" | tail -20
