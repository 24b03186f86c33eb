"""One-off: Qwen3 bf16's new H200 entries (keys 32, 48, 64) run in the Triton interpreter at real size against the
float64 reference (fused_moe's device name and arch patched to the H200's)."""
import sys, time
import torch
from quickmoe.kernels import fused_moe as fm
from quickmoe.kernels.moe_configs import moe_kernel_config
from quickmoe.bench.moe_experts import SHAPES, make_experts
from quickmoe.kernels.routing import route_ref

fm._device_name = lambda device: "NVIDIA H200"
fm.device_arch = lambda device: "sm_90"
spec = SHAPES["qwen3-30b-a3b"]
for t in [int(x) for x in sys.argv[1].split(",")]:
    print(t, moe_kernel_config(128, 1536, 2048, "dense", "NVIDIA H200", t, arch="sm_90", proj="gate_up"))
    print(t, moe_kernel_config(128, 2048, 768, "dense", "NVIDIA H200", t, arch="sm_90", proj="down"))
    g = torch.Generator().manual_seed(t)
    ex = make_experts(spec, "bf16", torch.device("cpu"), g)
    x = torch.randn(t, spec.hidden, generator=g).to(torch.bfloat16)
    w, ids = route_ref(torch.randn(t, spec.experts, generator=g), spec.top_k, scoring="softmax_topk", renormalize=True)
    t0 = time.time()
    got = fm.fused_moe(x, w, ids, ex.w1, None, ex.w2, None, **ex.kwargs)
    want = fm.fused_moe_ref(x.double(), w.double(), ids.long(), ex.w1, None, ex.w2, None, **ex.kwargs)
    print(t, "rel err", ((got.double() - want).norm() / want.norm()).item(), f"{time.time() - t0:.0f} s", flush=True)
