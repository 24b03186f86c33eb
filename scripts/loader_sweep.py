"""Sweep the streaming loader's settings on a checkpoint (warm page cache): GB/s per (threads, chunk, buffers).
python3 scripts/loader_sweep.py DIR"""

import gc
import itertools
import sys
import time

import torch

from quickmoe.checkpoint.loader import load_weights
from quickmoe.checkpoint.reader import CheckpointReader
from quickmoe.config import ModelConfig
from quickmoe.models.registry import build_model

model_dir = sys.argv[1]
config = ModelConfig.from_dir(model_dir)
reader = CheckpointReader(model_dir)
model = build_model(config, dtype=torch.bfloat16, device="cuda")
rows = []
for threads, chunk_mb, buffers in itertools.chain([(4, 32, 8)], itertools.product((8, 16), (32, 64, 128), (8, 16))):
    if buffers * chunk_mb > 2048:
        continue
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    stats = load_weights(model, reader, num_threads=threads, chunk_bytes=chunk_mb << 20, num_buffers=buffers)
    torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    rows.append((threads, chunk_mb, buffers, stats.num_bytes / dt / 1e9, stats.wait_seconds, stats.deliver_seconds))
    print(f"threads={threads:2d} chunk={chunk_mb:4d}MiB buffers={buffers:2d}: {rows[-1][3]:6.1f} GB/s "
          f"(wait {stats.wait_seconds:.2f}s deliver {stats.deliver_seconds:.2f}s setup {stats.setup_seconds:.2f}s)",
          flush=True)
    gc.collect()
best = max(rows, key=lambda r: r[3])
print(f"best: threads={best[0]} chunk={best[1]}MiB buffers={best[2]}: {best[3]:.1f} GB/s")
