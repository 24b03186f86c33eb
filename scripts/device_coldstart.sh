#!/usr/bin/env bash
# Cold-start acceptance run (issue 3) on the device machine, from the repository root; logs under $OUT.
# Needs the wheels of scripts/fetch_device_wheels.sh carried in .whl/. Two stages, each within one 10-minute call:
#   scripts/device_coldstart.sh 1   GPU tests, checkpoints, 20b warm page cache (+ no-cache, + transformers)
#   scripts/device_coldstart.sh 2   20b dropped page cache (+ transformers), 120b (fewer layers) warm (+ no-cache)
set -uo pipefail
OUT=${OUT:-/tmp/quickmoe-out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  || exit 1
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1 QUICKMOE_CACHE_DIR=/tmp/quickmoe-cache HF_HUB_OFFLINE=1 OUT
LAYERS_120B=${LAYERS_120B:-12}   # 120b has 36 layers (65 GB): the disk holds 64 GB, so fewer layers, scaled per layer
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
STAGE=${1:-1}
[ -f /tmp/gpt-oss-20b/config.json ] || python3 -m quickmoe make-checkpoint /tmp/gpt-oss-20b --preset gpt-oss-20b -q
[ -f /tmp/gpt-oss-120b/config.json ] || python3 -m quickmoe make-checkpoint /tmp/gpt-oss-120b --preset gpt-oss-120b \
  --layers "$LAYERS_120B" -q
if [ "$STAGE" = 1 ]; then
python3 -m pytest -q -m gpu -s tests 2>&1 | tee "$OUT/gpu_tests.log" | grep -E "passed|failed|error|cuda L=" 
python3 -m quickmoe bench coldstart /tmp/gpt-oss-20b -n 3 --device cuda --compare-uncached --baseline transformers \
  --json "$OUT/cold_20b_warm.json" 2>&1 | grep -v INFO | tee "$OUT/cold_20b_warm.txt"
fi
if [ "$STAGE" = 2 ]; then
cat /tmp/gpt-oss-20b/*.safetensors > /dev/null
python3 scripts/loader_sweep.py /tmp/gpt-oss-20b 2>&1 | grep -v INFO | tee "$OUT/loader_sweep.txt"
QUICKMOE_PREFETCH=0 python3 -m quickmoe bench coldstart /tmp/gpt-oss-20b -n 2 --device cuda --drop-caches \
  --json "$OUT/cold_20b_dropped_noprefetch.json" 2>&1 | grep -v INFO | tee "$OUT/cold_20b_dropped_noprefetch.txt"
python3 -m quickmoe bench coldstart /tmp/gpt-oss-20b -n 2 --device cuda --drop-caches --baseline transformers \
  --json "$OUT/cold_20b_dropped.json" 2>&1 | grep -v INFO | tee "$OUT/cold_20b_dropped.txt"
python3 -m quickmoe bench coldstart /tmp/gpt-oss-120b -n 2 --device cuda --compare-uncached \
  --json "$OUT/cold_120b_${LAYERS_120B}L.json" 2>&1 | grep -v INFO | tee "$OUT/cold_120b.txt"
fi
