#!/usr/bin/env bash
# call 3 on nvidia-h200-x2: (a) where `bench generate -tp 2` hangs after its table (py-spy, then SIGABRT with
# faulthandler); (b) 20b and 120b logits: float32 TP=1 vs TP=2 / EP=2 (the code's parity) and bf16 against float32
# (the noise a bf16 run of these random-weight models shows).
set -uo pipefail
source scripts/device/env.sh
export NCCL_NVLS_ENABLE=0 NCCL_CUMEM_ENABLE=0
python3 -m pip install -q --no-index --no-deps --target /tmp/pyspy .ab/py_spy-*.whl && export PATH=/tmp/pyspy/bin:$PATH
T0=$(date +%s)
finish() { cd "$OUT" && tar czf /tmp/all_logs.tgz --exclude='*.pt' . && mv /tmp/all_logs.tgz "$OUT/all_logs.tgz"; }
trap finish EXIT
log() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a "$OUT/timeline.txt"; }
( python3 -m quickmoe make-checkpoint /tmp/gpt-oss-120b --preset gpt-oss-120b -q > "$OUT/make120b.log" 2>&1; log "make120b done" ) &
MK=$!
python3 -m quickmoe make-checkpoint /tmp/gpt-oss-20b --preset gpt-oss-20b -q > "$OUT/make20b.log" 2>&1; log "make20b done"

# (a) the hang
J=$OUT/hang_generate.json
PYTHONFAULTHANDLER=1 setsid python3 -m quickmoe bench generate /tmp/gpt-oss-20b -tp 2 --num-prompts 16 --input-len 100 \
  --output-len 32 --json $J > "$OUT/hang_generate.log" 2>&1 &
P=$!; s=$(date +%s)
while kill -0 $P 2>/dev/null && [ ! -f $J ] && [ $(( $(date +%s) - s )) -lt 200 ]; do sleep 1; done
log "hang: json after $(( $(date +%s) - s )) s"
for _ in $(seq 12); do kill -0 $P 2>/dev/null || break; sleep 1; done
if kill -0 $P 2>/dev/null; then
  log "hang: still alive 12 s after its json"
  for pid in $(pgrep -g $P); do echo "=== pid $pid: $(tr '\0' ' ' < /proc/$pid/cmdline | cut -c1-150)"; \
    timeout 20 py-spy dump --native --pid $pid 2>&1 | head -150; done > "$OUT/hang_pyspy.txt" 2>&1
  for pid in $(pgrep -g $P); do kill -ABRT $pid; done; sleep 3; kill -KILL -- -$P 2>/dev/null
else wait $P; log "hang: exited rc $? (no hang)"; fi

# (b) parity
tp() { local label=$1 model=$2 n=$3; shift 3; local s=$(date +%s)
  if [ $n = 1 ]; then timeout 150 python3 scripts/probes/tp_logits.py run $model "$OUT/$label.pt" "$@" > "$OUT/$label.log" 2>&1
  else timeout 150 python3 -m torch.distributed.run --nproc-per-node $n scripts/probes/tp_logits.py run $model "$OUT/$label.pt" "$@" > "$OUT/$label.log" 2>&1; fi
  log "$label rc $? $(( $(date +%s) - s )) s"; }
cmp() { python3 scripts/probes/tp_logits.py compare "$OUT/$1.pt" "$OUT/$2.pt" | tee -a "$OUT/parity.txt"; }
tp 20b_tp1_f32 /tmp/gpt-oss-20b 1 --dtype float32
tp 20b_tp2_f32 /tmp/gpt-oss-20b 2 --dtype float32
tp 20b_ep2_f32 /tmp/gpt-oss-20b 2 --dtype float32 --ep
tp 20b_tp1_bf16 /tmp/gpt-oss-20b 1
tp 20b_tp2_bf16 /tmp/gpt-oss-20b 2
cmp 20b_tp1_f32 20b_tp2_f32; cmp 20b_tp1_f32 20b_ep2_f32; cmp 20b_tp1_f32 20b_tp1_bf16; cmp 20b_tp1_f32 20b_tp2_bf16; cmp 20b_tp1_bf16 20b_tp2_bf16
rm -f "$OUT"/20b_*.pt
wait $MK
tp 120b_tp1_f32 /tmp/gpt-oss-120b 1 --dtype float32
tp 120b_tp2_f32 /tmp/gpt-oss-120b 2 --dtype float32
tp 120b_tp1_bf16 /tmp/gpt-oss-120b 1
tp 120b_tp2_bf16 /tmp/gpt-oss-120b 2
cmp 120b_tp1_f32 120b_tp2_f32; cmp 120b_tp1_f32 120b_tp1_bf16; cmp 120b_tp1_f32 120b_tp2_bf16; cmp 120b_tp1_bf16 120b_tp2_bf16
log total
