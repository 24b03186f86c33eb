"""The register-operand GEMM 1 (`kernels/moe_gemm_register.py`) against the engine's Triton GEMM 1 on gpt-oss-20b's
layer at decode batches of 128-512 (issue 15): each checked against the torch reference, then timed in CUDA graphs
on the same random routing (4 input sets), the Triton GEMM 1 at its tuned config, the register kernel at 32 and 64
rows a tile (with its row gather, and the gather alone); the register kernel's registers.

    PYTHONPATH=src python3 scripts/probes/moe_register_probe.py [--tokens 128,256,512] [--json PATH]

A probe, not a benchmark.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", default="16,32,64,128,256,384,512,1024,2048")
    parser.add_argument("--stages", default="3")
    parser.add_argument("--json")
    parser.add_argument("--gemm2-tokens", default="128,256,512,1024",
                        help="T of the GEMM 2 comparison (the engine's Triton GEMM 2 at its tuned config on GEMM 1's "
                             "alignment, against the register-operand GEMM 2 at 64 rows a tile, uncapped and at "
                             "128 registers); empty: none")
    args = parser.parse_args()
    from quickmoe.bench.attention import time_in_graph
    from quickmoe.bench.moe_experts import GROUP, SHAPES, make_experts
    from quickmoe.kernels.fused_moe import device_arch
    from quickmoe.kernels.moe_align import moe_align
    from quickmoe.kernels.moe_configs import moe_kernel_config
    from quickmoe.kernels.moe_gemm import moe_gemm1_swiglu
    from quickmoe.kernels.moe_gather_permuted import gather_permuted_rows, gather_permuted_rows_ref
    from quickmoe.kernels.moe_gemm_register import moe_gemm1_swiglu_register, moe_gemm1_swiglu_register_ref

    device = torch.device("cuda")
    g = torch.Generator().manual_seed(0)
    spec = SHAPES["gpt-oss-20b"]
    ex = make_experts(spec, "mxfp4", device, g)
    w1, b1, s1 = ex.w1, ex.b1, ex.kwargs["w1_scales"]
    rows = []
    for tokens in [int(t) for t in args.tokens.split(",")]:
        sets = 4
        xs = [torch.randn(tokens, spec.hidden, generator=g).to(torch.bfloat16).to(device) for _ in range(sets)]
        ids = [torch.rand(tokens, spec.experts, generator=g).topk(spec.top_k, dim=1).indices.to(torch.int32)
               .to(device) for _ in range(sets)]
        config = moe_kernel_config(spec.experts, 2 * spec.inter, spec.hidden, "mxfp4",
                                   torch.cuda.get_device_name(device), tokens, arch=device_arch(device),
                                   proj="gate_up")
        aligns = {bm: [moe_align(i, spec.experts, bm) for i in ids] for bm in (config.block_m, 32, 64)}
        ref = moe_gemm1_swiglu_register_ref(xs[0], aligns[64][0], spec.top_k, w1, b1, s1, GROUP, 7.0, 1.702).float()
        scale = ref.abs().max().item()

        def err(out):
            return (out.float() - ref).abs().max().item() / scale

        for bm in (32, 64):
            got = gather_permuted_rows(xs[0], aligns[bm][0], spec.top_k)
            want = gather_permuted_rows_ref(xs[0], aligns[bm][0], spec.top_k)
            used = int(aligns[bm][0].num_padded.item())
            valid = (aligns[bm][0].sorted_ids[:used] < aligns[bm][0].num_assignments)
            bad = int((got[:used][valid] != want[:used][valid]).sum())
            print(f"T {tokens}: gather (block_m {bm}): {bad} values differ", flush=True)
        results = {}

        def triton_gemm1(i):
            return moe_gemm1_swiglu(xs[i], aligns[config.block_m][i], spec.top_k, w1, b1, s1, GROUP, 7.0, 1.702,
                                    config=config)

        label = (f"triton (block_m {config.block_m}, block_n {config.block_n}, block_k {config.block_k}, "
                 f"w{config.num_warps}, swap {int(config.swap_ab)})")
        results[label] = (err(triton_gemm1(0)), time_in_graph(triton_gemm1, sets, 16))
        variants = [(bm, stages) for bm in (32, 64) for stages in [int(s) for s in args.stages.split(",")]]
        for bm, stages in variants:
            def register(i, bm=bm, stages=stages):
                return moe_gemm1_swiglu_register(xs[i], aligns[bm][i], spec.top_k, w1, b1, s1, GROUP, 7.0, 1.702,
                                                 stages=stages)
            try:
                results[f"register operand block_m {bm} stages {stages}"] = (
                    err(register(0)), time_in_graph(register, sets, 16))
            except Exception as exc:  # noqa: BLE001 - a probe reports and goes on
                print(f"T {tokens} block_m {bm}: {type(exc).__name__}: {str(exc)[:600]}", flush=True)
        for bm in (32, 64):
            results[f"gather alone block_m {bm}"] = (0.0, time_in_graph(
                lambda i, bm=bm: gather_permuted_rows(xs[i], aligns[bm][i], spec.top_k), sets, 16))
        for label, (e, sec) in results.items():
            rows.append({"tokens": tokens, "kernel": label, "us": sec * 1e6, "max_rel_err": e})
            print(f"T {tokens:4d}  {label:70s} {sec * 1e6:8.1f} us  err {e:.2e}", flush=True)
    from quickmoe.kernels.moe_gemm_register import _gemm1_register_kernel

    for kernel in _gemm1_register_kernel.device_caches[torch.cuda.current_device()][0].values():
        print(f"register-operand kernel: {kernel.n_regs} registers, {kernel.n_spills} spilled, "
              f"{kernel.metadata.shared} bytes of shared memory", flush=True)
    rows += gemm2_rows([int(t) for t in args.gemm2_tokens.split(",")] if args.gemm2_tokens else [])
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


def gemm2_rows(token_counts: list[int]) -> list[dict]:
    """GEMM 2 alone, Triton (tuned) against the register-operand kernel, each checked against the torch reference."""
    from quickmoe.bench.attention import time_in_graph
    from quickmoe.bench.moe_experts import SHAPES, make_experts
    from quickmoe.kernels.fused_moe import device_arch
    from quickmoe.kernels.moe_align import moe_align
    from quickmoe.kernels.moe_configs import moe_kernel_config
    from quickmoe.kernels.moe_gemm import moe_gemm2
    from quickmoe.kernels.moe_gemm_register import moe_gemm2_register, moe_gemm2_register_ref

    device = torch.device("cuda")
    g = torch.Generator().manual_seed(1)
    spec = SHAPES["gpt-oss-20b"]
    ex = make_experts(spec, "mxfp4", device, g)
    w2, b2, s2 = ex.w2, ex.b2, ex.kwargs["w2_scales"]
    rows = []
    for tokens in token_counts:
        sets = 4
        inters = [torch.randn(tokens * spec.top_k, spec.inter, generator=g).to(torch.bfloat16).to(device)
                  for _ in range(sets)]
        routes = [torch.rand(tokens, spec.top_k, generator=g).to(device) for _ in range(sets)]
        ids = [torch.rand(tokens, spec.experts, generator=g).topk(spec.top_k, dim=1).indices.to(torch.int32)
               .to(device) for _ in range(sets)]
        name = torch.cuda.get_device_name(device)
        config1 = moe_kernel_config(spec.experts, 2 * spec.inter, spec.hidden, "mxfp4", name, tokens,
                                    arch=device_arch(device), proj="gate_up")
        config2 = moe_kernel_config(spec.experts, spec.hidden, spec.inter, "mxfp4", name, tokens,
                                    arch=device_arch(device), proj="down")
        aligns = {bm: [moe_align(i, spec.experts, bm) for i in ids] for bm in (config1.block_m, 64)}
        ref = moe_gemm2_register_ref(inters[0], aligns[64][0], routes[0], w2, b2, s2).float()
        scale = ref.abs().max().item()
        results = {}
        variants = [(f"triton GEMM 2 (block_m {config1.block_m}, block_n {config2.block_n}, w{config2.num_warps}, "
                     f"swap {int(config2.swap_ab)})",
                     lambda i: moe_gemm2(inters[i], aligns[config1.block_m][i], routes[i], w2, b2, s2,
                                         config=config2))]
        variants += [(f"register operand GEMM 2 block_m 64 maxnreg {cap}",
                      lambda i, cap=cap: moe_gemm2_register(inters[i], aligns[64][i], routes[i], w2, b2, s2,
                                                            maxnreg=cap)) for cap in (None, 128)]
        for label, fn in variants:
            try:
                err = (fn(0).float() - ref).abs().max().item() / scale
                results[label] = (err, time_in_graph(fn, sets, 16))
            except Exception as exc:  # noqa: BLE001 - a probe reports and goes on
                print(f"T {tokens} {label}: {type(exc).__name__}: {str(exc)[:600]}", flush=True)
        for label, (e, sec) in results.items():
            rows.append({"tokens": tokens, "kernel": label, "us": sec * 1e6, "max_rel_err": e})
            print(f"T {tokens:4d}  {label:70s} {sec * 1e6:8.1f} us  err {e:.2e}", flush=True)
    return rows


if __name__ == "__main__":
    main()
