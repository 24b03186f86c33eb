"""`quickmoe bench attention`: quickmoe's paged attention kernels on gpt-oss shapes beside SDPA, in one run.

gpt-oss attention: 64 query heads, 8 KV heads, head dim 64, a sink per head, full layers (window 0) and
128-token sliding windows; bf16 cache in 16-position blocks (--block-size) scattered over the pool (random block
order), head-major as the engine lays it out by default (each KV head's rows of a block contiguous) or, with
--kv-layout slot-major, a position's KV heads side by side.
- Decode, over a grid of batch x context: one query per sequence at the end of its context. Reported: the
  kernel's time, the KV bytes it must read (K and V of every visible position: min(context, window) each) over
  that time in GB/s and as a share of the HBM bandwidth measured in the same run (a 1 GiB device copy), and
  `torch.nn.functional.scaled_dot_product_attention` on the same visible keys laid out contiguously
  ([B, KV, L, D], GQA, no sink: SDPA has none) for comparison.
- Prefill, over (batch, prompt length) points: whole prompts, causal, against SDPA with is_causal, in TFLOP/s
  (4 * H * D * L^2 / 2 per sequence: the causal half of QK^T and PV) beside the bf16 matmul rate.
Every time is the median over replays of a CUDA graph that calls the kernel on rotating input sets (more bytes
than the L2 cache holds, random values), so launch gaps and cached data do not flatter small points. The same
timing of a graph of one-element adds gives the floor of one kernel node (`kernel_floor_s`): no point that
launches n kernels can take less than n times it, whatever the kernels do.
"""

from __future__ import annotations

import json
import logging
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from quickmoe.bench.moe import measure_ceilings
from quickmoe.engine_config import KV_CACHE_LAYOUTS
from quickmoe.errors import ConfigError
from quickmoe.kernels.decode_attention import paged_decode_attention
from quickmoe.kernels.prefill_attention import paged_prefill_attention

logger = logging.getLogger(__name__)

HEADS, KV_HEADS, HEAD_DIM = 64, 8, 64  # gpt-oss
ROTATE_BYTES = 256 << 20  # input sets per point: at least this many bytes in all (5x the H100's L2)


@dataclass(frozen=True)
class AttentionBenchOptions:
    """What `bench attention` runs; validated at construction."""

    batches: tuple[int, ...] = (1, 8, 32, 64, 256)  # 32: where SDPA led by 8-17% (2026-11-30 sweeps)
    contexts: tuple[int, ...] = (1024, 4096, 16384)
    windows: tuple[int, ...] = (0, 128)
    prefill: tuple[tuple[int, int], ...] = ((1, 1024), (4, 2048), (1, 8192), (16, 512))  # 16 x 512: a mixed step
    reps: int = 20
    kv_layout: str = "head-major"  # the engine's default; or "slot-major" (paged_kv_tile.kv_cache_head_major)
    block_size: int = 16  # positions per cache block
    json_out: str | None = None

    def __post_init__(self) -> None:
        for name in ("batches", "contexts", "windows"):
            values = getattr(self, name)
            if not values or any(not isinstance(v, int) or v < (0 if name == "windows" else 1) for v in values):
                raise ConfigError(f"bench attention option '{name}' = {list(values)}: expected positive integers")
        if any(len(p) != 2 or min(p) < 1 for p in self.prefill):
            raise ConfigError(f"bench attention option 'prefill' = {list(self.prefill)}: expected BATCH:LENGTH pairs")
        if self.reps < 1:
            raise ConfigError(f"bench attention option 'reps' = {self.reps}: expected >= 1")
        if self.block_size < 1 or self.block_size & (self.block_size - 1):
            raise ConfigError(f"bench attention option 'block_size' = {self.block_size}: expected a power of two")
        if self.kv_layout not in KV_CACHE_LAYOUTS:
            raise ConfigError(f"bench attention option 'kv_layout' = {self.kv_layout!r}: expected one of "
                              f"{list(KV_CACHE_LAYOUTS)}")


def time_in_graph(fn: Callable[[int], object], sets: int, reps: int) -> float:
    """Median seconds of one fn(i) call: a CUDA graph holds `reps` calls rotating over `sets` inputs; it is
    replayed 7 times after a warm-up."""
    for i in range(sets):
        fn(i)  # compile and warm up outside the graph
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(reps):
            fn(i % sets)
    graph.replay()
    times = []
    for _ in range(7):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3 / reps)
    return statistics.median(times)


def kernel_floor(device: torch.device, reps: int) -> float:
    """Seconds of one kernel node that does nothing to speak of (a one-element add), timed as the points are."""
    cells = [torch.zeros(1, device=device) for _ in range(2)]
    return time_in_graph(lambda i: cells[i].add_(1.0), len(cells), reps)


def _paged_set(batch: int, context: int, window: int, g: torch.Generator, device: torch.device,
               head_major: bool = False, block: int = 16, heads: int = HEADS, kv_heads: int = KV_HEADS,
               head_dim: int = HEAD_DIM) -> dict:
    """One input set: a bf16 paged cache holding each sequence's `context` positions, blocks in random order; with
    a window only the blocks a sliding layer still holds (earlier table entries are -1, as released); head_major:
    each cache a [blocks, block, KV, D] view of a contiguous [blocks, KV, block, D] tensor. The heads default to
    gpt-oss's (the probes pass other families')."""
    per_seq = -(-context // block)
    first_kept = max(context - window, 0) // block if window > 0 else 0
    held = per_seq - first_kept
    order = torch.randperm(batch * held).to(torch.int32)
    tables = torch.full((batch, per_seq), -1, dtype=torch.int32)
    tables[:, first_kept:] = order.view(batch, held)
    shape = (batch * held, kv_heads, block, head_dim) if head_major else (batch * held, block, kv_heads, head_dim)
    view = (lambda t: t.permute(0, 2, 1, 3)) if head_major else (lambda t: t)
    return {"k": view(torch.randn(shape, generator=g, device=device, dtype=torch.bfloat16)),
            "v": view(torch.randn(shape, generator=g, device=device, dtype=torch.bfloat16)),
            "tables": tables.to(device), "sinks": torch.randn(heads, generator=g, device=device)}


def _randn(*shape: int, g: torch.Generator, device: torch.device) -> torch.Tensor:
    return torch.randn(shape, generator=g, device=device, dtype=torch.bfloat16)


def _num_sets(set_bytes: int) -> int:
    return max(2, min(16, -(-ROTATE_BYTES // max(set_bytes, 1))))


def bench_decode(batch: int, context: int, window: int, reps: int, device: torch.device,
                 head_major: bool = False, block: int = 16) -> dict:
    g = torch.Generator(device).manual_seed(batch * 7919 + context + window)
    torch.manual_seed(batch + context)  # the block order
    visible = min(context, window) if window > 0 else context
    kv_bytes = 2 * batch * visible * KV_HEADS * HEAD_DIM * 2  # K and V, bf16
    sets = [_paged_set(batch, context, window, g, device, head_major, block) for _ in range(_num_sets(kv_bytes))]
    lens = torch.full((batch,), context, dtype=torch.long, device=device)
    qs = [_randn(batch, HEADS, HEAD_DIM, g=g, device=device) for _ in sets]
    scale = HEAD_DIM**-0.5
    ours = time_in_graph(lambda i: paged_decode_attention(qs[i], sets[i]["k"], sets[i]["v"], sets[i]["tables"], lens,
                                                          sets[i]["sinks"], window, scale), len(sets), reps)
    sets.clear()  # free the paged inputs before the contiguous ones
    contiguous = [(_randn(batch, KV_HEADS, visible, HEAD_DIM, g=g, device=device),
                   _randn(batch, KV_HEADS, visible, HEAD_DIM, g=g, device=device)) for _ in range(_num_sets(kv_bytes))]
    q4 = [_randn(batch, HEADS, 1, HEAD_DIM, g=g, device=device) for _ in contiguous]
    sdpa = time_in_graph(lambda i: torch.nn.functional.scaled_dot_product_attention(
        q4[i], contiguous[i][0], contiguous[i][1], scale=scale, enable_gqa=True), len(contiguous), reps)
    return {"batch": batch, "context": context, "window": window, "kv_bytes": kv_bytes, "quickmoe_s": ours,
            "sdpa_s": sdpa, "quickmoe_gb_per_s": kv_bytes / ours / 1e9, "sdpa_gb_per_s": kv_bytes / sdpa / 1e9}


def bench_prefill(batch: int, length: int, window: int, reps: int, device: torch.device,
                  head_major: bool = False, block: int = 16) -> dict:
    g = torch.Generator(device).manual_seed(batch * 104729 + length + window)
    torch.manual_seed(batch + length)
    cache_bytes = 2 * batch * length * KV_HEADS * HEAD_DIM * 2
    sets = [_paged_set(batch, length, 0, g, device, head_major, block)
            for _ in range(min(4, _num_sets(cache_bytes)))]
    qs = [_randn(batch * length, HEADS, HEAD_DIM, g=g, device=device) for _ in sets]
    cu = torch.arange(0, (batch + 1) * length, length, dtype=torch.int32, device=device)
    lens = torch.full((batch,), length, dtype=torch.long, device=device)
    scale = HEAD_DIM**-0.5
    ours = time_in_graph(lambda i: paged_prefill_attention(qs[i], sets[i]["k"], sets[i]["v"], sets[i]["tables"], cu,
                                                           lens, sets[i]["sinks"], window, scale),
                         len(sets), reps)
    sets.clear()
    qs.clear()
    q4 = [_randn(batch, HEADS, length, HEAD_DIM, g=g, device=device) for _ in range(2)]
    kv = [(_randn(batch, KV_HEADS, length, HEAD_DIM, g=g, device=device),
           _randn(batch, KV_HEADS, length, HEAD_DIM, g=g, device=device)) for _ in q4]
    sdpa = None
    if window == 0:  # SDPA has no sliding window short of a dense mask
        sdpa = time_in_graph(lambda i: torch.nn.functional.scaled_dot_product_attention(
            q4[i], kv[i][0], kv[i][1], scale=scale, is_causal=True, enable_gqa=True), len(q4), max(1, reps // 4))
    visible_pairs = length * (length + 1) / 2 if window == 0 else length * min(window, length)
    flops = 4 * batch * HEADS * HEAD_DIM * visible_pairs
    return {"batch": batch, "length": length, "window": window, "flops": flops, "quickmoe_s": ours, "sdpa_s": sdpa,
            "quickmoe_tflops": flops / ours / 1e12, "sdpa_tflops": flops / sdpa / 1e12 if sdpa else None}


def run_attention_bench(opts: AttentionBenchOptions) -> dict:
    if not torch.cuda.is_available():
        raise ConfigError("bench attention needs a CUDA device (it times GPU kernels and compares with the HBM "
                          "bandwidth)")
    device = torch.device("cuda")
    ceilings = measure_ceilings(device)
    head_major = opts.kv_layout == "head-major"
    doc = {"device": torch.cuda.get_device_name(device), "ceilings": ceilings, "kv_layout": opts.kv_layout,
           "block_size": opts.block_size, "decode": [], "prefill": []}
    with torch.inference_mode():
        doc["kernel_floor_s"] = kernel_floor(device, opts.reps)
        for window in opts.windows:
            for context in opts.contexts:
                for batch in opts.batches:
                    if 2 * batch * (min(context, window) if window else context) * KV_HEADS * HEAD_DIM * 2 > 12 << 30:
                        continue  # over 12 GiB of cache per input set
                    doc["decode"].append(bench_decode(batch, context, window, opts.reps, device, head_major,
                                                      opts.block_size))
                    torch.cuda.empty_cache()
        for window in opts.windows:
            for batch, length in opts.prefill:
                doc["prefill"].append(bench_prefill(batch, length, window, opts.reps, device, head_major,
                                                    opts.block_size))
                torch.cuda.empty_cache()
    if opts.json_out:
        Path(opts.json_out).write_text(json.dumps(doc, indent=2) + "\n")
    print(format_attention_table(doc))
    return doc


def format_attention_table(doc: dict) -> str:
    hbm = doc["ceilings"].get("hbm_gb_per_s")
    lines = [f"bench attention on {doc['device']}: gpt-oss heads {HEADS}/{KV_HEADS}, head dim {HEAD_DIM}, bf16, "
             f"blocks of {doc.get('block_size', 16)} ({doc.get('kv_layout', 'slot-major')}); HBM {hbm:.0f} GB/s, "
             f"bf16 matmul {doc['ceilings'].get('bf16_tflops', 0):.0f} "
             "TFLOP/s (measured now)",
             "decode (one query per sequence; GB/s of the K and V bytes the step must read)"
             + (f"; one kernel node takes {doc['kernel_floor_s'] * 1e6:.1f} us (a one-element add, timed alike)"
                if doc.get("kernel_floor_s") else ""),
             f"{'batch':>6}{'context':>9}{'window':>8}{'KV MB':>9}{'quickmoe us':>13}{'GB/s':>8}{'% HBM':>7}"
             f"{'SDPA us':>10}{'GB/s':>8}{'SDPA/ours':>11}"]
    for r in doc["decode"]:
        lines.append(f"{r['batch']:>6}{r['context']:>9}{r['window']:>8}{r['kv_bytes'] / 1e6:>9.1f}"
                     f"{r['quickmoe_s'] * 1e6:>13.1f}{r['quickmoe_gb_per_s']:>8.0f}"
                     f"{100 * r['quickmoe_gb_per_s'] / hbm:>7.1f}{r['sdpa_s'] * 1e6:>10.1f}{r['sdpa_gb_per_s']:>8.0f}"
                     f"{r['sdpa_s'] / r['quickmoe_s']:>11.2f}")
    lines += _sdpa_summary("decode", [(f"{r['batch']} x {r['context']}, window {r['window']}",
                                       r["sdpa_s"] / r["quickmoe_s"]) for r in doc["decode"]])
    lines += ["prefill (whole causal prompts; TFLOP/s of QK^T and PV over the visible pairs)",
              f"{'batch':>6}{'length':>8}{'window':>8}{'quickmoe ms':>13}{'TFLOP/s':>9}{'SDPA ms':>10}{'TFLOP/s':>9}"
              f"{'SDPA/ours':>11}"]
    for r in doc["prefill"]:
        sdpa = (f"{r['sdpa_s'] * 1e3:>10.3f}{r['sdpa_tflops']:>9.1f}{r['sdpa_s'] / r['quickmoe_s']:>11.2f}"
                if r["sdpa_s"] else f"{'-':>10}{'-':>9}{'-':>11}")
        lines.append(f"{r['batch']:>6}{r['length']:>8}{r['window']:>8}{r['quickmoe_s'] * 1e3:>13.3f}"
                     f"{r['quickmoe_tflops']:>9.1f}{sdpa}")
    lines += _sdpa_summary("prefill", [(f"{r['batch']} x {r['length']}, window {r['window']}",
                                        r["sdpa_s"] / r["quickmoe_s"]) for r in doc["prefill"] if r["sdpa_s"]])
    return "\n".join(lines)


def _sdpa_summary(kind: str, ratios: list[tuple[str, float]]) -> list[str]:
    """One line: at how many points SDPA is faster (SDPA / ours < 1, as printed, two decimals) and where most."""
    if not ratios:
        return []
    slower = [(point, ratio) for point, ratio in ratios if round(ratio, 2) < 1.0]
    if not slower:
        return [f"{kind}: not slower than SDPA at any of the {len(ratios)} points"]
    point, ratio = min(slower, key=lambda pr: pr[1])
    return [f"{kind}: SDPA faster at {len(slower)} of {len(ratios)} points; most at {point} (SDPA / ours {ratio:.2f})"]
