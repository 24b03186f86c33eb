#!/usr/bin/env bash
# Issue 20's GPU runs: gpt-oss-120b spread over 2 or 4 H200s (tensor parallel, and expert parallel) beside one
# GPU. Run on an nvidia-h200-x2 (TP=2) or nvidia-h200-x4 (TP=4) machine from the repository root; logs under $OUT.
# Needs the wheels of scripts/device/fetch_wheels.sh carried in .whl/. TP=N sets the ranks (default: every GPU).
# NVLink multicast stays off (NCCL_NVLS_ENABLE=0, NCCL_CUMEM_ENABLE=0, also set by quickmoe in every process).
# Stages, in the order given (each fits one 10-minute call; several may be given):
#   tests      the distributed tests (gloo, CPU) and the GPU tests, on this machine
#   parity     bf16 logits of 3 prompts (7, 64, 300 tokens): TP=1 vs TP=N vs EP over N (max |diff|, argmax
#              agreement; scripts/probes/tp_logits.py), with every rank's start-up phases
#   coldstart  bench coldstart -tp N and with --enable-expert-parallel (2 runs each): start -> first token per
#              phase, each run's JSON with every rank's phases and the slowest rank's (info.ranks)
#   coldstart1 the same at TP=1
#   generate   bench generate 256 x 1000 -> 1000 at TP=N;  generate-ep: with expert parallel;  generate1: TP=1
#   serve      quickmoe serve -tp N, then bench serve at concurrency 1 and 64 (1000 -> 1000);  serve-ep: with
#              expert parallel;  serve1: TP=1
# One stage per 10-minute call, e.g. on nvidia-h200-x2: `scripts/device/tp.sh tests`, `... parity`, `... coldstart`,
# `... coldstart1`, `... generate`, `... generate-ep`, `... generate1`, `... serve`, `... serve-ep`, `... serve1`
# (the checkpoint is written once into /tmp by the first stage that needs it, ~2 min, and kept while the machine is).
set -uo pipefail
source "$(dirname "$0")/env.sh"
export NCCL_NVLS_ENABLE=0 NCCL_CUMEM_ENABLE=0
CKPT=${CKPT:-/tmp/gpt-oss-120b}
GPUS=$(nvidia-smi -L | wc -l)
TP=${TP:-$GPUS}
make_120b() { [ -f "$CKPT/config.json" ] || python3 -m quickmoe make-checkpoint "$CKPT" --preset gpt-oss-120b -q; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee -a "$OUT/gpu.txt"
nvidia-smi topo -m | tee -a "$OUT/topo.txt"

serve_bench() {  # $1: label, then serve's extra flags
  local label=$1; shift
  python3 -m quickmoe serve "$CKPT" --port 8011 -q "$@" > "$OUT/serve_$label.log" 2>&1 &
  local server=$!
  for _ in $(seq 400); do curl -sf localhost:8011/health > /dev/null && break; sleep 1; done
  python3 -m quickmoe bench serve --base-url http://127.0.0.1:8011 --concurrency 1,64 --input-len 1000 \
    --output-len 1000 --result-json "$OUT/bench_serve_$label.json" 2>&1 | tee "$OUT/bench_serve_$label.log"
  kill -TERM "$server"; wait "$server"; echo "serve $label exit $?"
}

coldstart() {  # $1: label, then the ranks' flags
  local label=$1; shift
  python3 -m quickmoe bench coldstart "$CKPT" -n 2 "$@" --json "$OUT/coldstart_$label.json" 2>&1 \
    | tee "$OUT/coldstart_$label.log" | grep -v INFO
}

generate() {  # $1: label, then the ranks' flags
  local label=$1; shift
  python3 -m quickmoe bench generate "$CKPT" "$@" --num-prompts 256 --input-len 1000 --output-len 1000 \
    --json "$OUT/bench_generate_$label.json" 2>&1 | tee "$OUT/bench_generate_$label.log" | grep -v INFO
}

for stage in "$@"; do
  echo "== stage $stage TP=$TP ($(date +%T))"
  case "$stage" in
    tests)
      python3 -m pytest -q -p no:cacheprovider tests/distributed tests/unit/test_parallel_split.py 2>&1 \
        | tee "$OUT/distributed_tests.log" | tail -4
      python3 -m pytest -q -m gpu tests --ignore=tests/server -p no:cacheprovider 2>&1 | tee "$OUT/gpu_tests.log" \
        | tail -4 ;;
    parity)
      make_120b
      python3 scripts/probes/tp_logits.py run "$CKPT" "$OUT/logits_tp1.pt" | tee "$OUT/parity.log"
      python3 -m torch.distributed.run --nproc-per-node "$TP" scripts/probes/tp_logits.py run "$CKPT" "$OUT/logits_tp$TP.pt" \
        | tee -a "$OUT/parity.log"
      python3 -m torch.distributed.run --nproc-per-node "$TP" scripts/probes/tp_logits.py run "$CKPT" "$OUT/logits_ep$TP.pt" --ep \
        | tee -a "$OUT/parity.log"
      python3 scripts/probes/tp_logits.py compare "$OUT/logits_tp1.pt" "$OUT/logits_tp$TP.pt" | tee -a "$OUT/parity.log"
      python3 scripts/probes/tp_logits.py compare "$OUT/logits_tp1.pt" "$OUT/logits_ep$TP.pt" | tee -a "$OUT/parity.log" ;;
    coldstart)
      make_120b
      coldstart "tp$TP" -tp "$TP"
      coldstart "ep$TP" -tp "$TP" --enable-expert-parallel ;;
    coldstart1)
      make_120b
      coldstart tp1 ;;
    generate)
      make_120b
      generate "tp$TP" -tp "$TP" ;;
    generate-ep)
      make_120b
      generate "ep$TP" -tp "$TP" --enable-expert-parallel ;;
    generate1)
      make_120b
      generate tp1 ;;
    serve)
      make_120b
      serve_bench "tp$TP" -tp "$TP" ;;
    serve-ep)
      make_120b
      serve_bench "ep$TP" -tp "$TP" --enable-expert-parallel ;;
    serve1)
      make_120b
      serve_bench tp1 ;;
    *) echo "unknown stage $stage (expected tests, parity, coldstart, coldstart1, generate, generate-ep, generate1, serve,"\
         "serve-ep, serve1)"; exit 2 ;;
  esac
done
echo "== done ($(date +%T))"
