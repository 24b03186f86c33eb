import sys, time, gc, torch
from quickmoe.config import ModelConfig
from quickmoe.models.registry import build_model
gc.disable()
cfg = ModelConfig.from_dir(sys.argv[1])
t0 = time.perf_counter(); m = build_model(cfg, dtype=torch.bfloat16, device="meta"); print(f"{(time.perf_counter()-t0)*1e3:.1f}")
