#!/bin/bash
# session 2026-11-29 ninth, call 4: the FP8 quantizer with its correctly rounded scales: the quantizer probe, then
# Qwen3-30B-A3B FP8 bench generate (batch-1 step), the work tree (new) against fec76a0 (.ab/base), in turns
source scripts/device/env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/gpu.txt
qp() {  # tree turn
  local root=$PWD; [ "$1" != new ] && root=$PWD/.ab/$1
  PYTHONPATH=/tmp/site:$root/src timeout 60 python3 $root/scripts/probes/fp8_quant_probe.py > $OUT/quant_probe_$1_$2.txt 2>&1
  echo "-- quant probe $1 $2 exit $? ($SECONDS s)"
}
qp new a; qp base a; qp new b; qp base b
timeout 150 python3 -m quickmoe make-checkpoint /tmp/q3fp8 --preset qwen3-30b-a3b --weights fp8 -q > $OUT/make_q3fp8.log 2>&1
echo "qwen3 fp8 checkpoint: exit $? ($SECONDS s)"
gen() {  # tree turn
  [ $SECONDS -gt 420 ] && { echo "skipping gen $1 $2: $SECONDS s gone"; return; }
  local root=$PWD; [ "$1" != new ] && root=$PWD/.ab/$1
  local log="$OUT/gen_q3fp8_$1_$2.log"
  PYTHONPATH=/tmp/site:$root/src timeout 100 python3 -m quickmoe bench generate /tmp/q3fp8 --num-prompts 64 \
    --input-len 1000 --output-len 64 --json "$OUT/gen_q3fp8_$1_$2.json" > "$log" 2>&1
  echo "-- gen $1 $2 exit $? ($SECONDS s)"
  grep -E '^decode at batch 1: median|^decode step at batch' "$log" | cut -c1-200
}
gen new a; gen base a; gen new b; gen base b
for f in $OUT/quant_probe_*.txt; do echo "== $(basename $f)"; tail -14 $f; done
cd $OUT && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz .
