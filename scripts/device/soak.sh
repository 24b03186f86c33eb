#!/usr/bin/env bash
# The GPU soak of issue 14, on the device machine from the repository root (wheels of fetch_wheels.sh carried in
# .whl/); logs and figures under $OUT. Stages (each fits one 10-minute call; several may be given, in order):
#   soak      quickmoe serve with its defaults on a gpt-oss-20b-shaped checkpoint; a warm-up; host RSS and GPU memory
#             (nvidia-smi) after it; bench serve at concurrency 64 for $SOAK_S seconds (default 490) with mixed
#             prompt/output lengths 50-4000 / 1-1000 and 10% client disconnects; midway a burst of 400 requests
#             beyond --max-waiting (64 running + 256 waiting: the rest must get 503, nothing may fail); RSS and GPU
#             memory again; /metrics at the end (every KV block free: kv_cache_sequences 0, usage 0); SIGTERM.
#   long      one request with a 128k-token context (130000 prompt tokens + 64 generated; full-attention layers
#             read it all) on the defaults, then a KV-cache exhaustion under load: --kv-cache-memory 4GiB and 64
#             clients with 3000-4000-token prompts, which must preempt (quickmoe:num_preemptions_total > 0) and
#             recover without a failed request.
# Pass: every "FAILED"/"PASS" line in $OUT/soak_verdict.txt.
set -uo pipefail
source "$(dirname "$0")/env.sh"
CKPT=/tmp/gpt-oss-20b
PORT=8012
URL=http://127.0.0.1:$PORT
VERDICT="$OUT/soak_verdict.txt"
make_20b() { [ -f "$CKPT/config.json" ] || python3 -m quickmoe make-checkpoint "$CKPT" --preset gpt-oss-20b -q; }
verdict() { echo "$1" | tee -a "$VERDICT"; }

start_server() {  # $1: log name; the rest: extra serve flags
  local name=$1; shift
  python3 -m quickmoe serve "$CKPT" --port $PORT -q "$@" > "$OUT/serve_$name.log" 2>&1 &
  server=$!
  for _ in $(seq 300); do curl -sf $URL/health > /dev/null && return 0; sleep 1; done
  verdict "FAILED $name: the server did not become healthy"; tail -20 "$OUT/serve_$name.log"; return 1
}

memory() {  # $1: label -> host RSS of the server and GPU memory in use
  echo "$1 host_rss_kib=$(awk '/VmRSS/ {print $2}' /proc/$server/status)" \
       "gpu_used_mib=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1)" \
    | tee -a "$OUT/soak_memory.txt"
}

metric() {  # $1: metric name (and label filter) -> the sum of its samples
  curl -s $URL/metrics | awk -v m="$1" 'index($0, m) == 1 {s += $NF} END {print s + 0}'
}

check_level() {  # $1: result json; $2: label; passes when no request failed
  python3 - "$1" "$2" <<'PY' | tee -a "$VERDICT"
import json, sys
level = json.load(open(sys.argv[1]))["results"][0]
ok = level["failed_requests"] == 0 and level["successful_requests"] > 0
print(("PASS" if ok else "FAILED"), sys.argv[2], {k: level[k] for k in (
    "successful_requests", "failed_requests", "disconnected_requests", "rejected_requests", "duration_s",
    "output_throughput", "median_ttft_ms", "p99_itl_ms", "max_itl_ms")}, level["errors"])
PY
}

bench() {  # $1: result json; the rest: bench serve flags
  local out=$1; shift
  python3 -m quickmoe bench serve --base-url $URL --seed 14 --result-json "$out" -q "$@" > "${out%.json}.log" 2>&1
}

for stage in "$@"; do
  case "$stage" in
    soak)
      make_20b
      start_server soak || exit 1
      bench "$OUT/soak_warmup.json" --concurrency 64 --num-prompts 128 --input-len-range 50,4000 \
        --output-len-range 1,200 --no-warmup
      memory "after_warmup"
      (sleep 200; bench "$OUT/soak_burst.json" --concurrency 400 --num-prompts 400 --input-len 50 --output-len 300 \
         --no-warmup) &
      burst=$!
      bench "$OUT/soak.json" --concurrency 64 --duration "${SOAK_S:-490}" --input-len-range 50,4000 \
        --output-len-range 1,1000 --disconnect-fraction 0.1 --timeout 600
      wait $burst
      memory "after_soak"
      check_level "$OUT/soak.json" "soak: concurrency 64, mixed lengths, 10% disconnects"
      check_level "$OUT/soak_burst.json" "burst of 400 beyond --max-waiting (503s expected, no failure)"
      sleep 2
      curl -s $URL/metrics > "$OUT/soak_metrics_end.txt"
      sequences=$(metric quickmoe:kv_cache_sequences); usage=$(metric quickmoe:kv_cache_usage_perc)
      [ "$sequences" = 0 ] && [ "$usage" = 0 ] && verdict "PASS every KV block free at the end" \
        || verdict "FAILED KV blocks left at the end: sequences=$sequences usage=$usage"
      kill -TERM "$server"; wait "$server"; echo "serve exit status $?" | tee -a "$VERDICT" ;;
    long)
      make_20b
      start_server long || exit 1
      python3 - "$URL" <<'PY' | tee -a "$VERDICT"
import json, random, sys, time
import httpx
url = sys.argv[1]
model = httpx.get(url + "/v1/models").json()["data"][0]
ids = [random.Random(0).randrange(1000, 30000) for _ in range(130000)]
t0 = time.monotonic()
response = httpx.post(url + "/v1/completions", json={"model": model["id"], "prompt": ids, "max_tokens": 64,
                                                     "temperature": 0, "ignore_eos": True}, timeout=1200)
ok = response.status_code == 200 and response.json()["usage"]["completion_tokens"] == 64
print("PASS" if ok else "FAILED", f"128k-token context: max_model_len {model['max_model_len']}, HTTP",
      response.status_code, f"{time.monotonic() - t0:.1f} s", response.text[:200] if not ok else "")
PY
      kill -TERM "$server"; wait "$server"
      start_server exhaustion --kv-cache-memory 4GiB || exit 1
      bench "$OUT/soak_exhaustion.json" --concurrency 64 --num-prompts 192 --input-len-range 3000,4000 \
        --output-len-range 200,1000 --timeout 600
      check_level "$OUT/soak_exhaustion.json" "KV-cache exhaustion under load (4 GiB cache, 64 x 3-4k prompts)"
      preemptions=$(metric quickmoe:num_preemptions_total)
      [ "${preemptions%.*}" -gt 0 ] && verdict "PASS preempted $preemptions time(s) and recovered" \
        || verdict "FAILED no preemption happened (raise the load or lower --kv-cache-memory)"
      kill -TERM "$server"; wait "$server" ;;
    *) echo "unknown stage $stage (expected soak, long)"; exit 2 ;;
  esac
done
