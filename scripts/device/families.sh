#!/usr/bin/env bash
# Issue 18's GPU figures (Qwen3-MoE, Mixtral; bf16, FP8 block-scaled, NVFP4), on the device machine from the
# repository root (wheels of fetch_wheels.sh carried in .whl/); logs under $OUT (the device tool brings back 8 files
# at most: pass OUT=/tmp/o and tar it into the real $OUT when several stages run). Stages (each fits one 10-minute
# call; several may be given, in order):
#   tests      the GPU-marked family tests (bf16 parity against transformers, FP8 / NVFP4 experts on the GPU)
#   moe        bench moe for the Qwen3-30B-A3B and Mixtral-8x7B layer shapes, every format, against F.grouped_mm
#              bf16 and transformers' experts; ceilings (HBM, bf16 and FP8 matmul rates) measured in the same run:
#              every format faster than grouped_mm at every T; FP8 at T = 8192 >= 50% of the FP8 matmul rate
#   make       only make the Qwen3-30B-A3B FP8 and NVFP4 checkpoints (timed): on 2026-11-24 `coldstart` with the
#              making did not finish in one 10-minute call; a warm machine keeps /tmp for the next call
#   coldstart  Qwen3-30B-A3B checkpoints in FP8 and NVFP4 (bf16 attention), bench coldstart -n 3 with
#              --compare-uncached (the PermutationCache's ratio): processing <= 0.5 s, cache misses = distinct keys,
#              weights_ready <= import torch + 2 s
#   serve      quickmoe serve on each Qwen3-30B-A3B checkpoint (fp8, nvfp4, bf16; bf16's 61 GB go to /dev/shm: the
#              disk holds 64 GB), bench serve at concurrency 1 and 32 (1000 -> 256)
#   fp8-gemm   the FP8 dense GEMM's tests on CUDA and scripts/probes/fp8_gemm_probe.py (Qwen3-30B-A3B dense shapes)
#   gluon-fp8  scripts/probes/gluon_fp8_probe.py: the block-scaled FP8 GEMM in Gluon, plain and warp-specialized
#              persistent, beside our Triton kernel and torch._scaled_mm (Qwen3-like and 4k shapes; gluon_fp8.log):
#              does the warp-specialized design pass ~820 TFLOP/s, the way to FP8 MoE at 50% of the FP8 rate?
#   fp8-tiles  scripts/probes/fp8_decode_tile_probe.py: which FP8 decode tiles compute wrong results at T = 1-16 on
#              this GPU, and in which rows of their tile (fp8_decode_tiles.{log,json}; all right on the H200: what was
#              wrong there was the activations' quantizer), then scripts/probes/fp8_quant_tiles_probe.py (the
#              quantizers' bits at every launch: fp8_quant_tiles.{log,json})
#   moe-sweep  scripts/probes/moe_config_sweep.py for SWEEP_FORMAT (fp8) experts of both shapes at SWEEP_TOKENS
#              (8192): the prefill launch configs (BLOCK_M 64-256, 4 / 8 warps, 3 / 4 stages, M-tile groups of 1 / 8;
#              GEMM 2's BLOCK_N 64-256), each GEMM alone in a CUDA graph (moe_sweep_FORMAT.{log,json}); SWEEP_SWAP
#              (0; "0,1" adds the transposed orientation, which won Mixtral NVFP4's prefill sizes on the H200 once NVFP4
#              took the mma-pair decode) and SWEEP_ONE_DOT (0) widen it; e.g. the next NVFP4 check on an H100:
#              SWEEP_FORMAT=nvfp4 SWEEP_TOKENS=2048,8192 SWEEP_SWAP=0,1 SWEEP_ONE_DOT=1 SWEEP_BLOCK_K=64 SWEEP_STAGES=3
#   tma        weight tiles by TMA (`weight_tma`): first the model-sized shipped-config tests of Mixtral FP8 (its H200
#              files take TMA tiles at T = 1,024-8,192; T = 2,048 and 8,192 were not reached in the session that
#              made them), then moe_config_sweep.py --around-tuned --weight-tma 0,1 for TMA_FORMAT (nvfp4) experts of
#              both shapes at TMA_TOKENS (2048,8192), each GEMM alone (tma_sweep_FORMAT_SHAPE.{txt,json}). Packed
#              FP4 tiles by TMA are built and tested on the CPU but not timed yet: FP8's gained 6-26% per GEMM on the
#              H200 (docs/benchmarks.md, 2026-11-29 sixth session); Mixtral NVFP4 is 0.90-0.96x of F.grouped_mm bf16
set -uo pipefail
source "$(dirname "$0")/env.sh"
qwen() {  # qwen FORMAT: the Qwen3-30B-A3B-shaped checkpoint with experts in FORMAT, made once (bf16, 61 GB, in
  # /dev/shm: the disk holds 64 GB)
  local dir=/tmp/qwen3-30b-a3b-$1 free_gb
  [ "$1" = bf16 ] && dir=/dev/shm/qwen3-30b-a3b-bf16
  if [ ! -f "$dir/config.json" ]; then
    if [ "$1" = bf16 ]; then
      free_gb=$(df -BG --output=avail /dev/shm | tail -1 | tr -dc 0-9)
      [ "$free_gb" -ge 66 ] || mount -o remount,size=100G /dev/shm || { echo "/dev/shm: ${free_gb} GB" >&2; exit 1; }
    fi
    local start=$SECONDS
    python3 -m quickmoe make-checkpoint "$dir" --preset qwen3-30b-a3b --weights "$1" -q >&2
    echo "made $dir in $((SECONDS - start)) s" >> "$OUT/make.txt"
  fi
  echo "$dir"
}
serve_bench() {  # serve_bench FORMAT
  local dir
  dir=$(qwen "$1")
  python3 -m quickmoe serve "$dir" --port 8018 > "/tmp/serve_$1.log" 2>&1 &
  local server=$!
  for _ in $(seq 300); do curl -sf localhost:8018/health > /dev/null && break; sleep 1; done
  echo "-- qwen3-30b-a3b $1" | tee -a "$OUT/families_serve.txt"
  python3 -m quickmoe bench serve --base-url http://127.0.0.1:8018 --concurrency 1,32 --input-len 1000 \
    --output-len 256 --result-json "$OUT/serve_$1.json" > "/tmp/bench_serve_$1.txt" 2>&1
  grep -A3 "conc    ok" "/tmp/bench_serve_$1.txt" | tee -a "$OUT/families_serve.txt"
  grep -E "KV cache|captured decode" "/tmp/serve_$1.log" >> "$OUT/families_serve.txt"
  kill -TERM "$server"; wait "$server"
}

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >> "$OUT/gpu.txt"
for stage in "$@"; do
  echo "== $stage ($(date +%T))"
  case "$stage" in
    tests)
      python3 -m pytest -q -p no:cacheprovider -m gpu tests/models/test_parity_families.py \
        tests/kernels/test_fused_moe_quantized.py 2>&1 | tee "$OUT/families_gpu_tests.log" | tail -4 ;;
    moe)
      python3 -m quickmoe bench moe --shapes qwen3-30b-a3b,mixtral-8x7b --json "$OUT/bench_moe_families.json" 2>&1 \
        | grep -v INFO | tee "$OUT/bench_moe_families.txt" ;;
    make)
      for fmt in fp8 nvfp4; do
        start=$(date +%s); qwen "$fmt" > /dev/null; echo "made $fmt in $(( $(date +%s) - start )) s" | tee -a "$OUT/make.txt"
      done ;;
    coldstart)
      for fmt in fp8 nvfp4; do
        python3 -m quickmoe bench coldstart "$(qwen $fmt)" -n 3 --device cuda --compare-uncached \
          --json "$OUT/cold_qwen_$fmt.json" 2>&1 | grep -v INFO | tee "$OUT/cold_qwen_$fmt.txt"
      done ;;
    serve)
      for fmt in ${SERVE_FORMATS:-fp8 nvfp4 bf16}; do serve_bench "$fmt"; done ;;
    fp8-gemm)
      python3 -m pytest -q -p no:cacheprovider tests/kernels/test_fp8_gemm.py 2>&1 | tail -2
      python3 scripts/probes/fp8_gemm_probe.py 2>&1 | tee "$OUT/fp8_gemm_probe.txt" ;;
    gluon-fp8)
      timeout -k 5 300 python3 scripts/probes/gluon_fp8_probe.py --json "$OUT/gluon_fp8.json" 2>&1 \
        | tee "$OUT/gluon_fp8.log" | grep -E "TFLOP|Error" ;;
    fp8-tiles)
      python3 scripts/probes/fp8_decode_tile_probe.py --json "$OUT/fp8_decode_tiles.json" 2>&1 \
        | tee "$OUT/fp8_decode_tiles.log"
      python3 scripts/probes/fp8_quant_tiles_probe.py --json "$OUT/fp8_quant_tiles.json" 2>&1 \
        | tee "$OUT/fp8_quant_tiles.log" ;;
    moe-sweep)
      fmt=${SWEEP_FORMAT:-fp8}
      for shape in ${SWEEP_SHAPES:-qwen3-30b-a3b mixtral-8x7b}; do
        python3 scripts/probes/moe_config_sweep.py --shape "$shape" --format "$fmt" --tokens "${SWEEP_TOKENS:-8192}" \
          --block-m "${SWEEP_BLOCK_M:-64,128,256}" --block-n 64 --block-n2 "${SWEEP_BLOCK_N2:-64,128,256}" \
          --block-k "${SWEEP_BLOCK_K:-128}" --warps "${SWEEP_WARPS:-4,8}" --stages "${SWEEP_STAGES:-3,4}" \
          --swap "${SWEEP_SWAP:-0}" --one-dot "${SWEEP_ONE_DOT:-0}" --group-m "${SWEEP_GROUP_M:-1,8}" --top 4 \
          --json "$OUT/moe_sweep_${fmt}_$shape.json" 2>&1 | grep -v "skipped" | tee -a "$OUT/moe_sweep_$fmt.log"
      done ;;
    tma)
      python3 -m pytest -q -p no:cacheprovider tests/kernels/test_fused_moe_quantized.py \
        -k "shipped and mixtral and fp8" 2>&1 | tee "$OUT/tma_shipped_tests.log" | tail -2
      fmt=${TMA_FORMAT:-nvfp4}
      for shape in ${TMA_SHAPES:-mixtral-8x7b qwen3-30b-a3b}; do
        python3 scripts/probes/moe_config_sweep.py --shape "$shape" --format "$fmt" \
          --tokens "${TMA_TOKENS:-2048,8192}" --around-tuned --weight-tma 0,1 --top 8 --json "$OUT/tma_sweep_${fmt}_$shape.json" 2>&1 \
          | grep -v "skipped" | tee "$OUT/tma_sweep_${fmt}_$shape.txt"
      done ;;
    *) echo "unknown stage $stage (expected tests, moe, make, coldstart, serve, fp8-gemm, fp8-tiles, moe-sweep," \
         "tma)"; exit 2 ;;
  esac
done
echo "== done ($(date +%T))"
