#!/usr/bin/env bash
# Session 2026-11-30g call 1 (nvidia-h200-x2): issue 20's runs left at TP=2 on b69b3c8: the two-GPU exit test, then
# gpt-oss-120b served at TP=2 / EP=2 / TP=1 (bench serve c=1 and c=64) and bench coldstart at the three.
set -uo pipefail
source scripts/device/env.sh
trap '[ -f "$OUT/all_logs.tgz" ] || (cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/")' EXIT
export NCCL_NVLS_ENABLE=0 NCCL_CUMEM_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
python3 -m quickmoe make-checkpoint /tmp/gpt-oss-120b --preset gpt-oss-120b -q > "$OUT/make.log" 2>&1 &
mk=$!
s=$(date +%s)
timeout -k 5 150 python3 -m pytest -q -rA -p no:cacheprovider -m gpu tests/distributed/test_two_gpus.py \
  > "$OUT/two_gpus_test.log" 2>&1
echo "two-GPU test: exit $? in $(( $(date +%s) - s )) s: $(tail -1 "$OUT/two_gpus_test.log")" | tee -a "$OUT/timeline.txt"
wait $mk; echo "checkpoint: exit $? at $(( $(date +%s) - s )) s" | tee -a "$OUT/timeline.txt"
TP=2 timeout -k 10 $(( 560 - ($(date +%s) - s) )) bash scripts/device/tp.sh serve serve-ep serve1 coldstart coldstart1 2>&1 | tee "$OUT/tp.log" \
  | grep -E "^==|ready after|exit|^(total|weights_ready|first_token) " 
