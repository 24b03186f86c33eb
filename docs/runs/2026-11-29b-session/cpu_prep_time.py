import sys, time, gc, statistics as st, torch
from quickmoe.config import ModelConfig
from quickmoe.models.registry import build_model
from quickmoe.checkpoint.reader import CheckpointReader
from quickmoe.checkpoint.dtype_adoption import adopt_checkpoint_dtypes
from quickmoe.checkpoint.bindings import checkpoint_bindings
from quickmoe.checkpoint.narrow import rank_view
from quickmoe.checkpoint.chunk_plan import plan_chunks
from quickmoe.checkpoint.sink import ParameterSink
d = sys.argv[1]
gc.disable()
res = {}
for i in range(4):
    t = {}
    t0 = time.perf_counter(); cfg = ModelConfig.from_dir(d); reader = CheckpointReader(d); t['config'] = time.perf_counter() - t0
    t0 = time.perf_counter(); m = build_model(cfg, dtype=torch.bfloat16, device="meta"); t['build(meta)'] = time.perf_counter() - t0
    t0 = time.perf_counter(); adopt_checkpoint_dtypes(m, reader); t['adopt'] = time.perf_counter() - t0
    t0 = time.perf_counter(); b = checkpoint_bindings(m); t['bindings'] = time.perf_counter() - t0
    t0 = time.perf_counter(); reader.validate({n: x.spec for n, x in b.items()}); t['validate'] = time.perf_counter() - t0
    t0 = time.perf_counter(); v = rank_view(b, reader.entries, reader.entries_by_file); t['rank_view'] = time.perf_counter() - t0
    t0 = time.perf_counter(); chunks = plan_chunks(v.entries_by_file, 16 << 20, v.names); t['plan'] = time.perf_counter() - t0
    t0 = time.perf_counter(); s = ParameterSink(v.bindings, torch.device("cpu"), chunks); t['sink'] = time.perf_counter() - t0
    if i:
        for k, x in t.items(): res.setdefault(k, []).append(x)
    del m, b, v, chunks, s; gc.collect()
tot = 0
for k, x in res.items():
    print(f"{k:12s} {st.median(x)*1e3:7.1f} ms  ({min(x)*1e3:.1f}-{max(x)*1e3:.1f})"); tot += st.median(x)
print(f"total {tot*1e3:.1f} ms")
