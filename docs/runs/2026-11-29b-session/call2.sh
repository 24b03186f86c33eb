#!/usr/bin/env bash
# Session 2026-11-29b, call 2 (issue 15): paged attention tiles addressed with int32 offsets (kv_offsets_64) against
# int64, in one process in turns; the attention kernel tests on CUDA; decode launch configs at large batch on the H200.
set -uo pipefail
source scripts/device/env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -m pytest -q -p no:cacheprovider tests/kernels/test_attention_kernels.py > "$OUT/attention_tests.log" 2>&1
echo "attention tests: $(tail -1 "$OUT/attention_tests.log")"; grep -E '^(FAILED|ERROR)' "$OUT/attention_tests.log" | head
python3 .ab/attn_ab.py "$OUT/attn_ab.json" 2>&1 | grep -v Warning | tee "$OUT/attn_ab.txt"
echo "after A/B: $SECONDS s"
if [ $SECONDS -lt 380 ]; then
  python3 scripts/probes/decode_attention_sweep.py --batches 8,64,256 --contexts 1024,4096,16384 --windows 0 \
    --configs n64w2s4k,n64w4s3k,n64w2s6k,n64w4s5k,n64w8s3k,n64w8s4k,n64w1s4k,n64w2s3k --no-extras \
    --json "$OUT/sweep.json" > "$OUT/sweep.txt" 2>&1
  tail -25 "$OUT/sweep.txt"
fi
cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz . && ls
