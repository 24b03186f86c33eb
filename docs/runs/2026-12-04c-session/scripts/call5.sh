#!/bin/bash
# Call 5 (2026-12-04 third session, issue 18): Qwen3-30B-A3B bf16's prefill keys on the H200 (docs/acceptance.md:
# never tuned; keys 1,024 and 1,025 serve T = 65-8,192 beside key 65), then the model against .ab/main (HEAD).
# Prediction: the tuner's winners 0-10% faster than the pairs in use alone at T = 1,024-8,192 (the H200's other
# bf16 files gained 0-4% at their prefill keys); `bench generate` 256 x 1000 -> 500 (mixed steps of 8,192-token
# chunks) -0 to -3% of the mixed steps' GPU time; the decode steps unchanged.
PRESET=qwen3-30b-a3b FMT=bf16 LAYERS=16 TOKENS=1024,2048,4096,8192 PROMPTS="256" ROUNDS_S=380 \
  bash scripts/device/moe_keys.sh
