"""NaN / bits probe: Qwen3 (and Mixtral) NVFP4 GEMM 1 and GEMM 2 alone with chosen configs, against the fallback
config's output (tune_moe's check); prints NaN counts and relative errors; saves outputs for a cross-tree compare."""
import dataclasses, sys, torch
sys.path.insert(0, sys.argv[1] + "/scripts")
import tune_moe as tm
from quickmoe.bench.moe_experts import SHAPES, make_experts
from quickmoe.kernels import moe_configs
from quickmoe.kernels.moe_align import moe_align
from quickmoe.kernels.moe_configs import config_file_name
saved = {}
for shape_name, tokens in (("qwen3-30b-a3b", 8192), ("mixtral-8x7b", 2048)):
    spec = SHAPES[shape_name]
    g = torch.Generator().manual_seed(tokens)
    ex = make_experts(spec, "nvfp4", torch.device("cuda"), g)
    inputs = tm.make_inputs(ex, spec.top_k, tokens, g)
    ids_sets = [ids for _, ids in inputs[1]]
    fb = moe_configs._fallback(tokens)
    f1, f2 = tm.gemm_runs(ex, spec.top_k, inputs, [moe_align(i, spec.experts, fb.block_m) for i in ids_sets])
    r1, r2 = f1(0, fb).clone(), f2(0, fb).clone()
    name = torch.cuda.get_device_name()
    c1 = moe_configs.moe_kernel_config(spec.experts, 2 * spec.inter, spec.hidden, "nvfp4", name, tokens)
    c2 = moe_configs.moe_kernel_config(spec.experts, spec.hidden, spec.inter, "nvfp4", name, tokens)
    variants = [("shipped", c1, c2), ("8warps", dataclasses.replace(c1, num_warps=8), dataclasses.replace(c2, num_warps=8)),
                ("noswap", dataclasses.replace(c1, swap_ab=False), dataclasses.replace(c2, swap_ab=False))]
    print(f"{shape_name} T={tokens} fallback {fb}: nan {int(r1.isnan().sum())} / {int(r2.isnan().sum())}")
    for label, a, b in variants:
        g1, g2 = tm.gemm_runs(ex, spec.top_k, inputs, [moe_align(i, spec.experts, a.block_m) for i in ids_sets])
        o1, o2 = g1(0, a), g2(0, b)
        saved[f"{shape_name}:{tokens}:{label}"] = (o1.cpu(), o2.cpu())
        print(f"  {label}: gemm1 nan {int(o1.isnan().sum())} rel {tm.rel_err(o1, r1):.3g} | gemm2 nan "
              f"{int(o2.isnan().sum())} rel {tm.rel_err(o2, r2):.3g}   ({a.block_m},{a.num_warps}w,swap {a.swap_ab})")
    del ex, inputs
torch.save(saved, sys.argv[2])
