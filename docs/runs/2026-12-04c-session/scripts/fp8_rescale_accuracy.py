"""How far the FP8 MoE's outputs are from float64 with the accumulator rescaled each K step (`fp8_rescale`) and with
the promotion (each 128-column step's dot into fresh registers, scaled, added in float32), on the GPU.

    PYTHONPATH=src python3 scripts/probes/fp8_rescale_accuracy.py [--shapes qwen3-30b-a3b,mixtral-8x7b] [--tokens 512]

Why it matters: Hopper's FP8 tensor-core instructions add their products to the accumulator with fewer bits than
float32 keeps. The promotion hands each instruction chain one 128-column step from zero; the rescaled accumulator
hands it the whole sum, so the bits lost per step grow with the sum. This measures both against `fused_moe_ref` in
float64 (the same FP8 activations), on float32 outputs (no bf16 rounding on top), the tuned configs of the shape
with fp8_rescale off and on, over several random inputs: relative Frobenius error and the largest error relative
to the output's RMS. A probe, not a test.
"""

from __future__ import annotations

import argparse
import dataclasses

import torch


def main() -> None:
    from quickmoe.bench.moe_experts import SHAPES, make_experts
    from quickmoe.kernels import moe_configs
    from quickmoe.kernels.fused_moe import fused_moe, fused_moe_ref
    from quickmoe.kernels.routing import route_ref

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default="qwen3-30b-a3b,mixtral-8x7b")
    parser.add_argument("--tokens", default="512")
    parser.add_argument("--inputs", type=int, default=3)
    args = parser.parse_args()
    device = torch.device("cuda")
    tuned = moe_configs.moe_kernel_config
    for name in args.shapes.split(","):
        spec = SHAPES[name]
        g = torch.Generator().manual_seed(0)
        ex = make_experts(spec, "fp8", device, g)
        w1, w2, kw = ex.w1, ex.w2, ex.kwargs  # the scales, gate_up_group and activation
        for tokens in (int(t) for t in args.tokens.split(",")):
            errors = {False: [], True: []}
            for _ in range(args.inputs):
                x = torch.randn(tokens, spec.hidden, generator=g).to(device)
                weights, ids = route_ref(torch.randn(tokens, spec.experts, generator=g).to(device), spec.top_k)
                want = fused_moe_ref(x.double(), weights.double(), ids.long(), w1, None, w2, None,
                                     fp8_activations=True, **kw)
                rms = want.pow(2).mean().sqrt()
                for rescale in (False, True):
                    moe_configs.moe_kernel_config = (
                        lambda *a, r=rescale, **k: dataclasses.replace(tuned(*a, **k), fp8_rescale=r))
                    got = fused_moe(x, weights, ids, w1, None, w2, None, **kw).double()
                    errors[rescale].append(((got - want).norm() / want.norm()).item())
                    errors[rescale].append(((got - want).abs().max() / rms).item())
            moe_configs.moe_kernel_config = tuned
            for rescale, e in errors.items():
                rel, peak = e[0::2], e[1::2]
                print(f"{name} T={tokens} fp8_rescale={int(rescale)}: relative error "
                      f"{', '.join(f'{v:.3e}' for v in rel)}; largest error / RMS "
                      f"{', '.join(f'{v:.3e}' for v in peak)}", flush=True)


if __name__ == "__main__":
    main()
