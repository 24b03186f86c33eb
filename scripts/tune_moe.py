"""Tune the MoE GEMMs' launch configs on this GPU and write them as data files into kernels/configs/.

PYTHONPATH=src python3 scripts/tune_moe.py [--shapes gpt-oss-20b,gpt-oss-120b] [--tokens 1,4,...] [--out DIR]

For each shape and token count, every candidate config runs the whole `fused_moe` (MXFP4 weights, bf16
activations, fresh random inputs, CUDA events, median of 10 after 3 warm-ups); the fastest is kept. One
file per GEMM shape is written (the same choice for both GEMMs: they share BLOCK_M through the alignment),
named by `moe_configs.config_file_name`. Start-up never tunes: it reads these files.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
from pathlib import Path

import torch
import triton

from quickmoe.bench.moe import SHAPES, _Experts
from quickmoe.kernels import moe_configs
from quickmoe.kernels.fused_moe import fused_moe
from quickmoe.kernels.moe_configs import MoEKernelConfig, config_file_name
from quickmoe.kernels.routing import route_ref

CANDIDATES = [MoEKernelConfig(block_m=m, block_n=n, block_k=k, num_warps=w, num_stages=s)
              for m, n, k, w, s in itertools.product((16, 32, 64, 128), (64, 128), (64, 128, 256), (4, 8), (3, 4))
              if not (m >= 64 and k == 256)]


def time_config(config: MoEKernelConfig, ex: _Experts, sets: list, device: torch.device) -> float:
    def lookup(*args, **kwargs):  # every lookup answers with the candidate
        return config

    original = moe_configs.moe_kernel_config
    moe_configs.moe_kernel_config = lookup
    try:
        kw = dict(w1_scales=ex.s1, w2_scales=ex.s2, gate_up_group=64)
        for i in range(3):
            fused_moe(*sets[i % len(sets)], ex.w1, ex.b1, ex.w2, ex.b2, **kw)
        times = []
        for i in range(10):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fused_moe(*sets[i % len(sets)], ex.w1, ex.b1, ex.w2, ex.b2, **kw)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        return statistics.median(times)
    finally:
        moe_configs.moe_kernel_config = original


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", default="gpt-oss-20b,gpt-oss-120b")
    parser.add_argument("--tokens", default="1,4,16,64,256,1024,4096,8192")
    parser.add_argument("--out", default=str(moe_configs.CONFIG_DIR))
    args = parser.parse_args()
    device = torch.device("cuda")
    name = torch.cuda.get_device_name(device)
    for shape in args.shapes.split(","):
        hidden, inter, experts, top_k = SHAPES[shape]
        g = torch.Generator().manual_seed(0)
        ex = _Experts(hidden, inter, experts, device, g)
        best: dict[str, dict] = {}
        for tokens in (int(t) for t in args.tokens.split(",")):
            sets = [(torch.randn(tokens, hidden, generator=g).to(torch.bfloat16).to(device),
                     *route_ref(torch.randn(tokens, experts, generator=g).to(device), top_k)) for _ in range(3)]
            timed = []
            for config in CANDIDATES:
                try:
                    timed.append((time_config(config, ex, sets, device), config))
                except (RuntimeError, triton.runtime.errors.OutOfResources,
                        triton.compiler.errors.CompilationError) as exc:  # a candidate too big for the chip
                    print(f"{shape} T={tokens} {config}: skipped ({type(exc).__name__})")
            seconds, config = min(timed, key=lambda tc: tc[0])
            best[str(tokens)] = {k: getattr(config, k) for k in ("block_m", "block_n", "block_k", "num_warps",
                                                                  "num_stages")}
            print(f"{shape} T={tokens}: {seconds * 1e6:.1f} us with {config}", flush=True)
        for n, k in ((2 * inter, hidden), (hidden, inter)):
            path = Path(args.out) / config_file_name(experts, n, k, "mxfp4", name)
            path.write_text(json.dumps(best, indent=1) + "\n")
            print(f"wrote {path}")


if __name__ == "__main__":
    main()
