#!/usr/bin/env bash
# call 2 on nvidia-h200-x2: gpt-oss-120b TP=2 / EP=2 / TP=1: parity, generate, coldstart, serve (issue 20).
set -uo pipefail
source scripts/device/env.sh
export NCCL_NVLS_ENABLE=0 NCCL_CUMEM_ENABLE=0
T0=$(date +%s); END=$((T0 + ${BUDGET:-580}))
CKPT=/tmp/gpt-oss-120b
left() { echo $(( END - $(date +%s) )); }
finish() { cd "$OUT" && tar czf /tmp/all_logs.tgz --exclude='*.pt' . && mv /tmp/all_logs.tgz "$OUT/all_logs.tgz"; }
trap finish EXIT
log() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a "$OUT/timeline.txt"; }
# run a command in its own process group, at most $2 s (and what is left); if $3 (a file) appears, allow 30 s
# more for the exit, then kill the group and say it hung at exit
bounded() {
  local label=$1 limit=$2 done_file=$3; shift 3
  local l=$(left); [ "$limit" -gt "$l" ] && limit=$l
  [ "$limit" -lt 20 ] && { log "$label skipped (${limit} s left)"; return 1; }
  local s=$(date +%s)
  setsid "$@" > "$OUT/$label.log" 2>&1 &
  local pid=$! seen=0
  while kill -0 $pid 2>/dev/null; do
    local now=$(date +%s)
    [ -n "$done_file" ] && [ -f "$done_file" ] && [ $seen = 0 ] && seen=$now
    if [ $((now - s)) -ge "$limit" ] || { [ $seen != 0 ] && [ $((now - seen)) -ge 30 ]; }; then
      kill -KILL -- -$pid 2>/dev/null; sleep 1
      log "$label KILLED after $((now - s)) s (result file seen: $seen)"; return 2
    fi
    sleep 1
  done
  wait $pid; local rc=$?
  log "$label rc $rc in $(( $(date +%s) - s )) s"; return $rc
}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$OUT/gpu.txt"
s=$(date +%s); [ -f $CKPT/config.json ] || python3 -m quickmoe make-checkpoint $CKPT --preset gpt-oss-120b -q > "$OUT/make120b.log" 2>&1
log "make120b $(( $(date +%s) - s )) s"

bounded parity_tp1 90 "" python3 scripts/probes/tp_logits.py run $CKPT "$OUT/logits_tp1.pt"
bounded parity_tp2 90 "" python3 -m torch.distributed.run --nproc-per-node 2 scripts/probes/tp_logits.py run $CKPT "$OUT/logits_tp2.pt"
bounded parity_ep2 90 "" python3 -m torch.distributed.run --nproc-per-node 2 scripts/probes/tp_logits.py run $CKPT "$OUT/logits_ep2.pt" --ep
for b in tp2 ep2; do python3 scripts/probes/tp_logits.py compare "$OUT/logits_tp1.pt" "$OUT/logits_$b.pt" | tee -a "$OUT/parity.txt"; done

gen() { local label=$1; shift
  bounded generate_$label 170 "$OUT/bench_generate_$label.json" python3 -m quickmoe bench generate $CKPT "$@" \
    --num-prompts 256 --input-len 1000 --output-len 1000 --json "$OUT/bench_generate_$label.json"
  grep -E "^quickmoe |decode at batch 1: median|^throughput run:" "$OUT/generate_$label.log" | cut -c1-200; }
gen tp2 -tp 2
gen tp1
gen ep2 -tp 2 --enable-expert-parallel
for c in tp2 ep2; do
  extra=(-tp 2); [ $c = ep2 ] && extra+=(--enable-expert-parallel)
  bounded coldstart_$c 60 "$OUT/coldstart_$c.json" python3 -m quickmoe bench coldstart $CKPT -n 1 "${extra[@]}" --json "$OUT/coldstart_$c.json"
  grep -E "^total|^weights_ready|^first_token" "$OUT/coldstart_$c.log"
done

serve() { local label=$1; shift
  [ $(left) -lt 70 ] && { log "serve_$label skipped"; return; }
  setsid python3 -m quickmoe serve $CKPT --port 8011 -q "$@" > "$OUT/serve_$label.log" 2>&1 &
  local server=$! s=$(date +%s)
  for _ in $(seq 120); do curl -sf localhost:8011/health > /dev/null && break; sleep 1; done
  log "serve_$label ready after $(( $(date +%s) - s )) s"
  bounded bench_serve_${label}_c1 60 "" python3 -m quickmoe bench serve --base-url http://127.0.0.1:8011 --concurrency 1 \
    --num-prompts 4 --input-len 1000 --output-len 1000 --result-json "$OUT/bench_serve_${label}_c1.json"
  bounded bench_serve_${label}_c64 60 "" python3 -m quickmoe bench serve --base-url http://127.0.0.1:8011 --concurrency 64 \
    --num-prompts 64 --input-len 1000 --output-len 1000 --result-json "$OUT/bench_serve_${label}_c64.json"
  s=$(date +%s); kill -TERM $server
  for _ in $(seq 30); do kill -0 $server 2>/dev/null || break; sleep 1; done
  if kill -0 $server 2>/dev/null; then kill -KILL -- -$server; log "serve_$label HUNG on SIGTERM, killed"; else
    wait $server; log "serve_$label exit $? $(( $(date +%s) - s )) s after SIGTERM"; fi
  grep -hE "median|output tok/s|failed" "$OUT"/bench_serve_${label}_c*.log | cut -c1-160 | head -12; }
serve tp2 -tp 2
serve tp1
serve ep2 -tp 2 --enable-expert-parallel
log "total"
