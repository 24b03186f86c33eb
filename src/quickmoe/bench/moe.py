"""`quickmoe bench moe`: the MoE experts of gpt-oss, Qwen3-MoE and Mixtral layer shapes, side by side in one run.

For each shape, weight format the shape supports (gpt-oss: MXFP4; Qwen3-30B-A3B, Mixtral-8x7B: bf16, FP8
block-scaled, NVFP4; bench/moe_experts.py) and token count T: quickmoe's Triton MoE (`fused_moe`, eager and
replayed in a CUDA graph; FP8 multiplies e4m3 by e4m3 activations quantized per 128 columns, NVFP4 is decoded
in the kernel), the torch reference
(`fused_moe_ref`, T <= 1024), a bf16 `F.grouped_mm` implementation (when torch has it) and transformers' experts
(GptOssExperts / Qwen3MoeExperts, when installed), each timed with CUDA events over fresh random inputs
(rotating sets, never zeros): median of `iters` after `warmup`. The ceilings are measured in
the same run: HBM bandwidth from a 1 GiB device copy (bytes read + written), bf16 matmul rate from an
8192^3 GEMM. quickmoe's row reports bandwidth as the bytes of the experts hit (weights, scales and biases of
every expert some token chose, plus activations in and out) over its time, and TFLOP/s as
2 * T * k * (H * 2I + I * H) over its time.

On a CPU the kernels run in Triton's interpreter (set TRITON_INTERPRET=1 before starting): only useful
as a smoke test of the command, with `--shapes tiny` or `tiny-silu`.
"""

from __future__ import annotations

import json
import logging
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from quickmoe.bench.moe_experts import (
    SHAPES,
    ExpertSet,
    dense_twin,
    grouped_mm_experts,
    make_experts,
    transformers_experts,
)
from quickmoe.errors import ConfigError
from quickmoe.kernels.routing import route_ref

logger = logging.getLogger(__name__)

DEFAULT_TOKENS = (1, 4, 16, 64, 256, 1024, 4096, 8192)
FORMATS = ("mxfp4", "bf16", "fp8", "nvfp4")


@dataclass(frozen=True)
class MoEBenchOptions:
    """What `bench moe` runs; validated at construction."""

    shapes: tuple[str, ...] = ("gpt-oss-20b", "gpt-oss-120b")
    tokens: tuple[int, ...] = DEFAULT_TOKENS
    device: str = "cuda"
    warmup: int = 5
    iters: int = 20
    json_out: str | None = None
    baselines: bool = True
    formats: tuple[str, ...] | None = None  # None: every format each shape supports

    def __post_init__(self) -> None:
        bad = [s for s in self.shapes if s not in SHAPES]
        if bad or not self.shapes:
            raise ConfigError(f"bench moe option 'shapes' = {list(self.shapes)}: expected names among {list(SHAPES)}")
        if self.formats is not None and (not self.formats or any(f not in FORMATS for f in self.formats)):
            raise ConfigError(f"bench moe option 'formats' = {list(self.formats)}: expected names among "
                              f"{list(FORMATS)}")
        if not self.tokens or any(t < 1 for t in self.tokens):
            raise ConfigError(f"bench moe option 'tokens' = {list(self.tokens)}: expected positive integers")
        if self.warmup < 0 or self.iters < 1:
            raise ConfigError(f"bench moe options warmup = {self.warmup}, iters = {self.iters}: expected >= 0 and >= 1")


def _time(fn: Callable[[int], object], sets: int, warmup: int, iters: int, device: torch.device) -> float:
    """Median seconds of fn(i) (i rotates over the input sets), CUDA events on a GPU, wall clock on CPU."""
    for i in range(warmup):
        fn(i % sets)
    times = []
    for i in range(iters):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn(i % sets)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        else:
            t0 = time.perf_counter()
            fn(i % sets)
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def measure_ceilings(device: torch.device, *, fp8: bool = False) -> dict[str, float]:
    """HBM GB/s (1 GiB copy, read + write), bf16 matmul TFLOP/s (8192^3) and, with `fp8` where the GPU has FP8
    tensor cores (compute capability >= 8.9), the e4m3 x e4m3 -> bf16 matmul rate of `torch._scaled_mm` (8192^3,
    per-tensor scales), measured now (CUDA only)."""
    if device.type != "cuda":
        return {}
    src = torch.randint(0, 255, (1 << 30,), dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    copy_s = _time(lambda i: dst.copy_(src), 1, 3, 10, device)
    a = torch.randn(8192, 8192, dtype=torch.bfloat16, device=device)
    b = torch.randn(8192, 8192, dtype=torch.bfloat16, device=device)
    mm_s = _time(lambda i: a @ b, 1, 3, 10, device)
    ceilings = {"hbm_gb_per_s": 2 * src.numel() / copy_s / 1e9, "bf16_tflops": 2 * 8192**3 / mm_s / 1e12}
    if fp8 and torch.cuda.get_device_capability(device) >= (8, 9):
        a8, b8 = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn)  # b8.t(): the column-major operand
        one = torch.ones((), dtype=torch.float32, device=device)
        fp8_s = _time(lambda i: torch._scaled_mm(a8, b8.t(), one, one, out_dtype=torch.bfloat16), 1, 3, 10, device)
        ceilings["fp8_tflops"] = 2 * 8192**3 / fp8_s / 1e12
    return ceilings


def run_moe_bench(opts: MoEBenchOptions) -> dict:
    device = torch.device(opts.device)
    ceilings = measure_ceilings(device, fp8=True)
    rows = []
    for name in opts.shapes:
        shape = SHAPES[name]
        g = torch.Generator().manual_seed(0)
        baselines = None  # (bf16 weights, transformers module) of the shape, built with its first format
        for fmt in (f for f in shape.formats if opts.formats is None or f in opts.formats):
            ex = make_experts(shape, fmt, device, g)
            if opts.baselines and baselines is None:
                w1d, w2d = dense_twin(ex)
                try:
                    hf = transformers_experts(ex, w1d, w2d, device)
                except (ImportError, RuntimeError, TypeError, ValueError) as exc:
                    logger.info("transformers' experts unavailable: %s", exc)
                    hf = None
                baselines = (w1d, w2d, ex.b1, ex.b2, hf)
            for tokens in opts.tokens:
                rows.append(_bench_row(name, ex, tokens, baselines, opts, device, g))
    doc = {"device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
           "torch": torch.__version__, "ceilings": ceilings, "rows": rows}
    print(format_moe_table(doc))
    if opts.json_out:
        Path(opts.json_out).write_text(json.dumps(doc, indent=2) + "\n")
    return doc


def _bench_row(name: str, ex: ExpertSet, tokens: int, baselines, opts: MoEBenchOptions, device: torch.device,
               g: torch.Generator) -> dict:
    shape = ex.shape
    sets = [(torch.randn(tokens, shape.hidden, generator=g).to(torch.bfloat16).to(device),
             *route_ref(torch.randn(tokens, shape.experts, generator=g).to(device), shape.top_k)) for _ in range(3)]
    row = {"shape": name, "format": ex.fmt, "tokens": tokens}
    quick = ex.run(kernel=True)
    row["quickmoe_s"] = _time(lambda i: quick(*sets[i]), 3, opts.warmup, opts.iters, device)
    if device.type == "cuda":
        row["quickmoe_graph_s"] = _graph_time(lambda i: quick(*sets[i]), opts, device)
    if opts.baselines and tokens <= 1024:
        ref = ex.run(kernel=False)
        row["reference_s"] = _time(lambda i: ref(*sets[i]), 3, min(opts.warmup, 2), min(opts.iters, 5), device)
    if baselines is not None:
        w1d, w2d, b1, b2, hf = baselines
        if device.type == "cuda" and hasattr(torch.nn.functional, "grouped_mm"):
            row["grouped_mm_s"] = _time(lambda i: grouped_mm_experts(shape, *sets[i], w1d, w2d, b1, b2), 3,
                                        opts.warmup, opts.iters, device)
        if hf is not None:
            with torch.no_grad():
                row["transformers_s"] = _time(lambda i: hf(sets[i][0], sets[i][2].long(), sets[i][1]), 3,
                                              min(opts.warmup, 2), min(opts.iters, 5), device)
    best = row.get("quickmoe_graph_s", row["quickmoe_s"])
    row["hbm_gb_per_s"] = ex.bytes_hit(sets[0][2], tokens) / best / 1e9
    row["tflops"] = 2 * tokens * shape.top_k * (shape.hidden * 3 * shape.inter) / best / 1e12
    logger.info("%s %s T=%d: %s", name, ex.fmt, tokens, row)
    return row


def _graph_time(fn: Callable[[int], object], opts: MoEBenchOptions, device: torch.device) -> float:
    """fn(0)..fn(2) captured in one CUDA graph each (same inputs per set), replays timed."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    graphs = []
    with torch.cuda.stream(stream):
        for i in range(3):
            fn(i)  # warm-up outside the capture (compiles the kernels)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, stream=stream):
                fn(i)
            graphs.append(graph)
    torch.cuda.current_stream().wait_stream(stream)
    return _time(lambda i: graphs[i].replay(), 3, opts.warmup, opts.iters, device)


def format_moe_table(doc: dict) -> str:
    ceil = doc.get("ceilings", {})
    lines = [f"bench moe on {doc['device']} (torch {doc['torch']}); ceilings measured now: "
             + (f"HBM {ceil['hbm_gb_per_s']:.0f} GB/s, bf16 matmul {ceil['bf16_tflops']:.0f} TFLOP/s" if ceil else "none")
             + (f", FP8 matmul {ceil['fp8_tflops']:.0f} TFLOP/s (%mm of fp8 rows)" if "fp8_tflops" in ceil else ""),
             f"{'shape':<14}{'format':>7}{'T':>6}{'quickmoe us':>13}{'in graph':>10}{'reference':>11}{'grouped_mm':>12}"
             f"{'transformers':>14}{'GB/s':>8}{'%HBM':>6}{'TFLOP/s':>9}{'%mm':>6}{'vs gmm':>8}{'vs HF':>7}"]

    def us(row, key):
        return f"{row[key] * 1e6:.1f}" if key in row else "-"

    for r in doc["rows"]:
        best = r.get("quickmoe_graph_s", r.get("quickmoe_s"))
        gmm = f"{r['grouped_mm_s'] / best:.2f}x" if "grouped_mm_s" in r and best else "-"
        hf = f"{r['transformers_s'] / best:.2f}x" if "transformers_s" in r and best else "-"
        hbm = f"{100 * r['hbm_gb_per_s'] / ceil['hbm_gb_per_s']:.0f}" if ceil and "hbm_gb_per_s" in r else "-"
        rate = ceil.get("fp8_tflops") if r.get("format") == "fp8" else ceil.get("bf16_tflops")
        mm = f"{100 * r['tflops'] / rate:.0f}" if rate and "tflops" in r else "-"
        lines.append(f"{r['shape']:<14}{r.get('format', 'mxfp4'):>7}{r['tokens']:>6}{us(r, 'quickmoe_s'):>13}"
                     f"{us(r, 'quickmoe_graph_s'):>10}"
                     f"{us(r, 'reference_s'):>11}{us(r, 'grouped_mm_s'):>12}{us(r, 'transformers_s'):>14}"
                     f"{r.get('hbm_gb_per_s', 0):>8.0f}{hbm:>6}{r.get('tflops', 0):>9.1f}{mm:>6}{gmm:>8}{hf:>7}")
    return "\n".join(lines)
