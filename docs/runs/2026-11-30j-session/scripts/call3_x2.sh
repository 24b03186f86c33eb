#!/usr/bin/env bash
# Session 2026-11-30j call 3 (nvidia-h200-x2). GPU 1: scripts/tune_moe.py --shapes gpt-oss-120b --tokens 256,512
# (does the tuner with c4fe63a's 32-row candidates pick what the H200 file's key 256 holds by hand?), beside the
# 120b checkpoint's make. Then the host probe on gpt-oss-120b at TP = 2, batch 256 (the work tree): the kernel
# timeline of rank 0 (summed, span, gaps, the kernels that took most).
set -uo pipefail
t0=$(date +%s)
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
export NCCL_NVLS_ENABLE=0 NCCL_CUMEM_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
python3 -m quickmoe make-checkpoint /tmp/gpt-oss-120b --preset gpt-oss-120b -q > "$OUT/make120.log" 2>&1 &
mk=$!
mkdir -p /tmp/tuned && cp src/quickmoe/kernels/configs/*.json /tmp/tuned/
CUDA_VISIBLE_DEVICES=1 timeout -k 10 330 python3 scripts/tune_moe.py --shapes gpt-oss-120b --tokens 256,512 \
  --out /tmp/tuned > "$OUT/tune.txt" 2>&1
echo "tune: exit $? at $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
grep -v skipped "$OUT/tune.txt" | tail -8 >> "$OUT/summary.txt"
for f in E128_N2880_K2880_mxfp4_gate_up_NVIDIA_H200.json E128_N2880_K2880_mxfp4_down_NVIDIA_H200.json; do
  cp /tmp/tuned/$f "$OUT/tuned_$f"
  python3 - "$f" >> "$OUT/summary.txt" <<'PY'
import json, sys
name = sys.argv[1]
old = json.load(open("src/quickmoe/kernels/configs/" + name)); new = json.load(open("/tmp/tuned/" + name))
for key in ("256", "512"):
    print(name.split("_mxfp4_")[1].split("_NVIDIA")[0], key, "file:", old.get(key), "| tuned now:", new.get(key))
PY
done
while kill -0 $mk 2>/dev/null; do sleep 1; done
echo "120b checkpoint at $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
s=$(date +%s)
CUDA_VISIBLE_DEVICES=0,1 QUICKMOE_CACHE_DIR=/tmp/qc-tp2 timeout -k 10 240 python3 scripts/probes/host_step_probe.py \
  /tmp/gpt-oss-120b --batch 256 --steps 40 --tp 2 --no-cprofile > "$OUT/host_120b_tp2.log" 2>&1
{ echo "-- host probe 120b TP=2: exit $? in $(( $(date +%s) - s )) s"
  grep -E "^batch|^  (allocator|launch|collect|schedule|under|profiler)|^    |Error" "$OUT/host_120b_tp2.log" \
    | grep -v "\.py:" | head -40; } >> "$OUT/summary.txt"
echo "total $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
cat "$OUT/summary.txt"
