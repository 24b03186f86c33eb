"""A/B: the paged attention tile's element offsets in int64 (as before) against int32 (kv_offsets_64 False below
2^31 elements), in one process, in turns, 2 rounds (order swapped), bench attention's timing (CUDA graphs, rotating
sets); outputs checked bit-equal first."""
import json, statistics, sys
import torch
import quickmoe.kernels.decode_attention as da
import quickmoe.kernels.prefill_attention as pa
from quickmoe.bench.attention import bench_decode, bench_prefill, _paged_set, _randn
from quickmoe.kernels.paged_kv_tile import kv_offsets_64

dev = torch.device("cuda")
def force(v):
    f = (lambda k: True) if v == "int64" else kv_offsets_64
    da.kv_offsets_64 = f; pa.kv_offsets_64 = f

# bits: decode and prefill, both variants
g = torch.Generator(dev).manual_seed(5)
for b, c, w in [(1, 1024, 0), (8, 4096, 0), (64, 1024, 128), (256, 1024, 0)]:
    s = _paged_set(b, c, w, g, dev, head_major=True)
    q = _randn(b, 64, 64, g=g, device=dev); lens = torch.full((b,), c, dtype=torch.long, device=dev)
    outs = []
    for v in ("int64", "int32"):
        force(v); outs.append(da.paged_decode_attention(q, s["k"], s["v"], s["tables"], lens, s["sinks"], w, 0.125))
    print(f"bits decode {b}x{c} w{w}: equal={torch.equal(outs[0], outs[1])}", flush=True)
s = _paged_set(2, 2048, 0, g, dev, head_major=True)
q = _randn(2 * 2048, 64, 64, g=g, device=dev); cu = torch.tensor([0, 2048, 4096], dtype=torch.int32, device=dev)
lens = torch.full((2,), 2048, dtype=torch.long, device=dev)
outs = []
for v in ("int64", "int32"):
    force(v); outs.append(pa.paged_prefill_attention(q, s["k"], s["v"], s["tables"], cu, lens, s["sinks"], 0, 0.125,
                                                     max_query_len=2048))
print(f"bits prefill 2x2048: equal={torch.equal(outs[0], outs[1])}", flush=True)
del s, q, outs

points = [(b, c, 0) for c in (1024, 4096, 16384) for b in (1, 8, 64, 256)] + [(b, 1024, 128) for b in (1, 8, 64, 256)]
prefill = [(1, 1024), (4, 2048), (1, 8192)]
res = {}
for rnd, order in enumerate((("int64", "int32"), ("int32", "int64"))):
    for v in order:
        force(v)
        for p in points:
            r = bench_decode(*p, reps=20, device=dev, head_major=True)
            res.setdefault((v, "d") + p, []).append(r["quickmoe_s"]); res.setdefault(("sdpa", "d") + p, []).append(r["sdpa_s"])
        for p in prefill:
            r = bench_prefill(*p, 0, reps=20, device=dev, head_major=True)
            res.setdefault((v, "p") + p, []).append(r["quickmoe_s"])
        print(f"round {rnd} {v} done", flush=True)
rows = []
print(f"{'point':>18} {'int64 us':>9} {'int32 us':>9} {'int32/int64':>11} {'SDPA us':>8} {'SDPA/int32':>10}")
for p in points:
    a = statistics.median(res[("int64", "d") + p]) * 1e6; b = statistics.median(res[("int32", "d") + p]) * 1e6
    sd = statistics.median(res[("sdpa", "d") + p]) * 1e6
    rows.append(dict(point=p, int64=res[("int64", "d") + p], int32=res[("int32", "d") + p], sdpa=res[("sdpa", "d") + p]))
    print(f"{'%dx%d w%d' % p:>18} {a:9.2f} {b:9.2f} {b / a:11.3f} {sd:8.2f} {sd / b:10.3f}")
for p in prefill:
    a = statistics.median(res[("int64", "p") + p]) * 1e6; b = statistics.median(res[("int32", "p") + p]) * 1e6
    rows.append(dict(prefill=p, int64=res[("int64", "p") + p], int32=res[("int32", "p") + p]))
    print(f"{'prefill %dx%d' % p:>18} {a:9.2f} {b:9.2f} {b / a:11.3f}")
json.dump(rows, open(sys.argv[1], "w"), indent=1)
