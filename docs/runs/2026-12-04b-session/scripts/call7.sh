# Call 7: call 4's Mixtral-8x7B bf16 keys (committed in 1ae61c2) against 7638576 (.ab/main) at 512 sequences
# (--max-num-seqs 512): decode steps at T = 449-512 read key 512 now (key 65's tiles before). Alone, T = 512 ran
# 715.7 + 361.3 us on the pair in use against 696.6 + 336.9 us tuned (-4%).
# Prediction: the decode step's GPU median at 512 sequences -2 to -5%, output tok/s +1-3%.
source scripts/device/env.sh
trap 'cd "$OUT" && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
M=/tmp/mixtral-bf16-8
timeout 200 python3 -m quickmoe make-checkpoint "$M" --preset mixtral-8x7b --weights bf16 --layers 8 -q --overwrite \
  > "$OUT/make.log" 2>&1 || { echo "no checkpoint"; tail -5 "$OUT/make.log"; exit 1; }
echo "checkpoint ($SECONDS s)"
run() {  # TREE TAG
  local root=$PWD; [ "$1" = base ] && root=$PWD/.ab/main
  PYTHONPATH=/tmp/site:$root/src timeout 100 python3 -m quickmoe bench generate "$M" --num-prompts 512 \
    --max-num-seqs 512 --input-len 1000 --output-len 500 --json "$OUT/gen_$2_$1.json" > "$OUT/gen_$2_$1.log" 2>&1
  echo "$2 $1 rc $? ($SECONDS s): $(python3 -c "import json; q = json.load(open('$OUT/gen_$2_$1.json'))['quickmoe']
print(round(q['output_tokens_per_s'], 1), 'output tok/s, decode step', round(q['steps']['by_kind']['decode']\
['gpu_ms_median'], 3), 'ms')" 2>&1 | tail -1)"
}
run new 1; run base 1
[ "$SECONDS" -lt 220 ] && { run base 2; run new 2; }
