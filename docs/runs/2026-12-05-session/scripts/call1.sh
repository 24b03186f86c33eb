#!/bin/bash
# Call 1 (2026-12-05, nvidia-h100-x1, tree d8ba727): issue 15's figures on the H100, the first H100 run since
# 2026-11-27 (fourth session, 67795d6). Stages: `hotpath.sh generate` (256 x 1000 -> 1000, batch-1 step, host time,
# op families), `hotpath.sh attention` (decode grid and prefill points beside SDPA), then `bench moe` of gpt-oss-20b
# and -120b at T = 1-16 and 8,192 (no baselines).
# Predictions: the H100's MXFP4 files and decode attention rule are unchanged since 11-27, so the batch-1 step stays
# 2.40-2.45 ms, decode attention 64 x 4k ~97% / 1 x 1k ~14% of HBM, bench moe T = 1-16 as then (37-70% / 39-80%).
# What changed on every GPU: prompt steps in graphs up to 8,192 tokens (H200 +1-2%), the serving GC frozen
# (+0.8-1.9%), tuple prompts (+0.5%), prefill attention's 8-warp capped launch (0.43-0.90 of the time on the H200):
# 256 x 1000 -> 1000 13,900-14,400 output tok/s (11-27: 13,597), prefill attention 1 x 8192 under 2.989 ms.
source scripts/device/env.sh
base=$OUT
trap 'cd $base && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
timeout 260 bash scripts/device/hotpath.sh generate > $OUT/hotpath_generate.log 2>&1
echo "generate rc $? ($SECONDS s)"
grep -E '^quickmoe|by op family|throughput run|decode at batch 1|exposed' $OUT/bench_generate.log | cut -c1-330
timeout 200 bash scripts/device/hotpath.sh attention > $OUT/hotpath_attention.log 2>&1
echo "attention rc $? ($SECONDS s)"
grep -E "HBM|^\| *(1|64) x (1024|4096)|prefill" $OUT/bench_attention.log | head -30 | cut -c1-250
timeout 120 python3 -m quickmoe bench moe --shapes gpt-oss-20b,gpt-oss-120b --tokens 1,2,4,8,16,8192 --no-baselines \
  --json $OUT/bench_moe.json > $OUT/bench_moe.log 2>&1
echo "bench moe rc $? ($SECONDS s)"; grep -v INFO $OUT/bench_moe.log | tail -30 | cut -c1-250
