"""The FP8 activation quantizer (`kernels/fp8_quant.py`, per token and 128 columns) on the GPU: microseconds in
CUDA graphs and GB/s of bytes read and written, against the torch reference, at Qwen3-30B-A3B's widths (hidden
2048, MoE intermediate 768, attention 4096) and decode to prefill token counts; bits checked against the
reference on each input. Usage: python3 scripts/probes/fp8_quant_probe.py (a probe, not a benchmark).
PROBE_DRY_RUN=1 with TRITON_INTERPRET=1 checks the script on CPU at small shapes."""

from __future__ import annotations

import os
import statistics
import time

import torch

from quickmoe.kernels.fp8_quant import quantize_fp8_per_token_group, quantize_fp8_per_token_group_ref

DRY = os.environ.get("PROBE_DRY_RUN") == "1"
DEV = torch.device("cpu" if DRY else "cuda")
TOKENS = (1, 8) if DRY else (1, 64, 1024, 8192)
WIDTHS = (256,) if DRY else (768, 2048, 4096)


def graph_us(fn) -> float:
    if DRY:
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e6
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            for _ in range(8):
                fn()
    torch.cuda.current_stream().wait_stream(stream)
    times = []
    for _ in range(50):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        graph.replay()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) * 1e3 / 8)
    return statistics.median(times)


def main() -> None:
    print("| T | K | kernel us | GB/s | torch reference us | bits equal |\n|---|---|---|---|---|---|")
    for tokens in TOKENS:
        for width in WIDTHS:
            x = (torch.randn(tokens, width, device=DEV) * torch.exp(torch.randn(tokens, 1, device=DEV) * 3))
            x = x.to(torch.float32 if DRY else torch.bfloat16)
            kernel = graph_us(lambda x=x: quantize_fp8_per_token_group(x))
            ref = graph_us(lambda x=x: quantize_fp8_per_token_group_ref(x))
            q, s = quantize_fp8_per_token_group(x)
            q_ref, s_ref = quantize_fp8_per_token_group_ref(x)
            same = torch.equal(q.view(torch.uint8), q_ref.view(torch.uint8)) and torch.equal(s, s_ref)
            nbytes = x.numel() * x.element_size() + q.numel() + s.numel() * 4
            print(f"| {tokens} | {width} | {kernel:.2f} | {nbytes / kernel / 1e3:.0f} | {ref:.2f} | {same} |",
                  flush=True)


if __name__ == "__main__":
    main()
