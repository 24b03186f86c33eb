#!/usr/bin/env bash
# call 1 on nvidia-h200-x2: NCCL smoke on 20b (TP=2, EP=2), then 120b parity + coldstart.
set -uo pipefail
source scripts/device/env.sh
export NCCL_NVLS_ENABLE=0 NCCL_CUMEM_ENABLE=0
T0=$(date +%s)
left() { echo $(( ${1} - ($(date +%s) - T0) )); }
finish() { cd "$OUT" && tar czf /tmp/all_logs.tgz --exclude='*.pt' . && mv /tmp/all_logs.tgz "$OUT/all_logs.tgz"; }
trap finish EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$OUT/gpu.txt"
nvidia-smi topo -m > "$OUT/topo.txt"
( s=$(date +%s); python3 -m quickmoe make-checkpoint /tmp/gpt-oss-120b --preset gpt-oss-120b -q > "$OUT/make120b.log" 2>&1;
  echo "make120b rc $? $(( $(date +%s) - s )) s" >> "$OUT/make120b.log" ) &
MK=$!
s=$(date +%s); python3 -m quickmoe make-checkpoint /tmp/gpt-oss-20b --preset gpt-oss-20b -q > "$OUT/make20b.log" 2>&1
echo "make20b $(( $(date +%s) - s )) s"
for mode in tp2 ep2; do
  extra=(); [ $mode = ep2 ] && extra=(--enable-expert-parallel)
  s=$(date +%s)
  timeout 200 python3 -m quickmoe bench generate /tmp/gpt-oss-20b -tp 2 "${extra[@]}" --num-prompts 64 --input-len 200 \
    --output-len 64 --json "$OUT/smoke20b_$mode.json" > "$OUT/smoke20b_$mode.log" 2>&1
  echo "smoke20b $mode rc $? $(( $(date +%s) - s )) s"; tail -n 25 "$OUT/smoke20b_$mode.log" | grep -v INFO | tail -n 12
done
wait $MK; tail -n 2 "$OUT/make120b.log"
[ -f /tmp/gpt-oss-120b/config.json ] || exit 1
OUT=$OUT timeout $(left 420) bash scripts/device/tp.sh parity 2>&1 | tail -n 8
echo "left $(left 560)"
[ $(left 560) -gt 150 ] && OUT=$OUT timeout $(left 555) bash scripts/device/tp.sh coldstart 2>&1 | grep -v "^  " | tail -n 30
[ $(left 560) -gt 60 ] && OUT=$OUT timeout $(left 555) bash scripts/device/tp.sh coldstart1 2>&1 | tail -n 20
echo "total $(( $(date +%s) - T0 )) s"
