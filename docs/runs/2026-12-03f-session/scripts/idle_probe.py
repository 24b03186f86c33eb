"""The MoE warm-up ladder's idle work of one engine, timed: LLM(CKPT) on CUDA with the serving defaults, then the
ladder's pieces one after the other (runner.warm_next_moe_kernels), then steps whose T reads a key between the
powers of two, timed (a compile shows as a slow step). Prints one JSON line."""
import json
import random
import sys
import time

import torch

from quickmoe.engine.sampling_params import SamplingParams
from quickmoe.llm import LLM

t0 = time.perf_counter()
llm = LLM(sys.argv[1], device="cuda")
ready = time.perf_counter() - t0
ladder = list(llm.runner.moe_warmup.pending)
t0 = time.perf_counter()
pieces = 0
while llm.runner.warm_next_moe_kernels():
    pieces += 1
torch.cuda.synchronize()
idle = time.perf_counter() - t0
rng = random.Random(3)
params = SamplingParams(max_tokens=1, temperature=0, ignore_eos=True)
steps = {}
for length in [int(x) for x in sys.argv[2].split(",")]:
    prompt = [rng.randrange(1000, 30000) for _ in range(length)]
    t0 = time.perf_counter()
    llm.generate([prompt], params)
    steps[length] = round(time.perf_counter() - t0, 3)
print(json.dumps({"ready_s": round(ready, 2), "ladder": ladder, "pieces": pieces, "idle_s": round(idle, 2),
                  "prefill_s": steps}))
