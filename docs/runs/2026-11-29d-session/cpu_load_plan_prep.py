import sys, time, gc, statistics as st, torch
from quickmoe.config import ModelConfig
from quickmoe.models.registry import build_model
from quickmoe.checkpoint.reader import CheckpointReader
from quickmoe.checkpoint.dtype_adoption import adopt_checkpoint_dtypes
from quickmoe.checkpoint.bindings import checkpoint_bindings
from quickmoe.checkpoint.narrow import rank_view
from quickmoe.checkpoint.chunk_plan import plan_chunks
from quickmoe.checkpoint.sink import ParameterSink
from quickmoe.checkpoint.load_plan import plan_key, LoadPlan, load_plan_file
d = sys.argv[1]
gc.disable()
cfg = ModelConfig.from_dir(d)
reader = CheckpointReader(d)
m = build_model(cfg, dtype=torch.bfloat16, device="cpu")
dev = torch.device("cpu")
res = {"uncached": [], "cached": []}
for i in range(6):
    t0 = time.perf_counter()
    adopt_checkpoint_dtypes(m, reader)
    b = checkpoint_bindings(m)
    reader.validate({n: x.spec for n, x in b.items()})
    v = rank_view(b, reader.entries, reader.entries_by_file)
    chunks = plan_chunks(v.entries_by_file, 16 << 20, v.names)
    s = ParameterSink(v.bindings, dev, chunks)
    t1 = time.perf_counter()
    adopt_checkpoint_dtypes(m, reader)
    key = plan_key(m, reader, 16 << 20, dev)
    plan = LoadPlan.load(load_plan_file(key))
    assert plan is not None and plan.applies_to(m, reader)
    chunks2, routes2 = plan.chunks_and_routes(m, reader)
    s2 = ParameterSink(checkpoint_bindings(m, only=plan.delivered_names), dev, ())
    t2 = time.perf_counter()
    if i:
        res["uncached"].append(t1 - t0); res["cached"].append(t2 - t1)
    del b, v, chunks, s, chunks2, routes2, s2; gc.collect()
for k, x in res.items():
    print(f"{k:9s} {st.median(x)*1e3:7.1f} ms ({min(x)*1e3:.1f}-{max(x)*1e3:.1f}), 5 runs")
