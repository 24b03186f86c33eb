#!/usr/bin/env bash
# Issue 17's GPU figures, on the device machine from the repository root (wheels of fetch_wheels.sh carried in
# .whl/); logs and JSON under $OUT. Stages (each fits one 10-minute call):
#   prefix      quickmoe serve on a gpt-oss-20b-shaped checkpoint, bench serve at concurrency 32 with a shared
#               2,000-token system prompt and 100-token user turns (100 output tokens), with prefix caching (the
#               default) and then with --no-enable-prefix-caching: TTFT median of each, and the hit counters.
#   structured  decode throughput at batch 64 (64 x 16 -> 256 tokens) without and with a structured output (a regex
#               every token keeps open, ignore_eos), same process: what the token mask and the pipeline hold cost.
set -uo pipefail
source "$(dirname "$0")/env.sh"
CKPT=/tmp/gpt-oss-20b
PORT=8017
URL=http://127.0.0.1:$PORT
[ -f "$CKPT/config.json" ] || python3 -m quickmoe make-checkpoint "$CKPT" --preset gpt-oss-20b -q

serve_and_bench() {  # $1: label; the rest: serve flags
  local label=$1; shift
  python3 -m quickmoe serve "$CKPT" --port $PORT -q "$@" > "$OUT/serve_$label.log" 2>&1 &
  local server=$!
  for _ in $(seq 300); do curl -sf $URL/health > /dev/null && break; sleep 1; done
  python3 -m quickmoe bench serve --base-url $URL --concurrency 32 --num-prompts 128 --input-len 100 \
    --shared-prefix-len 2000 --output-len 100 --result-json "$OUT/prefix_$label.json" | tee "$OUT/prefix_$label.txt"
  curl -s $URL/metrics | grep -E '^quickmoe:prefix_cache_(hits|queries)_total' | tee -a "$OUT/prefix_$label.txt"
  kill -TERM $server; wait $server
}

for stage in "$@"; do
  case $stage in
    prefix)
      serve_and_bench cached
      serve_and_bench uncached --no-enable-prefix-caching
      python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
ttft = {k: json.load(open(f"{out}/prefix_{k}.json"))["results"][0]["median_ttft_ms"] for k in ("cached", "uncached")}
print(f"TTFT median at concurrency 32, 2000 shared + 100 own tokens: prefix caching {ttft['cached']:.1f} ms, "
      f"without {ttft['uncached']:.1f} ms")
PY
      ;;
    structured)
      python3 - <<'PY' | tee "$OUT/structured_cost.txt"
import time
from quickmoe import LLM, SamplingParams
from quickmoe.engine.sampling_params import StructuredOutput
llm = LLM("/tmp/gpt-oss-20b")
while llm.engine.idle_work():  # the decode graphs beyond bucket 8, as serve captures them once idle
    pass
prompts = [[1000 + 17 * i + j for j in range(16)] for i in range(64)]
def run(structured):
    params = SamplingParams(max_tokens=256, temperature=0, ignore_eos=True, structured=structured)
    llm.generate(prompts[:2], SamplingParams(max_tokens=8, temperature=0, ignore_eos=True, structured=structured))
    t0 = time.perf_counter()
    outs = llm.generate(prompts, params)
    return sum(len(o.token_ids) for o in outs) / (time.perf_counter() - t0)
free = run(None)
masked = run(StructuredOutput("regex", "[a-z ]*"))
free_again = run(None)
print(f"batch 64 decode: {free:.0f} tok/s free, {masked:.0f} tok/s with the regex mask, {free_again:.0f} free again; "
      f"cost {100 * (1 - masked / ((free + free_again) / 2)):.1f}%")
PY
      ;;
    *) echo "unknown stage $stage (prefix, structured)"; exit 2;;
  esac
done
