# Call 4: Mixtral-8x7B bf16's keys 256, 384 and 512 on the H200 (docs/acceptance.md: the T = 256 winner of the
# 2026-12-03 seventh session, -2% alone and -0.8% of the 256-sequence step, was not taken because as key 256 it would
# serve T = 161-640; with 384 and 512 tuned beside it, each key serves its own neighbourhood). .ab/main = HEAD (7638576).
# Prediction: winners at 256-512 1-3% faster alone; the decode step at 256 sequences -0.5 to -1.5%, tok/s within 1%.
PRESET=mixtral-8x7b FMT=bf16 LAYERS=8 TOKENS=256,384,512 PROMPTS="256" ROUNDS_S=400 timeout 580 \
  bash scripts/device/moe_keys.sh
