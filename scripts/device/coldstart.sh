#!/usr/bin/env bash
# Cold-start acceptance run (issue 3) on the device machine, from the repository root; logs under $OUT.
# Needs the wheels of scripts/device/fetch_wheels.sh carried in .whl/. Two stages, each within one 10-minute call:
#   scripts/device/coldstart.sh 1   GPU tests; 20b warm page cache (+ no-cache, + transformers, + early start off);
#                                   20b dropped page cache (+ transformers, + prefetch off)
#   scripts/device/coldstart.sh 2   120b (fewer layers) warm (+ no-cache); the H2D pipeline probe; 20b warm again
set -uo pipefail
source "$(dirname "$0")/env.sh"
LAYERS_120B=${LAYERS_120B:-12}   # 120b has 36 layers (65 GB): the disk holds 64 GB, so fewer layers, scaled per layer
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
STAGE=${1:-1}
bench() {  # bench NAME ARGS...: one `bench coldstart` run, table to stdout and $OUT/NAME.txt, JSON to $OUT/NAME.json
  local name=$1; shift
  echo "== $name: $*"
  python3 -m quickmoe bench coldstart "$@" --json "$OUT/$name.json" 2>&1 | grep -v INFO | tee "$OUT/$name.txt"
}
if [ "$STAGE" = 1 ]; then
  python3 -m pytest -q -m gpu tests 2>&1 | tee "$OUT/gpu_tests.log" | grep -E "passed|failed|error" || exit 1
  grep -q failed "$OUT/gpu_tests.log" && exit 1
  [ -f /tmp/gpt-oss-20b/config.json ] || python3 -m quickmoe make-checkpoint /tmp/gpt-oss-20b --preset gpt-oss-20b -q
  bench cold_20b_warm /tmp/gpt-oss-20b -n 3 --device cuda --compare-uncached --baseline transformers
  QUICKMOE_CUDA_PREINIT=0 bench cold_20b_warm_nopreinit /tmp/gpt-oss-20b -n 3 --device cuda
  QUICKMOE_LOADER=chunk_mib=32 bench cold_20b_warm_c32 /tmp/gpt-oss-20b -n 3 --device cuda
  bench cold_20b_dropped /tmp/gpt-oss-20b -n 2 --device cuda --drop-caches --baseline transformers
  QUICKMOE_PREFETCH=0 bench cold_20b_dropped_noprefetch /tmp/gpt-oss-20b -n 2 --device cuda --drop-caches
fi
if [ "$STAGE" = 2 ]; then
  [ -f /tmp/gpt-oss-120b/config.json ] || python3 -m quickmoe make-checkpoint /tmp/gpt-oss-120b --preset gpt-oss-120b \
    --layers "$LAYERS_120B" -q
  bench "cold_120b_${LAYERS_120B}L" /tmp/gpt-oss-120b -n 2 --device cuda --compare-uncached
  python3 scripts/probes/h2d_pipeline_probe.py /tmp/gpt-oss-120b 2>&1 | grep -v INFO | tee "$OUT/h2d_pipeline_probe.txt"
  [ -f /tmp/gpt-oss-20b/config.json ] || python3 -m quickmoe make-checkpoint /tmp/gpt-oss-20b --preset gpt-oss-20b -q
  bench cold_20b_warm_recheck /tmp/gpt-oss-20b -n 3 --device cuda
fi
