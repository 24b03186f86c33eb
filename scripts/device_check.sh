#!/usr/bin/env bash
# The GPU acceptance run, on the device machine (H100/H200), from the repository root:
#   1. GPU tests (bf16 parity on CUDA against transformers),
#   2. make-checkpoint --preset gpt-oss-20b (time, peak RSS),
#   3. generate on it (time),
# with logs under $OUT. Needs the wheels of scripts/fetch_device_wheels.sh carried in .whl/.
set -uo pipefail
OUT=${OUT:-/tmp/quickmoe-out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  || exit 1
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1 QUICKMOE_CACHE_DIR=/tmp/quickmoe-cache
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -c "import torch, transformers, triton; print('torch', torch.__version__, 'transformers', \
transformers.__version__, 'triton', triton.__version__)" | tee -a "$OUT/gpu.txt"

timed() {  # timed NAME CMD...: wall seconds and peak RSS of the command, appended to $OUT/timings.txt
  local name=$1; shift
  python3 - "$name" "$@" <<'PY' 2>&1 | tee "$OUT/$1.log"
import resource, subprocess, sys, time
name, cmd = sys.argv[1], sys.argv[2:]
t0 = time.perf_counter()
rc = subprocess.call(cmd)
dt = time.perf_counter() - t0
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20
line = f"{name}: rc={rc} wall={dt:.1f}s peak_rss={rss:.2f}GiB cmd={' '.join(cmd)}"
print(line)
open(sys.argv[0] if False else __import__('os').environ['OUT'] + '/timings.txt', 'a').write(line + '\n')
PY
}
export OUT
timed gpu_tests python3 -m pytest -q -m gpu -s tests "$@"
timed make_20b python3 -m quickmoe make-checkpoint /tmp/gpt-oss-20b --preset gpt-oss-20b --overwrite -q
du -sb /tmp/gpt-oss-20b | tee -a "$OUT/timings.txt"
timed generate_20b python3 -m quickmoe generate /tmp/gpt-oss-20b --prompt "Hello, world" --max-tokens 32 \
  --temperature 0 --device cuda
timed generate_20b_chat python3 -m quickmoe generate /tmp/gpt-oss-20b --chat --prompt "What is MoE?" \
  --max-tokens 32 --temperature 0 --device cuda
echo "== timings"; cat "$OUT/timings.txt"
