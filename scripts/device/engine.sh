#!/usr/bin/env bash
# GPU validation and benchmarks of the engine (issue 6), compile + CUDA graphs (issue 5) and the server
# (issue 7), on the device machine from the repository root; logs under $OUT. Needs the wheels of
# scripts/device/fetch_wheels.sh carried in .whl/. Stages (each fits one 10-minute call; several may be
# given, in order):
#   tests     every GPU test (pytest -m gpu), the kernel tests on CUDA (paged attention, MoE), and the engine's
#             equivalences (batched = alone, chunked, preempted, seeded) and the padded graph path on CUDA
#   generate  bench generate on a gpt-oss-20b-shaped checkpoint: 256 prompts x 1000 -> 1000 tokens with decode
#             CUDA graphs, the batch-1 decode step vs its roofline, transformers' generate side by side
#   coldstart bench coldstart with compile + CUDA graphs (fresh and warm caches), against the same model with
#             2 layers (compile-time ratio) and transformers
#   serve     quickmoe serve on the 20b checkpoint, then bench serve at concurrency 1, 4, 16, 32 (1000/1000;
#             4 x the concurrency prompts each, at least 8)
#   soak      bench serve at concurrency 32 for a few minutes; KV blocks and host memory before and after
set -uo pipefail
source "$(dirname "$0")/env.sh"
CKPT=/tmp/gpt-oss-20b
make_20b() { [ -f "$CKPT/config.json" ] || python3 -m quickmoe make-checkpoint "$CKPT" --preset gpt-oss-20b -q; }

for stage in "$@"; do
  case "$stage" in
    tests)
      python3 -m pytest -q -m gpu tests 2>&1 | tee "$OUT/gpu_tests.log" | tail -3
      QUICKMOE_TEST_DEVICE=cuda python3 -m pytest -q tests/kernels tests/models/test_engine.py \
        tests/models/test_cuda_graphs.py 2>&1 | tee "$OUT/engine_tests_on_gpu.log" | tail -3 ;;
    generate)
      make_20b
      python3 -m quickmoe bench generate "$CKPT" --num-prompts 256 --input-len 1000 --output-len 1000 \
        --cuda-graphs on --max-num-seqs 256 --baseline transformers --baseline-prompts 16 --baseline-batch-size 16 \
        --json "$OUT/bench_generate.json" 2>&1 | tee "$OUT/bench_generate.log" | grep -v INFO ;;
    coldstart)
      make_20b
      [ -f /tmp/gpt-oss-20b-2L/config.json ] || \
        python3 -m quickmoe make-checkpoint /tmp/gpt-oss-20b-2L --preset gpt-oss-20b --layers 2 -q
      python3 -m quickmoe bench coldstart "$CKPT" -n 2 --device cuda --compile --cuda-graphs \
        --compile-compare /tmp/gpt-oss-20b-2L --baseline transformers --json "$OUT/bench_coldstart.json" 2>&1 \
        | tee "$OUT/bench_coldstart.log" | grep -v INFO ;;
    serve|soak)
      make_20b
      python3 -m quickmoe serve "$CKPT" --port 8011 --max-num-seqs 64 --cuda-graphs on -q > "$OUT/serve_$stage.log" 2>&1 &
      server=$!
      for _ in $(seq 240); do curl -sf localhost:8011/health > /dev/null && break; sleep 1; done
      if [ "$stage" = serve ]; then
        python3 -m quickmoe bench serve --base-url http://127.0.0.1:8011 --concurrency 1,4,16,32 \
          --input-len 1000 --output-len 1000 --result-json "$OUT/bench_serve.json" 2>&1 | tee "$OUT/bench_serve.log"
      else
        curl -s localhost:8011/metrics | grep -E "kv_cache_usage|running|waiting" > "$OUT/soak_metrics_before.txt"
        grep VmRSS /proc/$server/status >> "$OUT/soak_metrics_before.txt"
        python3 -m quickmoe bench serve --base-url http://127.0.0.1:8011 --concurrency 32 --num-prompts 320 \
          --input-len 1000 --output-len 1000 --result-json "$OUT/bench_soak.json" 2>&1 | tee "$OUT/bench_soak.log"
        curl -s localhost:8011/metrics | grep -E "kv_cache_usage|running|waiting" > "$OUT/soak_metrics_after.txt"
        grep VmRSS /proc/$server/status >> "$OUT/soak_metrics_after.txt"
        cat "$OUT"/soak_metrics_*.txt
      fi
      kill -TERM "$server"; wait "$server" ;;
    *) echo "unknown stage $stage (expected tests, generate, coldstart, serve, soak)"; exit 2 ;;
  esac
done
