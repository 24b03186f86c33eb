#!/usr/bin/env bash
# Session 2026-11-28c, call 2: Qwen3-30B-A3B NVFP4 made with the parallel generator, its cold start; gpt-oss-20b's.
set -uo pipefail
source scripts/device/env.sh
el() { python3 -c "import sys, time; print(f'{time.time() - float(sys.argv[1]):.2f}')" "$1"; }
imports() { for i in 1 2 3; do t0=$(date +%s.%N); python3 -c "import torch"; echo "import torch $(el $t0) s" | tee -a "$OUT/import_torch.txt"; done; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
imports
Q=/tmp/qwen3-30b-a3b-nvfp4
t0=$(date +%s.%N); python3 -m quickmoe make-checkpoint $Q --preset qwen3-30b-a3b --weights nvfp4 -q 2>&1 | tee "$OUT/make_nvfp4.txt"
echo "make nvfp4: $(el $t0) s; $(du -sh $Q)" | tee -a "$OUT/make_nvfp4.txt"
timeout 300 python3 -m quickmoe bench coldstart $Q -n 3 --device cuda --compare-uncached --json "$OUT/cold_qwen_nvfp4.json" \
  2>&1 | grep -v INFO | tee "$OUT/cold_qwen_nvfp4.txt"
G=/tmp/gpt-oss-20b
t0=$(date +%s.%N); python3 -m quickmoe make-checkpoint $G --preset gpt-oss-20b -q 2>&1 | tee "$OUT/make_20b.txt"
echo "make 20b: $(el $t0) s" | tee -a "$OUT/make_20b.txt"
timeout 200 python3 -m quickmoe bench coldstart $G -n 3 --device cuda --json "$OUT/cold_20b.json" 2>&1 | grep -v INFO \
  | tee "$OUT/cold_20b.txt"
imports
echo "== done $(date +%T)"
