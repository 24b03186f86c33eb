"""The HTTP frontend's start-up heap (what `_frontend_main` imports, and the embedded model's tokenizer): tracked
objects and a full collector pass before and after gc.freeze(). Development machine, CPU."""
import gc
import time
from pathlib import Path

import quickmoe
from quickmoe.server.app import create_app  # noqa: F401  (the frontend's imports)
from quickmoe.server.serve import run_server  # noqa: F401
from quickmoe.tokenizer import load_tokenizer

tok = load_tokenizer(Path(quickmoe.__file__).parent / "checkpoint/embedded")
tok.encode("")
gc.collect()
times = []
for _ in range(5):
    t0 = time.perf_counter()
    gc.collect()
    times.append(time.perf_counter() - t0)
print(f"tracked {len(gc.get_objects())}, full pass {min(times) * 1e3:.1f}-{max(times) * 1e3:.1f} ms")
gc.freeze()
t0 = time.perf_counter()
gc.collect()
print(f"frozen: full pass {(time.perf_counter() - t0) * 1e3:.2f} ms")
