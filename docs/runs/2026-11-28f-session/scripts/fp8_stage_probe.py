"""Ad-hoc: which stage of fused_moe goes wrong for the FP8 inputs that fail on the GPU (any config)."""
import sys
import torch
from quickmoe.bench.moe_experts import SHAPES, make_experts, GROUP
from quickmoe.kernels import fused_moe as fm
from quickmoe.kernels.routing import route_ref
from quickmoe.kernels.moe_align import moe_align, moe_align_ref
from quickmoe.kernels.moe_configs import moe_kernel_config
from quickmoe.kernels.fp8_quant import quantize_fp8_per_token_group, quantize_fp8_per_token_group_ref
from quickmoe.kernels.moe_gemm import moe_gemm1_swiglu, moe_gemm2, moe_combine
from quickmoe.layouts.mxfp4_moe import split_gate_up

dev = torch.device("cuda")
for shape, Ts in (("mixtral-8x7b", (4, 8, 16)), ("qwen3-30b-a3b", (8, 16, 32))):
    spec = SHAPES[shape]
    g = torch.Generator().manual_seed(16)
    ex = make_experts(spec, "fp8", dev, g)
    kw = ex.kwargs
    W1 = {}; W2 = {}
    for T in Ts:
        g = torch.Generator().manual_seed(T)
        x = torch.randn(T, spec.hidden, generator=g).to(torch.bfloat16).to(dev)
        w, ids = route_ref(torch.randn(T, spec.experts, generator=g).to(dev), spec.top_k, scoring="softmax_topk", renormalize=True)
        k = spec.top_k; A = T * k
        c1 = moe_kernel_config(ex.w1.shape[0], ex.w1.shape[1], ex.w1.shape[2], "fp8", torch.cuda.get_device_name(), T, arch="sm_90")
        c2 = moe_kernel_config(ex.w2.shape[0], ex.w2.shape[1], ex.w2.shape[2], "fp8", torch.cuda.get_device_name(), T, arch="sm_90")
        align = moe_align(ids, spec.experts, c1.block_m)
        ref = moe_align_ref(ids.cpu(), spec.experts, c1.block_m)
        n = int(ref.num_padded.reshape(-1)[0])
        same_align = torch.equal(align.sorted_ids.cpu()[:n], ref.sorted_ids[:n]) and torch.equal(align.block_expert.cpu()[: n // c1.block_m], ref.block_expert[: n // c1.block_m])
        q, s = quantize_fp8_per_token_group(x)
        inter = moe_gemm1_swiglu(q, align, k, ex.w1, None, kw["w1_scales"], GROUP, 7.0, 1.702, act_scales=s,
                                 out_dtype=torch.bfloat16, config=c1, activation="silu")
        xq = fm._through_fp8_groups(x.double())
        bad1 = []
        inter_ref = torch.empty(A, spec.inter, dtype=torch.float64, device=dev)
        for a in range(A):
            t, e = a // k, int(ids.reshape(-1)[a])
            if e not in W1:
                W1[e] = fm._expert_weight(ex.w1, kw["w1_scales"], None, e, torch.float64)
            h = xq[t] @ W1[e].T
            gate, up = split_gate_up(h[None], GROUP)
            inter_ref[a] = (torch.nn.functional.silu(gate) * up)[0]
        err1 = (inter.double() - inter_ref).norm(dim=1) / inter_ref.norm(dim=1)
        bad1 = (err1 > 2e-2).nonzero().flatten().tolist()
        # GEMM 2 on the reference's own quantized intermediate
        q2, s2 = quantize_fp8_per_token_group(inter_ref.to(torch.bfloat16))
        out2 = moe_gemm2(q2, align, w, ex.w2, None, kw["w2_scales"], act_scales=s2, out_dtype=torch.bfloat16, config=c2)
        iq = fm._through_fp8_groups(inter_ref.to(torch.bfloat16).double())
        out2_ref = torch.empty(A, spec.hidden, dtype=torch.float64, device=dev)
        for a in range(A):
            e = int(ids.reshape(-1)[a])
            if e not in W2:
                W2[e] = fm._expert_weight(ex.w2, kw["w2_scales"], None, e, torch.float64)
            out2_ref[a] = (iq[a] @ W2[e].T) * w.reshape(-1)[a].double()
        err2 = (out2.double() - out2_ref).norm(dim=1) / out2_ref.norm(dim=1)
        bad2 = (err2 > 2e-2).nonzero().flatten().tolist()
        print(f"{shape} T={T} c1={c1.block_n},{c1.num_warps},{c1.swap_ab} c2={c2.block_n},{c2.num_warps},{c2.swap_ab} "
              f"align same {same_align}; gemm1 max row err {err1.max():.3g} bad rows {bad1[:12]}; "
              f"gemm2 max row err {err2.max():.3g} bad rows {bad2[:12]}", flush=True)
        if bad1 or bad2:
            ex_ids = ids.reshape(-1).tolist()
            print("   experts of bad gemm1 rows", [ex_ids[a] for a in bad1[:12]], "gemm2", [ex_ids[a] for a in bad2[:12]],
                  "counts", torch.bincount(ids.reshape(-1), minlength=spec.experts).tolist()[:64])
            a = (bad1 or bad2)[0]
            gotrow = (inter if bad1 else out2)[a].double(); wantrow = (inter_ref if bad1 else out2_ref)[a]
            print("   row", a, "got[:6]", gotrow[:6].tolist(), "want[:6]", wantrow[:6].tolist(), "ratio med", (gotrow / wantrow).median().item())
