"""Decode attention launch configs on this GPU, in turns (2 rounds, order reversed in the second), CUDA graphs over
rotating head-major input sets as `bench attention` times them: the committed rule (decode_launch_config) against
fixed deeper-pipeline configs at every batch size of 2-128; bits checked equal first; SDPA beside."""
import json, statistics, sys
import torch
from quickmoe.bench.attention import _paged_set, time_in_graph, ROTATE_BYTES
from quickmoe.kernels.decode_attention import DecodeLaunchConfig, decode_launch_config, paged_decode_attention

dev = torch.device("cuda")
HEADS, KV, DIM = 64, 8, 64
CANDS = {"rule": None, "w2s4k": DecodeLaunchConfig(64, 2, 4, True), "w2s5k": DecodeLaunchConfig(64, 2, 5, True), "w2s6k": DecodeLaunchConfig(64, 2, 6, True),
         "w2s7k": DecodeLaunchConfig(64, 2, 7, True), "w4s5k": DecodeLaunchConfig(64, 4, 5, True)}
def _probe_ok(cfg):
    s = dict(**_paged_set(4, 256, 0, torch.Generator(dev).manual_seed(0), dev, head_major=True),
             q=torch.randn(4, HEADS, DIM, device=dev, dtype=torch.bfloat16), lens=torch.full((4,), 256, device=dev))
    try:
        paged_decode_attention(s["q"], s["k"], s["v"], s["tables"], s["lens"], s["sinks"], 0, 0.125, config=cfg)
        return True
    except Exception as exc:  # e.g. triton's OutOfResources for too many stages
        print(f"dropped {cfg}: {type(exc).__name__}: {str(exc)[:120]}", flush=True)
        return False
CANDS = {k: v for k, v in CANDS.items() if v is None or _probe_ok(v)}
points = [(b, c) for c in (1024, 4096, 16384) for b in (2, 4, 8, 16, 32, 64, 128) if b * c <= 64 * 16384]
g = torch.Generator(dev).manual_seed(3)
res = {}
bits = {}
for rnd in range(2):
    names = list(CANDS) if rnd == 0 else list(reversed(CANDS))
    for b, c in points:
        kv_bytes = 2 * b * c * KV * DIM * 2
        n = max(2, min(16, -(-ROTATE_BYTES // kv_bytes)))
        sets = [dict(**_paged_set(b, c, 0, g, dev, head_major=True),
                     q=torch.randn(b, HEADS, DIM, generator=g, device=dev, dtype=torch.bfloat16),
                     lens=torch.full((b,), c, dtype=torch.long, device=dev)) for _ in range(n)]
        def run(cfg, i):
            s = sets[i]
            cfg = cfg or decode_launch_config(b, KV, DIM, 0)
            return paged_decode_attention(s["q"], s["k"], s["v"], s["tables"], s["lens"], s["sinks"], 0, 0.125, config=cfg)
        if rnd == 0:
            outs = {k: run(CANDS[k], 0) for k in CANDS}
            for k in CANDS:
                diff = (outs[k].float() - outs["rule"].float()).abs().max().item()
                same = torch.equal(outs[k], outs["rule"])
                bits.setdefault(k, []).append((b, c, same, diff))
                if not same:
                    print(f"bits differ: {k} against the rule at {b} x {c}: max abs {diff:.3g}", flush=True)
        for k in names:
            res.setdefault((k, b, c), []).append(time_in_graph(lambda i, k=k: run(CANDS[k], i), n, 20) * 1e6)
        if rnd == 0:
            sets.clear()
            cont = [(torch.randn(b, HEADS, 1, DIM, generator=g, device=dev, dtype=torch.bfloat16),
                     torch.randn(b, KV, c, DIM, generator=g, device=dev, dtype=torch.bfloat16),
                     torch.randn(b, KV, c, DIM, generator=g, device=dev, dtype=torch.bfloat16)) for _ in range(n)]
            res[("sdpa", b, c)] = [time_in_graph(lambda i: torch.nn.functional.scaled_dot_product_attention(
                *cont[i], scale=0.125, enable_gqa=True), n, 20) * 1e6]
            del cont
        sets.clear(); torch.cuda.empty_cache()
    print(f"round {rnd} done", flush=True)
cols = list(CANDS) + ["sdpa"]
for k, v in bits.items():
    print(f"bits {k}: equal to the rule at {sum(x[2] for x in v)} of {len(v)} points")
print("| batch x context | rule config | " + " | ".join(cols) + " | SDPA / rule | SDPA / w2s6k |")
print("|" + "---|" * (len(cols) + 4))
rows = []
for b, c in points:
    med = {k: statistics.median(res[(k, b, c)]) for k in cols}
    rc = decode_launch_config(b, KV, DIM, 0)
    rows.append(dict(batch=b, context=c, **{k: res[(k, b, c)] for k in cols}))
    print(f"| {b} x {c} | w{rc.num_warps}s{rc.num_stages}{'k' if rc.kv_fastest else ''} | "
          + " | ".join(f"{med[k]:.2f}" for k in cols) + f" | {med['sdpa'] / med['rule']:.3f} | {med['sdpa'] / med['w2s6k']:.3f} |")
json.dump(rows, open(sys.argv[1], "w"), indent=1)
