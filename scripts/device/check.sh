#!/usr/bin/env bash
# The GPU acceptance run, on the device machine (H100/H200), from the repository root:
#   1. GPU tests (bf16 parity on CUDA against transformers),
#   2. make-checkpoint --preset gpt-oss-20b (time, peak RSS),
#   3. generate on it (time),
# with logs under $OUT. Needs the wheels of scripts/device/fetch_wheels.sh carried in .whl/.
set -uo pipefail
source "$(dirname "$0")/env.sh"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -c "import torch, transformers, triton; print('torch', torch.__version__, 'transformers', \
transformers.__version__, 'triton', triton.__version__)" | tee -a "$OUT/gpu.txt"

timed() { python3 scripts/device/timed_run.py "$@" 2>&1 | tee "$OUT/$1.log"; }
export OUT
QUICKMOE_TEST_20B_DIR= timed gpu_tests python3 -m pytest -q -m gpu -s tests "$@"
timed make_20b python3 -m quickmoe make-checkpoint /tmp/gpt-oss-20b --preset gpt-oss-20b --overwrite -q
du -sb /tmp/gpt-oss-20b | tee -a "$OUT/timings.txt"
timed generate_20b python3 -m quickmoe generate /tmp/gpt-oss-20b --prompt "Hello, world" --max-tokens 32 \
  --temperature 0 --device cuda
timed generate_20b_chat python3 -m quickmoe generate /tmp/gpt-oss-20b --chat --prompt "What is MoE?" \
  --max-tokens 32 --temperature 0 --device cuda
echo "== timings"; cat "$OUT/timings.txt"
# gpt-oss-20b shapes against transformers bf16 on the same files (needs ~60 GB of GPU memory)
QUICKMOE_TEST_20B_DIR=/tmp/gpt-oss-20b timed parity_20b python3 -m pytest -q -s \
  tests/models/test_parity.py -k gpt_oss_20b_shaped
echo "== timings"; cat "$OUT/timings.txt"
