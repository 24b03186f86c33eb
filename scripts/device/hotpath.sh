#!/usr/bin/env bash
# The hot-path issue's GPU runs (decode and throughput), on the device machine from the repository root; logs
# under $OUT. Needs the wheels of scripts/device/fetch_wheels.sh carried in .whl/. Stages, in the order given
# (each fits one 10-minute call; several may be given):
#   tests      GPU tests (pytest -m gpu outside tests/kernels), the kernel tests on CUDA (GPU-marked ones
#              included) in two processes, the kernel-count test, and the engine's equivalences on CUDA in float32
#              (batched = alone, chunked, preempted, fast paths = reference). On an H200 the parts took about 340 s
#              (models and units), 570+ s (attention to fused_moe), 310 and 230 s (the other kernel files) and 210 s
#              (engine) when run apart or three at a time (2026-11-30 sixteenth session); side by side they may not
#              fit one call: TESTS_PARTS="models kernels-a" and then "kernels-b engine" split them over two
#   attention  bench attention: decode grid and prefill points vs SDPA (GB/s vs HBM, TFLOP/s)
#   invariance scripts/probes/batch_invariance_probe.py (which module first gives a prompt other bits in a batch of
#              64 than alone; the tree's decode rule and the H200's 2-warp rule of 2026-11-29), then the bf16
#              quality tests with their agreement table
#   attention-sweep scripts/probes/decode_attention_sweep.py: decode attention's launch configs and split counts
#              per (batch, context, window) point, beside SDPA (attention_sweep.{log,json})
#   generate   bench generate on a gpt-oss-20b-shaped checkpoint with the serving defaults: 256 prompts x 1000 ->
#              1000, the batch-1 decode step vs its roofline, GPU time / exposed host time, op families; the SM
#              clock and power logged beside it (clocks.csv, summarized by scripts/probes/clock_summary.py)
#   serve-warmup quickmoe serve --warmup MODE for each of WARMUP_RUNS, MODE:CACHE[:TREE[:nobench]] (default
#              "lazy:fresh auto:fresh auto:warm"): CACHE fresh = an empty QUICKMOE_CACHE_DIR (a fresh machine's
#              kernel caches), warm = the one the previous run of that mode and tree left; TREE a copy in .ab/
#              (default: the work tree). Each: the time to /health 200, one request (1000 -> 16) timed from the
#              client, bench serve at concurrency 32 and 128 (1000 -> 256) unless nobench, the steps slow to queue
#              (first-use compiles and captures) from the server's log and the kernels compiled after /health;
#              one table (serve_warmup.txt)
#   serve      quickmoe serve with its defaults (plus SERVE_ARGS, e.g. "--enable-step-profile"; BENCH_SERVE_ARGS go to
#              bench serve, e.g. "--op-family-steps 8"), the time to /health 200
#              (serve_ready.txt), then bench serve at concurrency 1, 32 and 128 (1000 -> 1000); the server's warnings
#              (steps slow to queue: kernels compiled at first use) in serve.log
#   profile    bench generate's batch-1 step and op families only (fewer prompts): a quick check of a change
#   small-batch the alignment and MoE kernel tests on CUDA, then scripts/probes/small_batch_probe.py: fused_moe at
#              T <= 8, moe_align vs its reference
#   variants   scripts/probes/moe_variant_probe.py: MoE kernel variants x launch configs at decode-sized T
#              (and --prefill: T = 1024, 4096, 8192 at their tuned configs; variants-prefill: that part only)
#   ncu        Nsight Compute on the probe's GEMMs at T=1 and 256 (--profile-once): speed of light, warp states,
#              memory, occupancy (ncu_gemm.txt)
#   moe-rows   8- against 16-row MoE tiles at decode sizes, each GEMM alone (scripts/probes/moe_config_sweep.py
#              --block-m 8,16, transposed, T = ROWS_TOKENS, default 1-64) for gpt-oss-20b and -120b (ROWS_SHAPES:
#              SHAPE or SHAPE:FORMAT, e.g. "qwen3-30b-a3b:fp8 mixtral-8x7b:nvfp4"),
#              the kernel tests of 8-row tiles on CUDA first (moe_rows_SHAPE.txt; the files are then edited by
#              hand and checked with bench moe and ab-profile, as in docs/benchmarks.md, 2026-11-29 third session)
#   register   the register-operand GEMMs' tests on CUDA (8-64-row tiles), then
#              scripts/probes/moe_register_rows_probe.py: each GEMM alone at tiles of 8-64 rows beside the H200 files'
#              entries, gpt-oss-20b at T = 64-512 and -120b at 256-512 (register_rows.{log,json})
#   attention-ncu Nsight Compute on decode attention (ours, then SDPA on contiguous keys) at the points of
#              NCU_POINTS ("BATCHxCONTEXT ...", default 256x4096 64x4096 8x16384): speed of light, memory, warp
#              states, occupancy, instructions (attention_ncu.txt; scripts/probes/attention_ncu_probe.py)
#   ab-generate  bench generate (256 x 1000 -> 1000) and the small-batch probe, in turns between the work tree
#              ("new") and other trees carried in .ab/NAME (src/ and scripts/ of another commit: `git archive REV
#              src scripts | tar -x -C .ab/base`); AB_RUNS="new base new base" (the default) names the turns;
#              a few lines per run (ab_generate.txt)
#   ab-moe     the alignment and kernel warm-up tests on CUDA (and AB_MOE_TESTS), then in turns between the work
#              tree and trees in .ab/NAME (AB_RUNS, as ab-generate): scripts/probes/moe_kernel_split_probe.py (kernels by time,
#              20b and 120b, T = 1-1024) and bench moe at T = 64, 256, 1024 (ab_moe.txt, kernel_split_NAME.log)
#   ab-prefill-moe the prefill-sized MoE in turns (as ab-moe): each GEMM alone at T = 8192, fused_moe's kernels at
#              T = 2048 and 8192, bench moe at T = 1024-8192 (ab_prefill_moe.txt)
#   one-dot    the MoE kernel tests on CUDA, then GEMM 1 alone around its tuned configs with and without the gate and
#              up rows in one dot (gate_up_one_dot), per shape, format and T (ONE_DOT_CASES; one_dot.txt)
#   ab-bench-moe bench moe of every MoE shape and format in turns between the work tree and trees in .ab/NAME (AB_RUNS)
#   kv-layout  the attention, RoPE/KV-write and fused_moe kernel tests on CUDA (both cache layouts; KV_SKIP_TESTS=1
#              skips them), then bench attention per KV_RUNS variant LAYOUT:BLOCK_SIZE in turns (default
#              "slot-major:16 head-major:16 slot-major:16 head-major:16"), compared by
#              scripts/probes/kv_layout_compare.py (kv_layout.txt; each run's JSON and log under runs/)
#   ab-layout  bench generate with each KV-cache layout (and block size: LAYOUT:BLOCK) in turns (LAYOUT_RUNS): 256 x 1000
#              -> 1000 and (unless AB_LONG=0) 64 x 8000 -> 256
#   ab-attention the attention kernel tests and the bf16 quality test on CUDA, then bench attention in turns between
#              the work tree and trees in .ab/NAME (AB_RUNS, default "new base"; ab_attention.txt; AB_ATTENTION_ARGS: bench attention's options)
#   host-profile scripts/probes/host_step_probe.py: the engine's decode step at batch HOST_BATCH (256) under cProfile
#   serve-variants quickmoe serve from the work tree or trees in .ab/, with or without uvloop/httptools, or another
#              GIL switch interval (SERVE_VARIANTS; see the stage): bench serve at concurrency 1 and 128 for each
#   serve-ab   quickmoe serve with its defaults, without prefix caching, and with every graph captured at start-up
#              (or the variants of SERVE_AB): bench serve at concurrency 1 and 128 (1000 -> 256) for each, one table
#              per variant
#   glue       scripts/probes/glue_probe.py: residual add + RMSNorm by warps and rows; decode attention with RoPE + KV
#              write in one launch vs two
#   dense      the dense GEMM's kernel tests on CUDA (bits across configs and row counts), then
#              scripts/probes/dense_gemm_probe.py: every launch config vs cuBLAS on the attention projections
#   glue-tests the glue, attention, router, alignment and PDL kernel tests on CUDA, the kernel count, CUDA graphs
set -uo pipefail
source "$(dirname "$0")/env.sh"
CKPT=/tmp/gpt-oss-20b
make_20b() { [ -f "$CKPT/config.json" ] || python3 -m quickmoe make-checkpoint "$CKPT" --preset gpt-oss-20b -q; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee -a "$OUT/gpu.txt"

for stage in "$@"; do
  echo "== stage $stage ($(date +%T))"
  case "$stage" in
    tests)
      # The parts run side by side (Triton compiles on the CPU cores; the GPU has room for all of them). The kernel
      # files run whole (their GPU-marked tests included), so the -m gpu run leaves tests/kernels out rather than
      # compile the same kernels twice. (tests/server needs the openai client, which the device lacks; no GPU test
      # lives there.) TESTS_PARTS picks parts (default: all four). Each part runs in pytest-xdist processes (the
      # carried .whl has it): the kernel parts test by test (TEST_WORKERS each, default 5), the model and engine
      # parts file by file (their fixtures build models); TEST_WORKERS=0 runs every part in one process, as before
      # 2026-12-01, when "models kernels-a" in one process each did not finish within a 10-minute call.
      kernels_a="tests/kernels/test_attention_kernels.py tests/kernels/test_dense_gemm.py tests/kernels/test_fp8_gemm.py
        tests/kernels/test_fp8_gemv.py tests/kernels/test_fused_moe.py"
      kernels_b="tests/kernels/test_fused_moe_quantized.py tests/kernels/test_glue_kernels.py
        tests/kernels/test_moe_align.py tests/kernels/test_moe_configs.py tests/kernels/test_moe_fp8_gemv.py
        tests/kernels/test_moe_gemm_register.py
        tests/kernels/test_mxfp4_mma_pairs.py tests/kernels/test_mxfp4_ptx_decode.py tests/kernels/test_mxfp8_quant.py
        tests/kernels/test_pdl.py tests/kernels/test_router.py tests/kernels/test_routing.py
        tests/kernels/test_tune_moe_script.py tests/models/test_kernel_count.py"
      listed=$(ls tests/kernels/test_*.py | sort | tr '\n' ' ')
      known=$(echo $kernels_a $kernels_b | tr ' ' '\n' | grep '^tests/kernels/' | sort | tr '\n' ' ')
      [ "$listed" = "$known" ] || echo "warning: tests/kernels has files neither kernel part lists: $listed"
      logs=""
      workers=${TEST_WORKERS:-5}
      # the slowest tests of each part in its log: the call took 317 s on 2026-12-03, 446 s on 2026-12-04 (each part
      # 25-40% slower) and has a 600 s limit
      export PYTEST_ADDOPTS="${PYTEST_ADDOPTS:-} --durations=8"
      by_test="" by_file="" by_file_engine=""
      if [ "$workers" -gt 0 ]; then
        by_test="-n $workers --dist load" by_file="-n 3 --dist loadfile" by_file_engine="-n 2 --dist loadfile"
      fi
      # On a GPU under 100 GiB (the H100's 80) the model part, whose tests start engines and servers sizing their KV
      # cache from the memory left, runs after the others: side by side with them it ran the H100 out of memory
      # (2026-12-05 second session: 59 failures, every one a CUDA OOM). On the H200 the four parts run together.
      gpu_mib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
      parts="${TESTS_PARTS:-models kernels-a kernels-b engine}"
      later=""
      if [ "${gpu_mib:-0}" -lt 102400 ] && [ "$parts" != "models" ] && echo " $parts " | grep -q " models "; then
        parts=$(echo " $parts " | sed 's/ models / /'); later="models"
      fi
      for part in $parts WAIT $later; do
        case "$part" in
          WAIT) wait ;;
          models) python3 -m pytest -q -m gpu tests --ignore=tests/server --ignore=tests/kernels -p no:cacheprovider \
                    $by_file > "$OUT/gpu_tests.log" 2>&1 & logs="$logs gpu_tests" ;;
          kernels-a) python3 -m pytest -q -p no:cacheprovider $by_test $kernels_a > "$OUT/kernel_tests_a_on_gpu.log" \
                       2>&1 & logs="$logs kernel_tests_a_on_gpu" ;;
          kernels-b) python3 -m pytest -q -p no:cacheprovider $by_test $kernels_b > "$OUT/kernel_tests_b_on_gpu.log" \
                       2>&1 & logs="$logs kernel_tests_b_on_gpu" ;;
          engine) QUICKMOE_TEST_DEVICE=cuda python3 -m pytest -q -p no:cacheprovider $by_file_engine \
                    tests/models/test_engine.py tests/models/test_cuda_graphs.py > "$OUT/engine_tests_on_gpu.log" 2>&1 &
                  logs="$logs engine_tests_on_gpu" ;;
          *) echo "unknown tests part $part (expected models, kernels-a, kernels-b, engine)"; exit 2 ;;
        esac
      done
      wait
      for log in $logs; do
        echo "$log: $(tail -1 "$OUT/$log.log")"; grep -E '^(FAILED|ERROR)' "$OUT/$log.log" | head -20
      done ;;
    small-batch)
      python3 -m pytest -q -p no:cacheprovider \
        tests/kernels/test_moe_align.py tests/kernels/test_fused_moe.py > "$OUT/small_batch_tests.log" 2>&1
      echo "small_batch_tests: $(tail -1 "$OUT/small_batch_tests.log")"; grep -E '^(FAILED|ERROR)' "$OUT/small_batch_tests.log" | head
      python3 scripts/probes/small_batch_probe.py --json "$OUT/small_batch_probe.json" 2>&1 \
        | tee "$OUT/small_batch_probe.log" ;;
    attention)
      python3 -m quickmoe bench attention --json "$OUT/bench_attention.json" 2>&1 | tee "$OUT/bench_attention.log" \
        | grep -v INFO ;;
    attention-sweep)
      python3 scripts/probes/decode_attention_sweep.py --json "$OUT/attention_sweep.json" 2>&1 \
        | grep -v -i warn > "$OUT/attention_sweep.log"
      sed -n '/^| batch x context/,$p' "$OUT/attention_sweep.log"
      grep -E "^(HBM|compiled|Traceback)|Error" "$OUT/attention_sweep.log" ;;
    generate)
      make_20b
      # the SM clock, power and throttle reasons every 0.5 s beside the run (clocks.csv): sustained load may clock down
      nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active \
        --format=csv,noheader -lms 500 > "$OUT/clocks.csv" 2>&1 &
      smi=$!
      python3 -m quickmoe bench generate "$CKPT" --num-prompts 256 --input-len 1000 --output-len 1000 \
        --json "$OUT/bench_generate.json" 2>&1 | tee "$OUT/bench_generate.log" | grep -v INFO
      kill "$smi"
      python3 scripts/probes/clock_summary.py "$OUT/clocks.csv" ;;
    profile)
      make_20b
      python3 -m quickmoe bench generate "$CKPT" --num-prompts 64 --input-len 1000 --output-len 64 \
        --json "$OUT/bench_profile.json" 2>&1 | tee "$OUT/bench_profile.log" | grep -v INFO ;;
    serve)
      make_20b
      t_serve=$(date +%s.%N)
      python3 -m quickmoe serve "$CKPT" --port 8011 -q ${SERVE_ARGS:-} > "$OUT/serve.log" 2>&1 &  # e.g. --warmup auto
      server=$!
      for _ in $(seq 480); do curl -sf localhost:8011/health > /dev/null && break; sleep 0.5; done
      echo "serve ${SERVE_ARGS:-}: /health 200 after $(python3 -c "import time; print(f'{time.time() - $t_serve:.1f}')") s" \
        | tee "$OUT/serve_ready.txt"
      python3 -m quickmoe bench serve --base-url http://127.0.0.1:8011 --concurrency 1,32,128 \
        --input-len 1000 --output-len 1000 --result-json "$OUT/bench_serve.json" ${BENCH_SERVE_ARGS:-} 2>&1 \
        | tee "$OUT/bench_serve.log"
      kill -TERM "$server"; wait "$server" ;;
    serve-warmup)
      make_20b
      n=0
      for run in ${WARMUP_RUNS:-lazy:fresh auto:fresh auto:warm}; do
        IFS=: read -r mode cache tree bench <<< "$run"
        n=$((n + 1)) tree=${tree:-.} root=$PWD; [ "$tree" != . ] && root=$PWD/.ab/$tree
        dir=/tmp/qmc_warmup_${mode}_$tree tag=${n}_${mode}_${cache}_${tree//./work}
        [ "$cache" = fresh ] && rm -rf "$dir"
        log="$OUT/serve_warmup_$tag.log"
        t0=$(date +%s.%N)
        QUICKMOE_CACHE_DIR=$dir PYTHONPATH=/tmp/site:$root/src python3 -m quickmoe serve "$CKPT" --port 8011 \
          --warmup "$mode" > "$log" 2>&1 &
        server=$!
        for _ in $(seq 1200); do  # until /health answers, or the server has exited
          curl -sf localhost:8011/health > /dev/null && break
          kill -0 "$server" 2> /dev/null || break
          sleep 0.25
        done
        ready=$(python3 -c "import time; print(f'{time.time() - $t0:.1f}')")
        ls "$dir"/triton/*/ | sort > /tmp/kernels_at_ready.txt
        first=$(python3 - <<'PY'
import json, random, time, urllib.request
random.seed(1)
model = json.load(urllib.request.urlopen("http://127.0.0.1:8011/v1/models"))["data"][0]["id"]
body = {"model": model, "prompt": [random.randrange(1000, 30000) for _ in range(1000)], "max_tokens": 16,
        "ignore_eos": True}
t0 = time.time()
req = urllib.request.Request("http://127.0.0.1:8011/v1/completions", json.dumps(body).encode(),
                             {"Content-Type": "application/json"})
urllib.request.urlopen(req, timeout=600).read()
print(f"{time.time() - t0:.2f}")
PY
)
        [ "$bench" != nobench ] && python3 -m quickmoe bench serve --base-url http://127.0.0.1:8011 \
          --concurrency 32,128 --no-warmup --input-len 1000 --output-len 256 \
          --result-json "$OUT/serve_warmup_$tag.json" > "$OUT/bench_serve_warmup_$tag.txt" 2>&1
        kill -TERM "$server"; wait "$server"
        slow=$(grep -o "took [0-9.]* s to queue" "$log" | awk '{n++; s+=$2} END {printf "%d steps, %.1f s", n, s}')
        # the kernels compiled after /health: their names (each cache entry holds NAME.json)
        late=$(ls "$dir"/triton/*/ | sort | comm -13 /tmp/kernels_at_ready.txt - \
          | while read -r e; do ls "$dir"/triton/*/"$e" | grep -o '^[^.]*\.json$' | grep -v '^__grp__'; done \
          | sed 's/\.json$//' | sort | uniq -c | tr '\n' ' ')
        { echo "-- $run: /health 200 after $ready s; first request (1000 -> 16) $first s; slow steps: $slow"
          echo "   kernels compiled after ready: ${late:-none}"
          grep -h "warm-up before serving\|captured decode CUDA graphs for" "$log" | sed 's/^/   /'
          [ "$bench" != nobench ] && grep -A2 "conc    ok" "$OUT/bench_serve_warmup_$tag.txt"; } \
          | tee -a "$OUT/serve_warmup.txt"
      done ;;
    ab-generate)
      make_20b
      for run in ${AB_RUNS:-new base new base}; do
        root=$PWD; [ "$run" != new ] && root=$PWD/.ab/$run
        PYTHONPATH=/tmp/site:$root/src python3 "$root/scripts/probes/small_batch_probe.py" > "/tmp/ab_sb_$run.log" 2>&1
        PYTHONPATH=/tmp/site:$root/src python3 -m quickmoe bench generate "$CKPT" --num-prompts 256 --input-len 1000 \
          --output-len 1000 > "/tmp/ab_gen_$run.log" 2>&1
        { echo "-- $run"; grep -E "^quickmoe |decode at batch 1: median|by step kind|by op family" "/tmp/ab_gen_$run.log"
          grep -E "^\| [1248] \|" "/tmp/ab_sb_$run.log" | tr '\n' ' '; echo; } | tee -a "$OUT/ab_generate.txt"
      done ;;
    ab-layout)
      # bench generate with each KV-cache layout in turns (LAYOUT_RUNS, default "head-major slot-major head-major
      # slot-major"): 256 x 1000 -> 1000 (the issue's figure), then 64 x 8000 -> 256 (long contexts: attention's
      # share of the step grows) (ab_layout.txt, ab_layout_*.log)
      make_20b
      i=0
      for variant in ${LAYOUT_RUNS:-head-major slot-major head-major slot-major}; do  # LAYOUT or LAYOUT:BLOCK_SIZE
        i=$((i + 1)); layout=${variant%:*}; block=16; [ "$variant" != "$layout" ] && block=${variant#*:}
        python3 -m quickmoe bench generate "$CKPT" --num-prompts 256 --input-len 1000 --output-len 1000 \
          --kv-cache-layout "$layout" --block-size "$block" > "$OUT/ab_layout_${i}_$layout.log" 2>&1
        [ "${AB_LONG:-1}" = 1 ] && python3 -m quickmoe bench generate "$CKPT" --num-prompts 64 --input-len 8000 \
          --output-len 256 --kv-cache-layout "$layout" --block-size "$block" > "$OUT/ab_layout_long_${i}_$layout.log" 2>&1
        { echo "-- $i $layout, blocks of $block (256 x 1000 -> 1000, then 64 x 8000 -> 256 unless AB_LONG=0)"
          grep -E "^quickmoe |decode at batch 1: median|by step kind|by op family" "$OUT/ab_layout_${i}_$layout.log"
          [ "${AB_LONG:-1}" = 1 ] && grep -E "^quickmoe |by step kind|by op family" "$OUT/ab_layout_long_${i}_$layout.log"
          true; } | tee -a "$OUT/ab_layout.txt"
      done ;;
    ab-moe)
      python3 -m pytest -q -p no:cacheprovider tests/kernels/test_moe_align.py tests/models/test_kernel_warmup.py \
        ${AB_MOE_TESTS:-} > "$OUT/align_tests.log" 2>&1
      echo "align_tests: $(tail -1 "$OUT/align_tests.log")"; grep -E '^(FAILED|ERROR)' "$OUT/align_tests.log" | head
      for run in ${AB_RUNS:-new base}; do
        root=$PWD; [ "$run" != new ] && root=$PWD/.ab/$run
        PYTHONPATH=/tmp/site:$root/src python3 "$root/scripts/probes/moe_kernel_split_probe.py" \
          --shapes gpt-oss-20b,gpt-oss-120b --tokens 1,16,64,256,1024 2>&1 | grep -v -i warn > "$OUT/kernel_split_$run.log"
        PYTHONPATH=/tmp/site:$root/src python3 -m quickmoe bench moe --shapes gpt-oss-20b,gpt-oss-120b \
          --tokens 64,256,1024 --no-baselines 2>&1 | grep -v INFO > "/tmp/ab_moe_$run.log"
        { echo "-- $run"; grep -E "T=(64|256|1024):" "$OUT/kernel_split_$run.log"; cat "/tmp/ab_moe_$run.log"; } \
          | tee -a "$OUT/ab_moe.txt"
      done ;;
    ab-prefill-moe)
      # prefill-sized MoE (sub-tiles, chunked alignment): the alignment and fused_moe tests on CUDA, then in turns
      # between the work tree and trees in .ab/NAME (AB_RUNS, default "new base"): each GEMM alone at T = 8192 with
      # its tuned config (random routing), fused_moe's kernels by time at T = 2048 and 8192, and bench moe at
      # T = 1024-8192 (ab_prefill_moe.txt)
      python3 -m pytest -q -p no:cacheprovider tests/kernels/test_moe_align.py tests/kernels/test_fused_moe.py \
        tests/models/test_kernel_warmup.py > "$OUT/prefill_moe_tests.log" 2>&1
      echo "prefill_moe_tests: $(tail -1 "$OUT/prefill_moe_tests.log")"
      grep -E '^(FAILED|ERROR)' "$OUT/prefill_moe_tests.log" | head
      for run in ${AB_RUNS:-new base}; do
        root=$PWD; [ "$run" != new ] && root=$PWD/.ab/$run
        { echo "-- $run"
          for shape in gpt-oss-120b gpt-oss-20b; do
            PYTHONPATH=/tmp/site:$root/src python3 "$PWD/scripts/probes/moe_config_sweep.py" --shape $shape \
              --tokens 8192 --tuned-only 2>&1 | grep "tuned"
          done
          PYTHONPATH=/tmp/site:$root/src python3 "$root/scripts/probes/moe_kernel_split_probe.py" \
            --shapes gpt-oss-20b,gpt-oss-120b --tokens 2048,8192 2>&1 | grep -v -i warn
          PYTHONPATH=/tmp/site:$root/src python3 -m quickmoe bench moe --shapes gpt-oss-20b,gpt-oss-120b \
            --tokens 1024,2048,4096,8192 --no-baselines 2>&1 | grep -v INFO; } | tee -a "$OUT/ab_prefill_moe.txt"
      done ;;
    one-dot)
      # GEMM 1 with the gate and up rows in one dot: the MoE kernel tests on CUDA (the bits of one dot against two
      # included; ONE_DOT_TESTS=0 skips them), then each GEMM 1 alone around its tuned config (gate_up_one_dot 0/1 x
      # warps) per shape, format and T (one_dot.txt; ONE_DOT_CASES="shape:format:T,T ...")
      if [ "${ONE_DOT_TESTS:-1}" = 1 ]; then
        python3 -m pytest -q -p no:cacheprovider tests/kernels/test_fused_moe.py \
          tests/kernels/test_fused_moe_quantized.py > "$OUT/one_dot_tests.log" 2>&1
        echo "one_dot_tests: $(tail -1 "$OUT/one_dot_tests.log")"; grep -E '^(FAILED|ERROR)' "$OUT/one_dot_tests.log" | head
      fi
      for case in ${ONE_DOT_CASES:-gpt-oss-120b:mxfp4:1024,8192 gpt-oss-20b:mxfp4:1,16,256,1024,8192 \
          mixtral-8x7b:fp8:1024,8192 qwen3-30b-a3b:fp8:1024,8192 mixtral-8x7b:nvfp4:1024,8192}; do
        IFS=: read -r shape fmt tokens <<< "$case"
        python3 scripts/probes/moe_config_sweep.py --shape "$shape" --format "$fmt" --tokens "$tokens" --around-tuned \
          --gemms 1 --top 8 --json "/tmp/one_dot_${shape}_$fmt.json" 2>&1 | grep -v -i warn | tee -a "$OUT/one_dot.txt"
      done
      tar -czf "$OUT/one_dot_json.tgz" -C /tmp $(cd /tmp && ls one_dot_*.json) ;;
    ab-bench-moe)
      # bench moe in turns between the work tree and trees in .ab/NAME (AB_RUNS, default "new base"): gpt-oss-20b
      # and -120b (MXFP4) at T = 256-8192, Qwen3-30B-A3B and Mixtral-8x7B in FP8 and NVFP4 at T = 1024-8192; the
      # baselines (F.grouped_mm bf16, transformers' experts) in the first turn only (ab_bench_moe.txt, bench_moe_*.json)
      first=1
      for run in ${AB_RUNS:-new base}; do
        root=$PWD; [ "$run" != new ] && root=$PWD/.ab/$run
        baselines=--no-baselines; [ $first = 1 ] && baselines=; first=0
        { echo "-- $run"
          PYTHONPATH=/tmp/site:$root/src python3 -m quickmoe bench moe --shapes gpt-oss-20b,gpt-oss-120b \
            --tokens 256,1024,2048,4096,8192 $baselines --json "$OUT/bench_moe_gptoss_$run.json" 2>&1 | grep -v INFO
          PYTHONPATH=/tmp/site:$root/src python3 -m quickmoe bench moe --shapes qwen3-30b-a3b,mixtral-8x7b \
            --formats fp8,nvfp4 --tokens 1024,2048,4096,8192 $baselines --json "$OUT/bench_moe_families_$run.json" \
            2>&1 | grep -v INFO; } | tee -a "$OUT/ab_bench_moe.txt"
      done ;;
    kv-layout)
      if [ -z "${KV_SKIP_TESTS:-}" ]; then
        python3 -m pytest -q -p no:cacheprovider tests/kernels/test_attention_kernels.py \
          tests/kernels/test_glue_kernels.py tests/kernels/test_fused_moe.py > "$OUT/kv_layout_tests.log" 2>&1
        echo "kv_layout_tests: $(tail -1 "$OUT/kv_layout_tests.log")"
        grep -E '^(FAILED|ERROR)' "$OUT/kv_layout_tests.log" | head
      fi
      i=0; mkdir -p "$OUT/runs"
      for variant in ${KV_RUNS:-slot-major:16 head-major:16 slot-major:16 head-major:16}; do  # LAYOUT:BLOCK_SIZE
        i=$((i + 1)); layout=${variant%:*}; block=${variant#*:}
        python3 -m quickmoe bench attention --kv-layout "$layout" --block-size "$block" \
          --json "$OUT/runs/bench_attention_${i}_${layout}_$block.json" > "$OUT/runs/bench_attention_$i.log" 2>&1 \
          || tail -5 "$OUT/runs/bench_attention_$i.log"
        echo "run $i $variant done ($(date +%T))"
      done
      python3 scripts/probes/kv_layout_compare.py "$OUT"/runs/bench_attention_*.json | tee "$OUT/kv_layout.txt" ;;
    invariance)
      # a prompt alone vs first of a batch of 64, bit for bit per module (scripts/probes/batch_invariance_probe.py),
      # with the tree's decode rule and with the H200's 2-warp rule of 2026-11-29, for prompts 0 and 1; then the bf16
      # quality tests with their agreement table (-rP)
      for rule in tree h200-two-warps; do
        for target in 0 1; do
          python3 scripts/probes/batch_invariance_probe.py --decode-rule "$rule" --target "$target" --steps 8 \
            --json "$OUT/invariance_${rule}_$target.json" 2>&1 | grep -v INFO | tee -a "$OUT/invariance.txt"
        done
      done
      python3 -m pytest -q -rP -p no:cacheprovider tests/models/test_quality_gpu.py > "$OUT/quality_tests.log" 2>&1
      echo "quality_tests: $(tail -1 "$OUT/quality_tests.log")"
      grep -E '^\| (alone|graphs: alone|eager vs)' "$OUT/quality_tests.log" | head -6 ;;
    ab-attention)
      # decode attention's kernel tests and the bf16 invariance / quality test on CUDA, then bench attention in turns
      # between the work tree and trees in .ab/NAME (AB_RUNS, default "new base"): the decode grid's rows beside
      # SDPA (ab_attention.txt, bench_attention_NAME.log)
      if [ -z "${AB_SKIP_TESTS:-}" ]; then  # AB_SKIP_TESTS=1: the bench runs only (the tests take ~4 minutes)
        # -rP: the quality tests' agreement table in the log whether they pass or fail (the margin to the 99% bar)
        python3 -m pytest -q -rP -p no:cacheprovider tests/kernels/test_attention_kernels.py \
          tests/models/test_quality_gpu.py > "$OUT/attention_tests.log" 2>&1
        echo "attention_tests: $(tail -1 "$OUT/attention_tests.log")"; grep -E '^(FAILED|ERROR)' "$OUT/attention_tests.log" | head
        grep -E '^\| (alone|graphs: alone|eager vs)' "$OUT/attention_tests.log" | head -6
      fi
      for run in ${AB_RUNS:-new base}; do
        root=$PWD; [ "$run" != new ] && root=$PWD/.ab/$run
        PYTHONPATH=/tmp/site:$root/src python3 -m quickmoe bench attention ${AB_ATTENTION_ARGS:-} \
          > "$OUT/bench_attention_$run.log" 2>&1
        { echo "-- $run"; grep -E "^ +[0-9]+ +[0-9]+ +[0-9]+ |HBM" "$OUT/bench_attention_$run.log"; } | tee -a "$OUT/ab_attention.txt"
      done ;;
    ab-profile)
      # bench generate's batch-1 step and op families (64 x 1000 -> 64) in turns between the work tree ("new") and
      # trees in .ab/NAME, as ab-generate; the batch-1 step's kernels by time beside (ab_profile.txt)
      make_20b
      for run in ${AB_RUNS:-new base new base}; do
        root=$PWD; [ "$run" != new ] && root=$PWD/.ab/$run
        PYTHONPATH=/tmp/site:$root/src python3 -m quickmoe bench generate "$CKPT" --num-prompts 64 --input-len 1000 \
          --output-len 64 --json "/tmp/ab_prof_$run.json" > "/tmp/ab_prof_$run.log" 2>&1
        { echo "-- $run"; grep -E "decode at batch 1: |by op family" "/tmp/ab_prof_$run.log"
          python3 -c "import json, sys; d = json.load(open(sys.argv[1]))['op_families']['batch1']
print(d['kernels_per_step'], 'kernels a step;', '; '.join(f'{ms * 1e3:.1f} {k[:40]}' for k, ms in d['top']))" \
            "/tmp/ab_prof_$run.json"; } | tee -a "$OUT/ab_profile.txt"
      done ;;
    glue)
      python3 scripts/probes/glue_probe.py --json "$OUT/glue_probe.json" 2>&1 | tee "$OUT/glue_probe.log" ;;
    dense)
      python3 -m pytest -q -p no:cacheprovider tests/kernels/test_dense_gemm.py > "$OUT/dense_tests.log" 2>&1
      echo "dense_tests: $(tail -1 "$OUT/dense_tests.log")"; grep -E '^(FAILED|ERROR)|Error' "$OUT/dense_tests.log" | head
      python3 scripts/probes/dense_gemm_probe.py --json "$OUT/dense_gemm_probe.json" 2>&1 \
        | tee "$OUT/dense_gemm_probe.log" | grep -vE '^ {20}' ;;
    glue-tests)
      # the glue, attention, router and alignment kernel tests on CUDA, the kernel count, the CUDA-graph tests
      python3 -m pytest -q -p no:cacheprovider tests/kernels/test_glue_kernels.py \
        tests/kernels/test_attention_kernels.py tests/kernels/test_router.py tests/kernels/test_moe_align.py \
        tests/kernels/test_pdl.py tests/models/test_kernel_count.py > "$OUT/glue_tests.log" 2>&1
      QUICKMOE_TEST_DEVICE=cuda python3 -m pytest -q -p no:cacheprovider tests/models/test_cuda_graphs.py \
        > "$OUT/graph_tests.log" 2>&1
      for log in glue_tests graph_tests; do
        echo "$log: $(tail -1 "$OUT/$log.log")"; grep -E '^(FAILED|ERROR)' "$OUT/$log.log" | head -20
      done ;;
    router)
      python3 scripts/probes/router_probe.py 2>&1 | tee "$OUT/router_probe.log" | sed -n '/== summary/,$p' ;;
    variants)
      python3 scripts/probes/moe_variant_probe.py --json "$OUT/moe_variants.json" 2>&1 | tee "$OUT/moe_variants.log"
      python3 scripts/probes/moe_variant_probe.py --prefill 2>&1 | tee "$OUT/moe_variants_prefill.log" ;;
    variants-prefill)
      python3 scripts/probes/moe_variant_probe.py --prefill 2>&1 | tee "$OUT/moe_variants_prefill.log" ;;
    ncu)
      timeout 400 ncu --profile-from-start off --kernel-name regex:gemm --section SpeedOfLight --section WarpStateStats \
        --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats --section SchedulerStats \
        python3 scripts/probes/moe_variant_probe.py --profile-once --configs "${NCU_CONFIGS:-n64,swap64w2}" \
        > "$OUT/ncu_gemm.txt" 2>&1; echo "ncu: $(grep -c '_kernel' "$OUT/ncu_gemm.txt") kernel sections" ;;
    moe-rows)
      python3 -m pytest -q -p no:cacheprovider tests/kernels/test_fused_moe.py -k eight_row > "$OUT/moe_rows_tests.log" 2>&1
      echo "eight-row tests: $(tail -1 "$OUT/moe_rows_tests.log")"
      for item in ${ROWS_SHAPES:-gpt-oss-20b gpt-oss-120b}; do  # SHAPE or SHAPE:FORMAT (e.g. qwen3-30b-a3b:nvfp4)
        shape=${item%%:*}; fmt=${item#*:}; [ "$fmt" = "$item" ] && fmt=""
        python3 scripts/probes/moe_config_sweep.py --shape "$shape" ${fmt:+--format "$fmt"} \
          --tokens "${ROWS_TOKENS:-1,2,4,8,16,32,64}" --block-m 8,16 --block-n 32,64 --block-k 256 --warps 2,4 \
          --stages 3 --swap 1 --top 4 --time-tuned --json "$OUT/moe_rows_${shape}_${fmt}.json" 2>&1 \
          | tee "$OUT/moe_rows_${shape}_${fmt}.txt" | grep -E "tuned|^ +[0-9]" | head -120
      done ;;
    register)
      timeout -k 5 200 python3 -m pytest -q -rA -p no:cacheprovider -m gpu tests/kernels/test_moe_gemm_register.py \
        > "$OUT/register_tests.log" 2>&1
      echo "register-operand tests: $(tail -1 "$OUT/register_tests.log")"
      timeout -k 5 330 python3 scripts/probes/moe_register_rows_probe.py --tokens-20b 64,128,256,512 \
        --tokens-120b 256,512 --stages 3 --json "$OUT/register_rows.json" > "$OUT/register_rows.log" 2>&1
      sed -n '/^GEMM 1 + GEMM 2/,$p' "$OUT/register_rows.log" ;;
    attention-ncu)
      for point in ${NCU_POINTS:-256x4096 64x4096 8x16384}; do
        echo "== $point" >> "$OUT/attention_ncu.txt"
        timeout 200 ncu --profile-from-start off --section SpeedOfLight --section MemoryWorkloadAnalysis \
          --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats \
          --section InstructionStats --metrics dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed \
          python3 scripts/probes/attention_ncu_probe.py --batch "${point%x*}" --context "${point#*x}" \
          >> "$OUT/attention_ncu.txt" 2>&1
      done
      grep -E "^== |^  [a-zA-Z_]+.*\(|Duration|DRAM Throughput|dram__|Achieved Occupancy|Registers Per|Executed Ipc A" \
        "$OUT/attention_ncu.txt" | head -80 ;;
    serve-ab)
      make_20b
      # SERVE_AB="LABEL:FLAGS ..." (FLAGS: quickmoe serve options, comma-separated), SERVE_AB_OUTPUT (256),
      # SERVE_AB_CONC (1,128)
      for variant in ${SERVE_AB:-default: no-prefix-caching:--no-enable-prefix-caching all-graphs:--cuda-graphs-startup-max=256}; do
        label=${variant%%:*}; flags=${variant#*:}; flags=${flags//,/ }
        python3 -m quickmoe serve "$CKPT" --port 8011 $flags > "/tmp/serve_ab_$label.log" 2>&1 &
        server=$!
        for _ in $(seq 240); do curl -sf localhost:8011/health > /dev/null && break; sleep 1; done
        echo "-- $label ($flags)" | tee -a "$OUT/serve_ab.txt"
        python3 -m quickmoe bench serve --base-url http://127.0.0.1:8011 --concurrency "${SERVE_AB_CONC:-1,128}" \
          --input-len 1000 --output-len "${SERVE_AB_OUTPUT:-256}" --result-json "/tmp/serve_ab_$label.json" \
          > "/tmp/serve_ab_$label.txt" 2>&1
        { grep -A3 "conc    ok" "/tmp/serve_ab_$label.txt"; grep -E "server steps|client used" "/tmp/serve_ab_$label.txt"; } \
          | tee -a "$OUT/serve_ab.txt"
        kill -TERM "$server"; wait "$server"
        grep -h "captured" "/tmp/serve_ab_$label.log" >> "$OUT/serve_ab.txt"
      done ;;  # (few files under $OUT: the device tool brings back 8 at most)
    host-profile)
      make_20b
      python3 scripts/probes/host_step_probe.py "$CKPT" --batch "${HOST_BATCH:-256}" 2>&1 | grep -v INFO \
        | tee "$OUT/host_step_probe.log" | head -12 ;;
    serve-variants)
      # SERVE_VARIANTS="NAME:TREE:PYFLAGS ...": TREE "new" (the work tree) or a tree under .ab/; PYFLAGS "slow" runs
      # the server with uvloop and httptools unimportable (uvicorn then takes asyncio and h11), "switchN" sets
      # sys.setswitchinterval(N ms / 1000), "gc-SETTING" sets QUICKMOE_SERVING_GC=SETTING for both processes. Each:
      # quickmoe serve, bench serve at each CONCURRENCY:PROMPTS of SERVE_VARIANT_CONCS (default "1:8 128:384";
      # 1000 -> 256), the overview rows and the server's steps line (serve_variants.txt)
      make_20b
      for variant in ${SERVE_VARIANTS:-base:base:slow new-slow:new:slow new:new:}; do
        IFS=: read -r label tree flags <<< "$variant"
        root=$PWD; [ "$tree" != new ] && root=$PWD/.ab/$tree
        pre="import sys"
        gc_env=()
        case "$flags" in
          slow) pre="$pre; sys.modules['uvloop'] = None; sys.modules['httptools'] = None" ;;
          switch*) pre="$pre; sys.setswitchinterval(${flags#switch} / 1000)" ;;
          gc-*) gc_env=("QUICKMOE_SERVING_GC=${flags#gc-}") ;;
        esac
        env "${gc_env[@]}" PYTHONPATH=/tmp/site:$root/src python3 -c \
          "$pre; from quickmoe.cli import main; sys.exit(main(sys.argv[1:]))" \
          serve "$CKPT" --port 8011 -q > "/tmp/serve_var_$label.log" 2>&1 &
        server=$!
        for _ in $(seq 240); do curl -sf localhost:8011/health > /dev/null && break; sleep 1; done
        : > "/tmp/serve_var_$label.txt"
        for conc in ${SERVE_VARIANT_CONCS:-1:8 128:384}; do
          python3 -m quickmoe bench serve --base-url http://127.0.0.1:8011 --concurrency "${conc%%:*}" --input-len 1000 \
            --output-len 256 --num-prompts "${conc#*:}" > "/tmp/serve_var_${label}_${conc%%:*}.txt" 2>&1
          cat "/tmp/serve_var_${label}_${conc%%:*}.txt" >> "/tmp/serve_var_$label.txt"
        done
        { echo "-- $label (tree $tree, $flags)"; grep -h -A1 "conc    ok" "/tmp/serve_var_$label.txt"
          grep -E "server steps|client used" "/tmp/serve_var_$label.txt" | tail -2; } | tee -a "$OUT/serve_variants.txt"
        kill -TERM "$server"; wait "$server"
      done ;;
    *) echo "unknown stage $stage (expected tests, attention, invariance, ab-attention, generate, profile, serve, small-batch, variants, ncu, serve-ab)"; exit 2 ;;
  esac
done
echo "== done ($(date +%T))"
