#!/usr/bin/env bash
# Issue 20's GPU runs: gpt-oss-120b spread over 2 or 4 H200s (tensor parallel, and expert parallel) beside one
# GPU. Run on an nvidia-h200-x2 (TP=2) or nvidia-h200-x4 (TP=4) machine from the repository root; logs under $OUT,
# packed into $OUT/all_logs.tgz at exit (the device tool returns 8 files a call). Needs the wheels of
# scripts/device/fetch_wheels.sh carried in .whl/. TP=N sets the ranks (default: every GPU).
# NVLink multicast stays off (NCCL_NVLS_ENABLE=0, NCCL_CUMEM_ENABLE=0, also set by quickmoe in every process).
# Every command is bounded (timeout): a hang costs its bound, not the call.
# Stages, in the order given (several may be given; `all` = every stage after `tests`, ~12 min on two H200s: in two
# 10-minute calls, `parity generate generate1 generate-ep`, then `coldstart coldstart1 serve serve1 serve-ep`):
#   tests      the distributed tests (gloo, CPU) and the GPU tests, on this machine
#   parity     logits of 3 prompts (7, 64, 300 tokens; scripts/probes/tp_logits.py), eager: float32 TP=N and EP
#              against float32 TP=1 (the code's parity: max |diff| ~1e-5 of the logits' scale), and bfloat16 TP=1,
#              TP=N and EP against float32 TP=1 (what bfloat16 rounding alone moves in these random-weight models)
#   generate   bench generate 256 x 1000 -> 1000 at TP=N (with its start-up report: every rank's phases);
#              generate-ep: with expert parallel;  generate1: TP=1
#   coldstart  bench coldstart -tp N and with --enable-expert-parallel (warm kernel cache: after a generate stage);
#              coldstart1: TP=1
#   serve      quickmoe serve -tp N, then bench serve 1000 -> 1000 at concurrency 1 (8 requests) and 64 (128
#              requests), then SIGTERM (the exit is timed);  serve-ep: with expert parallel;  serve1: TP=1
# The checkpoint is written once into /tmp by the first stage that needs it (~50 s) and kept while the machine is.
set -uo pipefail
source "$(dirname "$0")/env.sh"
export NCCL_NVLS_ENABLE=0 NCCL_CUMEM_ENABLE=0
CKPT=${CKPT:-/tmp/gpt-oss-120b}
LOGITS=/tmp/tp-logits  # ~300 MB each: kept off $OUT
GPUS=$(nvidia-smi -L | wc -l)
TP=${TP:-$GPUS}
trap 'cd "$OUT" && tar czf /tmp/all_logs.tgz . && mv /tmp/all_logs.tgz "$OUT/"' EXIT
make_120b() { [ -f "$CKPT/config.json" ] || python3 -m quickmoe make-checkpoint "$CKPT" --preset gpt-oss-120b -q; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee -a "$OUT/gpu.txt"
nvidia-smi topo -m > "$OUT/topo.txt"

bounded() {  # $1: seconds, $2: log name, then the command; prints its status and seconds
  local limit=$1 label=$2 s; shift 2; s=$(date +%s)
  timeout -k 5 "$limit" "$@" > "$OUT/$label.log" 2>&1
  echo "$label: exit $? in $(( $(date +%s) - s )) s" | tee -a "$OUT/timeline.txt"
}

logits() {  # $1: label, $2: ranks, then tp_logits.py's options
  local label=$1 n=$2; shift 2
  if [ "$n" = 1 ]; then bounded 150 "logits_$label" python3 scripts/probes/tp_logits.py run "$CKPT" "$LOGITS/$label.pt" "$@"
  else bounded 150 "logits_$label" python3 -m torch.distributed.run --nproc-per-node "$n" scripts/probes/tp_logits.py \
    run "$CKPT" "$LOGITS/$label.pt" "$@"; fi
}

coldstart() {  # $1: label, then the ranks' flags
  local label=$1; shift
  bounded 240 "coldstart_$label" python3 -m quickmoe bench coldstart "$CKPT" -n 2 "$@" --json "$OUT/coldstart_$label.json"
  grep -E "^(total|weights_ready|first_token) " "$OUT/coldstart_$label.log"
}

generate() {  # $1: label, then the ranks' flags
  local label=$1; shift
  bounded 300 "bench_generate_$label" python3 -m quickmoe bench generate "$CKPT" "$@" --num-prompts 256 \
    --input-len 1000 --output-len 1000 --json "$OUT/bench_generate_$label.json"
  grep -E "^quickmoe |^decode at batch 1: median|^throughput run:" "$OUT/bench_generate_$label.log" | cut -c1-200
}

serve_bench() {  # $1: label, then serve's extra flags
  local label=$1 c n s; shift
  python3 -m quickmoe serve "$CKPT" --port 8011 -q "$@" > "$OUT/serve_$label.log" 2>&1 &
  local server=$!; s=$(date +%s)
  for _ in $(seq 300); do curl -sf localhost:8011/health > /dev/null && break; sleep 1; done
  echo "serve $label: ready after $(( $(date +%s) - s )) s" | tee -a "$OUT/timeline.txt"
  for c in 1 64; do
    n=$(( c == 1 ? 8 : 128 ))
    bounded 200 "bench_serve_${label}_c$c" python3 -m quickmoe bench serve --base-url http://127.0.0.1:8011 \
      --concurrency $c --num-prompts $n --input-len 1000 --output-len 1000 --result-json "$OUT/bench_serve_${label}_c$c.json"
  done
  s=$(date +%s); kill -TERM "$server"
  for _ in $(seq 60); do kill -0 "$server" 2>/dev/null || break; sleep 1; done
  local line  # `wait` in this shell, not in a pipeline's subshell (where the server is no child: status 127)
  if kill -0 "$server" 2>/dev/null; then
    kill -KILL "$server"; line="serve $label: still running 60 s after SIGTERM, killed"
  else wait "$server"; line="serve $label: exit $? $(( $(date +%s) - s )) s after SIGTERM"; fi
  echo "$line" | tee -a "$OUT/timeline.txt"
}

stages=("$@")
[ "${1:-}" = all ] && stages=(parity generate generate1 generate-ep coldstart coldstart1 serve serve1 serve-ep)
for stage in "${stages[@]}"; do
  echo "== stage $stage TP=$TP ($(date +%T))"
  case "$stage" in
    tests)
      python3 -m pytest -q -p no:cacheprovider tests/distributed tests/unit/test_parallel_split.py 2>&1 \
        | tee "$OUT/distributed_tests.log" | tail -4
      python3 -m pytest -q -m gpu tests --ignore=tests/server -p no:cacheprovider 2>&1 | tee "$OUT/gpu_tests.log" \
        | tail -4 ;;
    parity)
      make_120b; mkdir -p "$LOGITS"
      logits tp1_f32 1 --dtype float32; logits "tp${TP}_f32" "$TP" --dtype float32
      logits "ep${TP}_f32" "$TP" --dtype float32 --ep
      logits tp1_bf16 1; logits "tp${TP}_bf16" "$TP"; logits "ep${TP}_bf16" "$TP" --ep
      for b in "tp${TP}_f32" "ep${TP}_f32" tp1_bf16 "tp${TP}_bf16" "ep${TP}_bf16"; do
        python3 scripts/probes/tp_logits.py compare "$LOGITS/tp1_f32.pt" "$LOGITS/$b.pt"
      done | tee "$OUT/parity.txt" ;;
    coldstart) make_120b; coldstart "tp$TP" -tp "$TP"; coldstart "ep$TP" -tp "$TP" --enable-expert-parallel ;;
    coldstart1) make_120b; coldstart tp1 ;;
    generate) make_120b; generate "tp$TP" -tp "$TP" ;;
    generate-ep) make_120b; generate "ep$TP" -tp "$TP" --enable-expert-parallel ;;
    generate1) make_120b; generate tp1 ;;
    serve) make_120b; serve_bench "tp$TP" -tp "$TP" ;;
    serve-ep) make_120b; serve_bench "ep$TP" -tp "$TP" --enable-expert-parallel ;;
    serve1) make_120b; serve_bench tp1 ;;
    *) echo "unknown stage $stage (expected tests, parity, generate, generate-ep, generate1, coldstart, coldstart1,"\
         "serve, serve-ep, serve1, or all)"; exit 2 ;;
  esac
done
echo "== done ($(date +%T))"
