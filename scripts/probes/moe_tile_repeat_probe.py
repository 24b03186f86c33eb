"""Does a MoE GEMM tile give NaN / inf now and then? Each GEMM alone, many times, on fresh inputs, on the GPU.

PYTHONPATH=src python3 scripts/probes/moe_tile_repeat_probe.py --shape gpt-oss-20b --format mxfp4 --tokens 1024 \
    [--runs 20] [--variants shipped,8warps,plain] [--device cpu]

The 2026-11-29 tenth session found Qwen3-30B-A3B NVFP4's T = 8,192 tile (128 rows, transposed, 4 warps) giving NaN
or inf in a few outputs in some runs and the right result in others (`moe_configs.nvfp4_tile_unreliable`), which
single-run tests and the tuner's one check did not catch. gpt-oss-20b's MXFP4 key 1,024 compiles to the same loop.
For each variant of the shipped configs (`shipped`; `8warps`: both GEMMs on 8 warps; `plain`: the plain orientation)
this runs GEMM 1 and GEMM 2 `--runs` times, each run on new random activations and routing (`tune_moe.make_inputs`
with another seed), against the fallback config on the same inputs (tiles change no sum's terms, so the relative
error is float32 rounding), and prints per GEMM how many runs had NaN or inf, and the largest relative error among
the runs without. A probe, not a test: a run of zeros found proves nothing, any non-zero count is a finding.
`--device cpu` runs it in Triton's interpreter (TRITON_INTERPRET=1, the fallback configs; a tiny shape), to check
the probe itself.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: tune_moe's inputs, runs and error

import tune_moe  # noqa: E402

from quickmoe.bench.moe_experts import SHAPES, make_experts  # noqa: E402
from quickmoe.kernels import moe_configs  # noqa: E402
from quickmoe.kernels.moe_align import moe_align  # noqa: E402

VARIANTS = ("shipped", "8warps", "plain")


def variant(config: moe_configs.MoEKernelConfig, name: str) -> moe_configs.MoEKernelConfig:
    """The shipped config, or it on 8 warps, or it in the plain orientation."""
    if name == "8warps":
        return dataclasses.replace(config, num_warps=8)
    if name == "plain":
        return dataclasses.replace(config, swap_ab=False)
    return config


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", default="gpt-oss-20b", choices=sorted(SHAPES))
    parser.add_argument("--format", default=None, help="the experts' weight format (default: the shape's first)")
    parser.add_argument("--tokens", type=int, default=1024)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--variants", default=",".join(VARIANTS), help=f"comma list among {', '.join(VARIANTS)}")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    args = parser.parse_args()
    names = args.variants.split(",")
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("moe_tile_repeat_probe.py: needs a CUDA device (or --device cpu with TRITON_INTERPRET=1)")
    if args.runs < 1 or args.tokens < 1 or any(n not in VARIANTS for n in names):
        sys.exit(f"moe_tile_repeat_probe.py: --runs and --tokens >= 1, --variants among {VARIANTS} (got {args})")
    spec = SHAPES[args.shape]
    fmt = args.format or spec.formats[0]
    device = torch.device(args.device)
    ex = make_experts(spec, fmt, device, torch.Generator().manual_seed(0))
    weights = "dense" if fmt == "bf16" else fmt
    name = torch.cuda.get_device_name() if args.device == "cuda" else "cpu"
    shipped = (moe_configs.moe_kernel_config(spec.experts, 2 * spec.inter, spec.hidden, weights, name, args.tokens,
                                             proj="gate_up"),
               moe_configs.moe_kernel_config(spec.experts, spec.hidden, spec.inter, weights, name, args.tokens,
                                             proj="down"))
    fallback = moe_configs._fallback(args.tokens)
    print(f"{args.shape} {fmt} T={args.tokens} on {name}: shipped GEMM 1 {shipped[0]}, GEMM 2 {shipped[1]}")
    bad = {(n, gemm): 0 for n in names for gemm in (1, 2)}
    worst = {(n, gemm): 0.0 for n in names for gemm in (1, 2)}
    for run in range(args.runs):
        inputs = tune_moe.make_inputs(ex, spec.top_k, args.tokens, torch.Generator().manual_seed(1000 + run))
        ids = [i for _, i in inputs[1]]
        ref = tune_moe.gemm_runs(ex, spec.top_k, inputs, [moe_align(i, spec.experts, fallback.block_m) for i in ids])
        want = ref[0](0, fallback), ref[1](0, fallback)
        for n in names:
            c1, c2 = variant(shipped[0], n), variant(shipped[1], n)
            runs = tune_moe.gemm_runs(ex, spec.top_k, inputs, [moe_align(i, spec.experts, c1.block_m) for i in ids])
            for gemm, config in ((1, c1), (2, c2)):
                got = runs[gemm - 1](0, config)
                if not torch.isfinite(got).all():
                    bad[n, gemm] += 1
                    print(f"  run {run} {n} GEMM {gemm}: {int((~torch.isfinite(got)).sum())} NaN / inf outputs")
                else:
                    worst[n, gemm] = max(worst[n, gemm], tune_moe.rel_err(got, want[gemm - 1]))
    for n in names:
        print(f"{n}: GEMM 1 {bad[n, 1]} of {args.runs} runs with NaN / inf (largest error otherwise "
              f"{worst[n, 1]:.3g}), GEMM 2 {bad[n, 2]} of {args.runs} ({worst[n, 2]:.3g})")


if __name__ == "__main__":
    main()
