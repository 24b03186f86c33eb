"""Where the 20b's build phase (0.23 s on the H200) goes: build_model on CUDA alone, profiled; then the same
parameter sizes allocated one by one and as one block, fresh after empty_cache."""
import cProfile, pstats, sys, time
import torch
from quickmoe.config import ModelConfig
from quickmoe.models.registry import build_model

torch.cuda.init(); torch.empty(1, device="cuda"); torch.cuda.synchronize()
cfg = ModelConfig.from_dir(sys.argv[1])
t = time.perf_counter(); build_model(cfg, dtype=torch.bfloat16, device="meta"); print(f"meta build (first): {time.perf_counter()-t:.3f} s")
t = time.perf_counter(); build_model(cfg, dtype=torch.bfloat16, device="meta"); print(f"meta build (again): {time.perf_counter()-t:.3f} s")
pr = cProfile.Profile()
t = time.perf_counter(); pr.enable()
m = build_model(cfg, dtype=torch.bfloat16, device="cuda"); torch.cuda.synchronize()
pr.disable(); print(f"cuda build (first): {time.perf_counter()-t:.3f} s")
tensors = list(m.parameters()) + list(m.buffers())
sizes = [x.numel() * x.element_size() for x in tensors]
print(f"{len(sizes)} tensors, {sum(sizes)/1e9:.2f} GB, {sum(s >= 1<<20 for s in sizes)} of >= 1 MiB")
del m, tensors; torch.cuda.synchronize(); torch.cuda.empty_cache()
t = time.perf_counter(); m = build_model(cfg, dtype=torch.bfloat16, device="cuda"); torch.cuda.synchronize()
print(f"cuda build (again, after empty_cache): {time.perf_counter()-t:.3f} s")
del m; torch.cuda.synchronize(); torch.cuda.empty_cache()
t = time.perf_counter(); ts = [torch.empty(s, dtype=torch.uint8, device="cuda") for s in sizes]; torch.cuda.synchronize()
print(f"torch.empty per tensor: {time.perf_counter()-t:.3f} s")
del ts; torch.cuda.synchronize(); torch.cuda.empty_cache()
t = time.perf_counter(); one = torch.empty(sum(sizes), dtype=torch.uint8, device="cuda"); torch.cuda.synchronize()
print(f"torch.empty as one block: {time.perf_counter()-t:.3f} s")
pstats.Stats(pr).sort_stats("cumulative").print_stats(30)
