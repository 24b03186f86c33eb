"""`quickmoe bench moe`: the MoE experts of gpt-oss layer shapes, side by side in one run.

For each shape and token count T: quickmoe's Triton MoE (`fused_moe`, MXFP4 weights, eager and replayed in
a CUDA graph), the torch reference (`fused_moe_ref`, T <= 1024), a bf16 `F.grouped_mm` implementation (when
torch has it) and transformers' GptOssExperts (when installed), each timed with CUDA events over fresh
random inputs (rotating sets, never zeros): median of `iters` after `warmup`. The ceilings are measured in
the same run: HBM bandwidth from a 1 GiB device copy (bytes read + written), bf16 matmul rate from an
8192^3 GEMM. quickmoe's row reports bandwidth as the bytes of the experts hit (MXFP4 blocks, scales and
biases of every expert some token chose, plus activations in and out) over its time, and TFLOP/s as
2 * T * k * (H * 2I + I * H) over its time.

On a CPU the kernels run in Triton's interpreter (set TRITON_INTERPRET=1 before starting): only useful
as a smoke test of the command, with `--shapes tiny`.
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

from quickmoe.errors import ConfigError
from quickmoe.kernels.fused_moe import fused_moe, fused_moe_ref, swiglu_gpt_oss
from quickmoe.kernels.routing import route_ref

logger = logging.getLogger(__name__)

# name -> (hidden H, intermediate I, experts E, top-k)
SHAPES = {"gpt-oss-20b": (2880, 2880, 32, 4), "gpt-oss-120b": (2880, 2880, 128, 4), "tiny": (256, 256, 8, 4)}
DEFAULT_TOKENS = (1, 4, 16, 64, 256, 1024, 4096, 8192)
GROUP = 64  # the MXFP4 kernel layout's gate/up group


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

    def __post_init__(self) -> None:
        bad = [s for s in self.shapes if s not in SHAPES]
        if bad or not self.shapes:
            raise ConfigError(f"bench moe option 'shapes' = {list(self.shapes)}: expected names among {list(SHAPES)}")
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


def measure_ceilings(device: torch.device) -> dict[str, float]:
    """HBM GB/s (1 GiB copy, read + write) and bf16 matmul TFLOP/s (8192^3), measured now (CUDA only)."""
    if device.type != "cuda":
        return {}
    src = torch.randint(0, 255, (1 << 30,), dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    copy_s = _time(lambda i: dst.copy_(src), 1, 3, 10, device)
    a = torch.randn(8192, 8192, dtype=torch.bfloat16, device=device)
    b = torch.randn(8192, 8192, dtype=torch.bfloat16, device=device)
    mm_s = _time(lambda i: a @ b, 1, 3, 10, device)
    return {"hbm_gb_per_s": 2 * src.numel() / copy_s / 1e9, "bf16_tflops": 2 * 8192**3 / mm_s / 1e12}


class _Experts:
    """Random MXFP4 experts in the kernel layout, plus their bf16 dequantized twin for the baselines."""

    def __init__(self, hidden: int, inter: int, experts: int, device: torch.device, g: torch.Generator) -> None:
        def mx(n: int, k: int) -> tuple[torch.Tensor, torch.Tensor]:
            blocks = torch.randint(0, 256, (experts, n, k // 2), dtype=torch.uint8, generator=g).to(device)
            scales = torch.randint(119, 124, (experts, k // 32, n), dtype=torch.uint8, generator=g).to(device)
            return blocks, scales

        self.w1, self.s1 = mx(2 * inter, hidden)
        self.w2, self.s2 = mx(hidden, inter)
        self.b1 = torch.randn(experts, 2 * inter, generator=g).to(torch.bfloat16).to(device)
        self.b2 = torch.randn(experts, hidden, generator=g).to(torch.bfloat16).to(device)
        self.hidden, self.inter, self.experts = hidden, inter, experts

    def dense(self) -> tuple[torch.Tensor, torch.Tensor]:
        from quickmoe.layouts.mxfp4_moe import dequantize_expert

        w1 = torch.stack([dequantize_expert(self.w1[e], self.s1[e], torch.bfloat16) for e in range(self.experts)])
        w2 = torch.stack([dequantize_expert(self.w2[e], self.s2[e], torch.bfloat16) for e in range(self.experts)])
        return w1, w2  # [E, 2I, H] (grouped gate/up rows), [E, H, I]

    def bytes_hit(self, ids: torch.Tensor, tokens: int) -> int:
        hit = int(torch.unique(ids).numel())
        per_expert = sum(t[0].numel() * t.element_size() for t in (self.w1, self.s1, self.w2, self.s2, self.b1, self.b2))
        return hit * per_expert + 2 * tokens * self.hidden * 2  # + bf16 activations in and out


def _grouped_mm_moe(x, weights, ids, w1, b1, w2, b2):  # bf16 F.grouped_mm experts (the same maths)
    num_tokens, top_k = ids.shape
    flat = ids.reshape(-1)
    order = torch.argsort(flat)
    offs = torch.cumsum(torch.bincount(flat, minlength=w1.shape[0]), 0).to(torch.int32)
    token_of = order // top_k
    gate_up = torch.nn.functional.grouped_mm(x[token_of], w1.transpose(-2, -1), offs=offs) + b1[flat[order]]
    act = swiglu_gpt_oss(gate_up, 7.0, 1.702, GROUP)
    y = torch.nn.functional.grouped_mm(act, w2.transpose(-2, -1), offs=offs) + b2[flat[order]]
    out = torch.zeros_like(x)
    return out.index_add_(0, token_of, y * weights.reshape(-1)[order, None].to(y.dtype))


def _transformers_experts(experts: _Experts, w1: torch.Tensor, w2: torch.Tensor, device: torch.device):
    from transformers import GptOssConfig
    from transformers.models.gpt_oss.modeling_gpt_oss import GptOssExperts

    config = GptOssConfig(hidden_size=experts.hidden, intermediate_size=experts.inter,
                          num_local_experts=experts.experts)
    module = GptOssExperts(config).to(device=device, dtype=torch.bfloat16)
    with torch.no_grad():  # timing only: the gate/up row order does not matter here
        module.gate_up_proj.copy_(w1.transpose(-2, -1))
        module.gate_up_proj_bias.copy_(experts.b1)
        module.down_proj.copy_(w2.transpose(-2, -1))
        module.down_proj_bias.copy_(experts.b2)
    return module


def run_moe_bench(opts: MoEBenchOptions) -> dict:
    device = torch.device(opts.device)
    ceilings = measure_ceilings(device)
    rows = []
    for shape in opts.shapes:
        hidden, inter, num_experts, top_k = SHAPES[shape]
        g = torch.Generator().manual_seed(0)
        ex = _Experts(hidden, inter, num_experts, device, g)
        w1d = w2d = hf = None
        if opts.baselines:
            w1d, w2d = ex.dense()
            try:
                hf = _transformers_experts(ex, w1d, w2d, device)
            except (ImportError, RuntimeError, TypeError, ValueError) as exc:
                logger.info("transformers GptOssExperts unavailable: %s", exc)
        for tokens in opts.tokens:
            sets = [(torch.randn(tokens, hidden, generator=g).to(torch.bfloat16).to(device),
                     *route_ref(torch.randn(tokens, num_experts, generator=g).to(device), top_k)) for _ in range(3)]
            mx = dict(w1_scales=ex.s1, w2_scales=ex.s2, gate_up_group=GROUP)
            row = {"shape": shape, "tokens": tokens}

            def quick(i):
                x, w, ids = sets[i]
                return fused_moe(x, w, ids, ex.w1, ex.b1, ex.w2, ex.b2, **mx)

            row["quickmoe_s"] = _time(quick, 3, opts.warmup, opts.iters, device)
            if device.type == "cuda":
                row["quickmoe_graph_s"] = _graph_time(quick, opts, device)
            if opts.baselines and tokens <= 1024:
                row["reference_s"] = _time(lambda i: fused_moe_ref(*sets[i], ex.w1, ex.b1, ex.w2, ex.b2, **mx), 3,
                                           min(opts.warmup, 2), min(opts.iters, 5), device)
            if w1d is not None and device.type == "cuda" and hasattr(torch.nn.functional, "grouped_mm"):
                row["grouped_mm_s"] = _time(lambda i: _grouped_mm_moe(*sets[i], w1d, ex.b1, w2d, ex.b2), 3,
                                            opts.warmup, opts.iters, device)
            if hf is not None:
                with torch.no_grad():
                    row["transformers_s"] = _time(lambda i: hf(sets[i][0], sets[i][2].long(), sets[i][1]), 3,
                                                  min(opts.warmup, 2), min(opts.iters, 5), device)
            best = row.get("quickmoe_graph_s", row["quickmoe_s"])
            row["hbm_gb_per_s"] = ex.bytes_hit(sets[0][2], tokens) / best / 1e9
            row["tflops"] = 2 * tokens * top_k * (hidden * 2 * inter + inter * hidden) / best / 1e12
            rows.append(row)
            logger.info("%s T=%d: %s", shape, tokens, row)
    doc = {"device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
           "torch": torch.__version__, "ceilings": ceilings, "rows": rows}
    print(format_moe_table(doc))
    if opts.json_out:
        Path(opts.json_out).write_text(json.dumps(doc, indent=2) + "\n")
    return doc


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
             + (f"HBM {ceil['hbm_gb_per_s']:.0f} GB/s, bf16 matmul {ceil['bf16_tflops']:.0f} TFLOP/s" if ceil else "none"),
             f"{'shape':<13}{'T':>6}{'quickmoe us':>13}{'in graph':>10}{'reference':>11}{'grouped_mm':>12}"
             f"{'transformers':>14}{'GB/s':>8}{'%HBM':>6}{'TFLOP/s':>9}{'%mm':>6}{'vs gmm':>8}{'vs HF':>7}"]

    def us(row, key):
        return f"{row[key] * 1e6:.1f}" if key in row else "-"

    for r in doc["rows"]:
        best = r.get("quickmoe_graph_s", r["quickmoe_s"])
        gmm = f"{r['grouped_mm_s'] / best:.2f}x" if "grouped_mm_s" in r else "-"
        hf = f"{r['transformers_s'] / best:.2f}x" if "transformers_s" in r else "-"
        hbm = f"{100 * r['hbm_gb_per_s'] / ceil['hbm_gb_per_s']:.0f}" if ceil else "-"
        mm = f"{100 * r['tflops'] / ceil['bf16_tflops']:.0f}" if ceil else "-"
        lines.append(f"{r['shape']:<13}{r['tokens']:>6}{us(r, 'quickmoe_s'):>13}{us(r, 'quickmoe_graph_s'):>10}"
                     f"{us(r, 'reference_s'):>11}{us(r, 'grouped_mm_s'):>12}{us(r, 'transformers_s'):>14}"
                     f"{r['hbm_gb_per_s']:>8.0f}{hbm:>6}{r['tflops']:>9.1f}{mm:>6}{gmm:>8}{hf:>7}")
    return "\n".join(lines)
