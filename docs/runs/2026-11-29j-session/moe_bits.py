"""Save fused_moe outputs (seeded inputs) for given shape/format/T to a file: run in two trees, compare bits."""
import sys, torch
from quickmoe.bench.moe_experts import SHAPES, make_experts
from quickmoe.kernels.fused_moe import fused_moe
from quickmoe.kernels.routing import route_ref
out = {}
for item in sys.argv[2].split(","):
    shape, fmt, t = item.split(":"); t = int(t)
    spec = SHAPES[shape]
    g = torch.Generator().manual_seed(1000 + t)
    ex = make_experts(spec, fmt, torch.device("cuda"), g)
    x = torch.randn(t, spec.hidden, generator=g).to(torch.bfloat16).cuda()
    w, ids = route_ref(torch.randn(t, spec.experts, generator=g).cuda(), spec.top_k, scoring="softmax_topk",
                       renormalize=True)
    out[item] = fused_moe(x, w, ids, ex.w1, None, ex.w2, None, **ex.kwargs).cpu()
    del ex
torch.save(out, sys.argv[1])
