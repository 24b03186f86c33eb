"""Ad-hoc: the rejected H200 FP8 decode configs inside fused_moe (T = 16 failed there, alone they pass)."""
import json, os, sys
from pathlib import Path
import torch
from quickmoe.bench.moe_experts import SHAPES, make_experts
from quickmoe.kernels import moe_configs, pdl
from quickmoe.kernels.moe_configs import MoEKernelConfig
from quickmoe.kernels.fused_moe import fused_moe, fused_moe_ref
from quickmoe.kernels.routing import route_ref
from quickmoe.kernels.fp8_quant import quantize_fp8_per_token_group
from quickmoe.kernels.moe_align import moe_align
from quickmoe.kernels.moe_gemm import moe_combine, moe_gemm1_swiglu, moe_gemm2

REJ = Path("docs/runs/2026-11-28e-session/configs")
orig = moe_configs.moe_kernel_config
tables = {}
for f in REJ.glob("*_fp8_NVIDIA_H200.json"):
    e, n, k = (int(p[1:]) for p in f.name.split("_")[:3])
    tables[(e, n, k)] = {int(t): MoEKernelConfig(**c) for t, c in json.loads(f.read_text()).items()}
MODE = {"g1": False, "g2": False}

def patched(num_experts, n, k, weights, device_name, tokens, config_dir=moe_configs.CONFIG_DIR, arch=None):
    t = tables.get((num_experts, n, k))
    is_g1 = (num_experts, n, k) in ((128, 1536, 2048), (8, 28672, 4096))
    if t is not None and MODE["g1" if is_g1 else "g2"]:
        return t[min(t, key=lambda x: (abs(x - tokens), x))]
    return orig(num_experts, n, k, weights, device_name, tokens, config_dir, arch)
moe_configs.moe_kernel_config = patched

def staged(x, w, ids, ex, kw):
    T, k = ids.shape
    c1 = moe_configs.moe_kernel_config(ex.w1.shape[0], ex.w1.shape[1], ex.w1.shape[2], "fp8", torch.cuda.get_device_name(), T)
    c2 = moe_configs.moe_kernel_config(ex.w2.shape[0], ex.w2.shape[1], ex.w2.shape[2], "fp8", torch.cuda.get_device_name(), T)
    align = moe_align(ids, ex.w1.shape[0], c1.block_m); torch.cuda.synchronize()
    a, s = quantize_fp8_per_token_group(x); torch.cuda.synchronize()
    inter = moe_gemm1_swiglu(a, align, k, ex.w1, None, kw.get("w1_scales"), kw.get("gate_up_group", 64), 7.0, 1.702,
                             act_scales=s, out_dtype=x.dtype, config=c1, activation=kw.get("activation", "silu"),
                             w1_row_scale=kw.get("w1_row_scale")); torch.cuda.synchronize()
    a, s = quantize_fp8_per_token_group(inter); torch.cuda.synchronize()
    out = moe_gemm2(a, align, w, ex.w2, None, kw.get("w2_scales"), act_scales=s, out_dtype=x.dtype, config=c2,
                    w2_row_scale=kw.get("w2_row_scale")); torch.cuda.synchronize()
    return moe_combine(out, k)

dev = torch.device("cuda")
print("kwargs keys seen:", flush=True)
for shape in ("qwen3-30b-a3b", "mixtral-8x7b"):
    spec = SHAPES[shape]
    g = torch.Generator().manual_seed(16)
    ex = make_experts(spec, "fp8", dev, g)
    print(shape, sorted(ex.kwargs), flush=True)
    for T in (2, 4, 8, 16, 32):
        g = torch.Generator().manual_seed(T)
        x = torch.randn(T, spec.hidden, generator=g).to(torch.bfloat16).to(dev)
        w, ids = route_ref(torch.randn(T, spec.experts, generator=g).to(dev), spec.top_k, scoring="softmax_topk", renormalize=True)
        want = fused_moe_ref(x.double(), w.double(), ids.long(), ex.w1, None, ex.w2, None, fp8_activations=True, **ex.kwargs)
        for mode in ("none", "g1", "g2", "both"):
            MODE["g1"] = mode in ("g1", "both"); MODE["g2"] = mode in ("g2", "both")
            row = []
            for p in ("1", "0"):
                os.environ["QUICKMOE_PDL"] = p; pdl.pdl_enabled.cache_clear()
                errs = []
                for _ in range(2):
                    got = fused_moe(x, w, ids, ex.w1, None, ex.w2, None, **ex.kwargs)
                    errs.append(float((got.double() - want).norm() / want.norm()))
                row.append(f"pdl{p} " + "/".join(f"{e:.3g}" for e in errs))
            os.environ["QUICKMOE_PDL"] = "1"; pdl.pdl_enabled.cache_clear()
            try:
                st = staged(x, w, ids, ex, ex.kwargs)
                row.append(f"staged {float((st.double() - want).norm() / want.norm()):.3g}")
            except Exception as exc:
                row.append(f"staged error {exc!r}"[:200])
            print(f"{shape} T={T} {mode}: " + "  ".join(row), flush=True)
