#!/usr/bin/env bash
# Cold start II (issue 16) on the device machine, from the repository root; logs under $OUT. Needs the wheels of
# scripts/device/fetch_wheels.sh carried in .whl/. Stages, in the order given (each fits one 10-minute call; several
# may be given). Every figure is a median of >= 3 fresh processes, warm page cache; what each stage must show:
#   tests         GPU tests (start-up captures only buckets 1-8 and graph decode = eager; a warm kernel cache compiles
#                 nothing at start-up nor for the first token; compiled = eager) and the engine's equivalences on
#                 CUDA in float32 (padded/lazy graph path included): all pass
#   equality      20b in float32: the first 32 greedy tokens identical eager / graphs / --compile on with fresh caches
#                 / --compile on with warm caches (TORCH_LOGS=recompiles: one recompile per extra layer kind, none
#                 at the first request)
#   coldstart     bench coldstart 20b with the serving defaults vs transformers, and starts with an empty Triton
#                 cache: process start -> first token <= 6.0 s; capture <= 0.5 s; 0 kernels compiled at start-up
#                 and for the first token; first_token <= 0.2 s
#   quick         bench coldstart 20b with the serving defaults alone (no baselines): the phases after a change
#   capture       the capture strategy: buckets 1-8 at start-up (default) vs all 9 (--cuda-graphs-startup-max 256)
#                 vs no graphs: the capture phase and total of each
#   capture-ab    the capture warm-ups over the layer prefix (executor/capture_warmup.py): the graphs' GPU tests, then
#                 bench coldstart -n 3 (serving defaults) with QUICKMOE_CAPTURE_WARMUP=prefix and =all in turns, twice:
#                 the capture phase, each bucket's warm-up and capture seconds and layers, and any capture retried
#                 after its prefix warm-up (capture_ab.txt; goal capture <= 0.5 s)
#   imports       import_probe (bare torch, torch + triton, the issue's import line, generate/serve imports) and
#                 bench coldstart with QUICKMOE_CUDA_PREINIT=context (ring pinned after the imports) and =0:
#                 does the early start slow the imports; goal weights_ready <= import torch + 1 s
#   compile       bench coldstart 20b --compile: compile phase fresh caches <= 10 s, warm <= 2 s (info.compile says
#                 where the time goes: imports, Dynamo, codegen runs (0 when warm), cache loads, hashing)
#   compile-ab    bench coldstart 20b --compile in turns between the work tree and trees in .ab/NAME (AB_RUNS):
#                 the compile phase and its parts, fresh and warm caches (compile_ab.txt)
#   aot           --compile aot: torch's AOT API present; its GPU test (CUDA graphs over the loaded functions);
#                 32 greedy float32 tokens eager / aot fresh / aot warm identical; bench coldstart --compile aot
#                 and --compile on (AOT_SKIP_ON=1: aot only): the compile phase fresh and warm, side by side
#   compile-ratio the same model with 2 layers, --compile; the ratio of the fresh compile phases 24 / 2 <= 1.3
#   serve         quickmoe serve 20b, launch -> /health 200 measured from outside (serve_probe): <= 6.5 s; the first
#                 request's first chunk right after
#   120b          gpt-oss-120b (36 layers, MXFP4, 65 GB) written to /dev/shm; bench coldstart: process start -> first
#                 token <= 12 s, weights_ready, GPU memory and the KV cache left
#   bytecode      the bytecode cache (QUICKMOE_BYTECODE_CACHE, startup/bytecode_cache.py): bench coldstart 20b with it
#                 off, then auto (the untimed first start writes it), then serve's /health, off / auto alternating;
#                 on an image that ships no .pyc the imports phase should drop by about 3 s
#   first-token   scripts/probes/first_token_probe.py on the 20b, plain, cprofile (pstats files kept) and torch.profiler:
#                 where the capture phase's warm-ups and the first request's time go; `-X importtime` of generate
#   tokenizer     gpt-oss's tokenizer.json recognised as o200k_harmony (tokenizer/recognise.py) vs loaded through
#                 `tokenizers` (QUICKMOE_TOKENIZER_RECOGNITION=0), in turns: bench coldstart --import-floor (weights_ready
#                 <= import torch + 1 s; the CPU cut weights_ready by 0.5 s) and serve's /health from outside
#   120b-serve    quickmoe serve on it: /health, then bench serve at concurrency 1 and 16 (1000 -> 1000): no failure;
#                 the KV cache's size and nvidia-smi's memory in use
#   load-plan     the loader's tests on CUDA (the cached plan's included), then Qwen3-30B-A3B NVFP4 (74,163 tensors)
#                 with the cached load plan on and off (QUICKMOE_LOAD_PLAN_CACHE), in turns: bench coldstart
#                 --import-floor (weights_ready <= import torch + 2 s; the CPU cut the steps before the first read
#                 from 0.26 to 0.02 s)
#   start-threads the 20b's start with and without the three start-up cuts, in turns: none ("base":
#                 QUICKMOE_TRITON_KEY_CACHE=0 QUICKMOE_TABLES_START=0 QUICKMOE_STARTUP_GC=normal); the Triton version
#                 key read from the cache ("key"); that and the rotary table computed beside the load ("key_tables");
#                 the collector paused through the imports, what they made frozen after ("gc"); all three ("all",
#                 the defaults since the 2026-11-29 sixth session, where it measured weights_ready 2.55-2.61 s against
#                 2.89-3.12 s for none). bench coldstart --import-floor; the phases, and the start threads' seconds
#                 (info: triton_start_seconds, tables_start_seconds)
#   precompile    the kernel precompile (executor/kernel_precompile.py): its GPU tests; `hotpath.sh serve-warmup` with an
#                 empty and then a warm QUICKMOE_CACHE_DIR for the work tree and the trees in .ab/NAME (AB_RUNS, default
#                 "new base"); bench coldstart -n 3 (warm) in turns (AB_RUNS twice): the load phase and weights_ready
#                 with the kernel keys settled on Triton's start thread; bench coldstart --compile -n 1 for the work
#                 tree (precompile_ab.txt)
set -uo pipefail
source "$(dirname "$0")/env.sh"
CKPT=/tmp/gpt-oss-20b
CKPT2=/tmp/gpt-oss-20b-2L
CKPT120=/dev/shm/gpt-oss-120b
make_20b() { [ -f "$CKPT/config.json" ] || python3 -m quickmoe make-checkpoint "$CKPT" --preset gpt-oss-20b -q; }
make_120b() {
  [ -f "$CKPT120/config.json" ] && return
  local free_gb
  free_gb=$(df -BG --output=avail /dev/shm | tail -1 | tr -dc 0-9)
  [ "$free_gb" -ge 70 ] || mount -o remount,size=100G /dev/shm || { echo "/dev/shm has ${free_gb} GB: too small"; exit 1; }
  df -h /dev/shm | tee "$OUT/shm.txt"
  python3 -m quickmoe make-checkpoint "$CKPT120" --preset gpt-oss-120b -q
}
bench() {  # bench NAME ARGS...: one `bench coldstart` run, table to stdout and $OUT/NAME.txt, JSON to $OUT/NAME.json
  local name=$1; shift
  echo "== $name: $*"
  python3 -m quickmoe bench coldstart "$@" --json "$OUT/$name.json" 2>&1 | grep -v INFO | tee "$OUT/$name.txt"
}
greedy32() {  # greedy32 NAME ARGS...: 32 greedy tokens of the 20b in float32, token ids to $OUT/eq_NAME.json
  local name=$1; shift
  TORCH_LOGS=recompiles python3 -m quickmoe generate "$CKPT" --prompt "The capital of France is" --max-tokens 32 \
    --temperature 0 --ignore-eos --device cuda --dtype float32 --json "$@" > "$OUT/eq_$name.json" 2> "$OUT/eq_$name.log"
  echo "$name: exit $?, $(grep -c 'Recompiling function' "$OUT/eq_$name.log") recompiles logged; " \
    "$(grep -o 'compiled [0-9]* graphs.*' "$OUT/eq_$name.log" | head -1)"
}
stage_tests() {
  python3 -m pytest -q -m gpu tests --ignore=tests/server -p no:cacheprovider 2>&1 | tee "$OUT/gpu_tests.log" | tail -4
  QUICKMOE_TEST_DEVICE=cuda python3 -m pytest -q -p no:cacheprovider tests/models/test_engine.py \
    tests/models/test_cuda_graphs.py 2>&1 | tee "$OUT/engine_tests_on_gpu.log" | tail -4
}
stage_equality() {
  make_20b
  greedy32 eager --cuda-graphs off
  greedy32 graphs
  local fresh
  fresh=$(mktemp -d)
  QUICKMOE_COMPILE_CACHE_DIR=$fresh TRITON_CACHE_DIR=$fresh/triton greedy32 compile_fresh --compile on -v
  QUICKMOE_COMPILE_CACHE_DIR=$fresh TRITON_CACHE_DIR=$fresh/triton greedy32 compile_warm --compile on -v
  python3 - "$OUT" <<'PY'
import json, sys
runs = {n: json.loads(open(f"{sys.argv[1]}/eq_{n}.json").read())["token_ids"]
        for n in ("eager", "graphs", "compile_fresh", "compile_warm")}
same = all(ids == runs["eager"] for ids in runs.values())
print("first 32 greedy tokens (float32):", "IDENTICAL" if same else "DIFFER", {n: ids[:8] for n, ids in runs.items()})
PY
}
stage_coldstart() {
  make_20b
  bench cold2_20b "$CKPT" -n 3 --device cuda --baseline transformers --compare-cold-kernels
}
stage_quick() {
  make_20b
  bench cold2_20b_quick "$CKPT" -n 3 --device cuda
}
stage_capture() {
  make_20b
  bench cold2_20b_all_buckets "$CKPT" -n 3 --device cuda --generate-args="--cuda-graphs-startup-max 256"
  bench cold2_20b_no_graphs "$CKPT" -n 3 --device cuda --no-cuda-graphs
}
stage_capture_ab() {
  make_20b
  timeout 240 python3 -m pytest -q -m gpu tests/models/test_capture_warmup.py tests/models/test_cuda_graphs.py \
    tests/models/test_prefill_graphs.py -p no:cacheprovider 2>&1 | tail -4 | tee "$OUT/capture_ab.txt"
  QUICKMOE_CAPTURE_WARMUP=prefix timeout 240 python3 -m pytest -q -m gpu tests/models/test_cuda_graphs.py \
    tests/models/test_prefill_graphs.py tests/models/test_kernel_precompile.py -p no:cacheprovider 2>&1 | tail -4 \
    | tee -a "$OUT/capture_ab.txt"
  local run i=0
  for run in prefix all prefix all; do
    i=$((i + 1))
    QUICKMOE_CAPTURE_WARMUP=$run bench "cold2_capture_${i}_$run" "$CKPT" -n 3 --device cuda > /dev/null
    python3 - "$OUT/cold2_capture_${i}_$run.json" "$i $run" <<'PY' | tee -a "$OUT/capture_ab.txt"
import json, statistics, sys
doc = json.load(open(sys.argv[1]))
reports = doc["reports"]["quickmoe"]
phase = lambda name: statistics.median(r["phases"][name] for r in reports)
print(f"-- {sys.argv[2]}: capture {phase('capture'):.3f} s, first_token {phase('first_token'):.3f} s, "
      f"total {statistics.median(r['total'] for r in reports):.3f} s")
for r in reports:
    caps = r["info"]["cuda_graphs"]["captures"]
    print("   ", [(c["batch_size"], c["warmup_s"], c["capture_s"], c.get("warmup_layers"), c.get("prefix_retry"))
                  for c in caps])
PY
  done
}
stage_imports() {
  make_20b
  python3 scripts/probes/import_probe.py -n 3 --device cuda --model "$CKPT" --json "$OUT/imports.json" 2>&1 \
    | tee "$OUT/imports.txt"
  QUICKMOE_CUDA_PREINIT=context bench cold2_20b_preinit_context "$CKPT" -n 3 --device cuda
  QUICKMOE_CUDA_PREINIT=0 bench cold2_20b_preinit_off "$CKPT" -n 3 --device cuda
}
stage_compile() {
  make_20b
  bench cold2_20b_compile "$CKPT" -n 3 --device cuda --compile
}
stage_compile_ab() {
  # bench coldstart --compile in turns between the work tree ("new") and trees in .ab/NAME (AB_RUNS, default
  # "new base"); the compile phase's parts (fresh and warm) of each, side by side (compile_ab.txt)
  make_20b
  local run root
  for run in ${AB_RUNS:-new base}; do
    root=$PWD; [ "$run" != new ] && root=$PWD/.ab/$run
    PYTHONPATH=/tmp/site:$root/src bench "cold2_20b_compile_$run" "$CKPT" -n 3 --device cuda --compile > /dev/null
    python3 - "$OUT/cold2_20b_compile_$run.json" "$run" <<'PY' | tee -a "$OUT/compile_ab.txt"
import json, statistics, sys
d = json.load(open(sys.argv[1]))
for kind, runs in d["reports"].items():
    comp = [r.get("info", {}).get("compile") or {} for r in runs]
    phases = [r.get("phases", {}) for r in runs]
    def med(xs):
        xs = [x for x in xs if x is not None]
        return round(statistics.median(xs), 3) if xs else None
    keys = ("imports_s", "torch_key_s", "dynamo_s", "backend_s", "key_s", "warmup_s")
    print(sys.argv[2], kind, {p: med([ph.get(p) for ph in phases]) for p in ("build", "load", "process", "compile")},
          "first token", med([r.get("total") for r in runs]), {k: med([c.get(k) for c in comp]) for k in keys})
PY
  done
}
stage_aot() {
  make_20b
  python3 -c "import torch; print('torch', torch.__version__, 'AOT API:', hasattr(torch.compiler, 'load_compiled_function'), hasattr(torch.compiler, 'save_compiled_function'))" | tee "$OUT/aot_api.txt"
  python3 -m pytest -q -m gpu -p no:cacheprovider tests/models/test_compile.py 2>&1 | tee "$OUT/aot_gpu_tests.log" | tail -3
  greedy32 eager --cuda-graphs off
  local fresh
  fresh=$(mktemp -d)
  QUICKMOE_CACHE_DIR=$fresh TRITON_CACHE_DIR=$fresh/triton greedy32 aot_fresh --compile aot -v
  QUICKMOE_CACHE_DIR=$fresh TRITON_CACHE_DIR=$fresh/triton greedy32 aot_warm --compile aot -v
  grep -h "aot\|AOT" "$OUT"/eq_aot_*.log | grep -v Recompiling | head -6
  python3 - "$OUT" <<'PY'
import json, sys
runs = {n: json.loads(open(f"{sys.argv[1]}/eq_{n}.json").read())["token_ids"] for n in ("eager", "aot_fresh", "aot_warm")}
same = all(ids == runs["eager"] for ids in runs.values())
print("first 32 greedy tokens (float32):", "IDENTICAL" if same else "DIFFER", {n: ids[:8] for n, ids in runs.items()})
PY
  bench cold2_20b_compile_aot "$CKPT" -n 3 --device cuda --compile aot
  [ "${AOT_SKIP_ON:-0}" = 1 ] || bench cold2_20b_compile_on "$CKPT" -n 3 --device cuda --compile on
}
stage_compile_ratio() {
  [ -f "$CKPT2/config.json" ] || python3 -m quickmoe make-checkpoint "$CKPT2" --preset gpt-oss-20b --layers 2 -q
  bench cold2_20b_2L_compile "$CKPT2" -n 3 --device cuda --compile
  python3 - "$OUT" <<'PY'
import json, sys
def fresh(name):
    return json.load(open(f"{sys.argv[1]}/{name}.json"))["summary"]["compiled_cold"]["compile"][1]
deep, shallow = fresh("cold2_20b_compile"), fresh("cold2_20b_2L_compile")
print(f"compile phase, fresh caches (medians): 24 layers {deep:.2f} s, 2 layers {shallow:.2f} s = {deep / shallow:.2f}x")
PY
}
stage_serve() {
  make_20b
  python3 scripts/probes/serve_probe.py -n 3 --json "$OUT/serve_probe.json" -- "$CKPT" 2>&1 | tee "$OUT/serve_probe.txt"
}
stage_tokenizer() {
  make_20b  # (bench coldstart decides the file after its untimed first start, so every timed start finds the verdict)
  for turn in a b; do
    for recognition in 1 0; do
      QUICKMOE_TOKENIZER_RECOGNITION=$recognition bench "cold2_20b_recognition${recognition}_$turn" "$CKPT" -n 3 \
        --device cuda --import-floor
      QUICKMOE_TOKENIZER_RECOGNITION=$recognition python3 scripts/probes/serve_probe.py -n 3 \
        --json "$OUT/serve_recognition${recognition}_$turn.json" -- "$CKPT" 2>&1 | tail -1 \
        | tee "$OUT/serve_recognition${recognition}_$turn.txt"
    done
  done
}
stage_load_plan() {
  python3 -m pytest -q -p no:cacheprovider tests/unit/test_load_plan.py tests/unit/test_loader.py \
    tests/unit/test_stacked_loading.py > "$OUT/load_plan_tests.log" 2>&1
  echo "loader tests: $(tail -1 "$OUT/load_plan_tests.log")"
  [ -d /tmp/q3nvfp4 ] || python3 -m quickmoe make-checkpoint /tmp/q3nvfp4 --preset qwen3-30b-a3b --weights nvfp4 -q
  for turn in a b; do
    for cache in 1 0; do  # the untimed first start of each run writes the plan (cache 1), so the timed ones read it
      QUICKMOE_LOAD_PLAN_CACHE=$cache bench "cold2_q3nvfp4_plan${cache}_$turn" /tmp/q3nvfp4 -n 3 --device cuda \
        --import-floor
    done
  done
}
stage_start_threads() {
  make_20b
  for turn in a b; do
    for variant in base key key_tables gc all; do
      local key=0 tables=0 gc=normal
      case $variant in key) key=1 ;; key_tables) key=1 tables=1 ;; gc) gc=paused ;; all) key=1 tables=1 gc=paused ;; esac
      QUICKMOE_TRITON_KEY_CACHE=$key QUICKMOE_TABLES_START=$tables QUICKMOE_STARTUP_GC=$gc \
        bench "cold2_20b_threads_${variant}_$turn" "$CKPT" -n 3 --device cuda --import-floor
      python3 - "$OUT/cold2_20b_threads_${variant}_$turn.json" <<'PY'
import json, statistics, sys
def find(o, key, acc):
    if isinstance(o, dict):
        for k, v in o.items():
            find(v, key, acc) if k != key else acc.append(v)
    elif isinstance(o, list):
        for v in o:
            find(v, key, acc)
    return acc
doc = json.load(open(sys.argv[1]))
for key in ("triton_start_seconds", "tables_start_seconds", "cublas_start_seconds"):
    values = [v for v in find(doc, key, []) if isinstance(v, (int, float))]
    print(f"  {key}: " + (f"median {statistics.median(values):.3f} s of {len(values)}" if values else "none"))
PY
    done
  done
}
stage_bytecode() {
  make_20b
  QUICKMOE_BYTECODE_CACHE=off bench cold2_20b_bytecode_off "$CKPT" -n 3 --device cuda
  bench cold2_20b_bytecode_auto "$CKPT" -n 3 --device cuda
  du -sh "$QUICKMOE_CACHE_DIR/pycache" | tee "$OUT/pycache_size.txt"
  for turn in a b; do
    for mode in off auto; do
      echo "== serve, QUICKMOE_BYTECODE_CACHE=$mode, turn $turn"
      QUICKMOE_BYTECODE_CACHE=$mode python3 scripts/probes/serve_probe.py -n 1 \
        --json "$OUT/serve_probe_bytecode_${mode}_$turn.json" -- "$CKPT" 2>&1 | tee "$OUT/serve_bytecode_${mode}_$turn.txt"
    done
  done
}
stage_first_token() {
  make_20b
  for mode in plain cprofile torch; do
    echo "== first_token_probe --mode $mode"
    python3 scripts/probes/first_token_probe.py "$CKPT" --mode $mode --top 40 --dump "$OUT/first_token" \
      > "$OUT/first_token_$mode.txt" 2>&1
    echo "exit $?"; grep -E "^(imports|LLM|first request)|  (capture|first_token|total) " "$OUT/first_token_$mode.txt"
  done
  python3 -X importtime -m quickmoe generate "$CKPT" --prompt "Hello world" --max-tokens 1 --device cuda -q \
    2> "$OUT/importtime_generate.txt" > /dev/null
  echo "importtime of generate: exit $?, $(grep -c 'import time:' "$OUT/importtime_generate.txt") lines"
}
stage_120b() {
  make_120b
  bench cold2_120b "$CKPT120" -n 3 --device cuda
}
stage_120b_serve() {
  make_120b
  python3 scripts/probes/serve_probe.py -n 1 -- "$CKPT120" 2>&1 | tee "$OUT/serve_probe_120b.txt"
  python3 -m quickmoe serve "$CKPT120" --port 8012 > "$OUT/serve_120b.log" 2>&1 &
  local server=$!
  for _ in $(seq 300); do curl -sf localhost:8012/health > /dev/null && break; sleep 1; done
  grep -E "KV cache|captured" "$OUT/serve_120b.log"
  nvidia-smi --query-gpu=memory.used,memory.total --format=csv | tee "$OUT/serve_120b_memory.txt"
  python3 -m quickmoe bench serve --base-url http://127.0.0.1:8012 --concurrency 1,16 --input-len 1000 \
    --output-len 1000 --result-json "$OUT/bench_serve_120b.json" 2>&1 | tee "$OUT/bench_serve_120b.log"
  nvidia-smi --query-gpu=memory.used,memory.total --format=csv | tee -a "$OUT/serve_120b_memory.txt"
  kill -TERM "$server"; wait "$server"; echo "server exit $?"
}
stage_precompile() {
  make_20b
  timeout 300 python3 -m pytest -q -m gpu tests/models/test_kernel_precompile.py tests/unit/test_triton_start.py \
    -p no:cacheprovider 2>&1 | tail -3 | tee -a "$OUT/precompile_ab.txt"
  local runs="${AB_RUNS:-new base}" spec="" run
  for run in $runs; do
    spec+=" auto:fresh:$([ "$run" = new ] && echo . || echo "$run"):nobench"
    spec+=" auto:warm:$([ "$run" = new ] && echo . || echo "$run"):nobench"
  done
  WARMUP_RUNS="$spec" bash "$(dirname "$0")/hotpath.sh" serve-warmup > "$OUT/precompile_serve.log" 2>&1
  grep -A3 "^-- " "$OUT/serve_warmup.txt" | tee -a "$OUT/precompile_ab.txt"
  local i=0 root
  for run in $runs $runs; do
    i=$((i + 1)); root=$PWD; [ "$run" != new ] && root=$PWD/.ab/$run
    QUICKMOE_CACHE_DIR=/tmp/qmc_precompile_$run PYTHONPATH=/tmp/site:$root/src python3 -m quickmoe bench coldstart \
      "$CKPT" -n 3 --device cuda > "$OUT/precompile_cold_${i}_$run.txt" 2>&1
    { echo "-- $i $run"; grep -E "^(imports|build|load|process|precompile|capture|weights_ready|total) " \
      "$OUT/precompile_cold_${i}_$run.txt"; } | tee -a "$OUT/precompile_ab.txt"
  done
  rm -rf /tmp/qmc_precompile_compile
  QUICKMOE_CACHE_DIR=/tmp/qmc_precompile_compile python3 -m quickmoe bench coldstart "$CKPT" -n 1 --device cuda \
    --compile on > "$OUT/precompile_compile.txt" 2>&1
  grep -E "^(precompile|compile|total) |kernel precompile" "$OUT/precompile_compile.txt" | tee -a "$OUT/precompile_ab.txt"
}

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >> "$OUT/gpu.txt"
for stage in "$@"; do
  run="stage_${stage//-/_}"
  declare -F "$run" > /dev/null || { echo "unknown stage $stage (expected tests, equality, coldstart, capture," \
    "quick, capture-ab, imports, compile, compile-ab, aot, compile-ratio, serve, tokenizer, load-plan, start-threads, bytecode," \
    "first-token, 120b, 120b-serve, precompile)"; exit 2; }
  echo "== $stage ($(date +%T))"
  "$run"
done
echo "== done ($(date +%T))"
