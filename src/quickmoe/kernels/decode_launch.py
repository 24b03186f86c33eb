"""How paged decode attention is launched (`kernels/decode_attention.py`): keys per iteration, warps, stages and the
grid's order (`DecodeLaunchConfig`, `decode_launch_config`), and the split count of a sequence's context
(`decode_num_splits`). Functions of the batch size, the layer's shape and window and the GPU only, so a CUDA graph
captured for a batch size keeps them; what each choice does to a row's bits (the bf16 batch invariance of
tests/models/test_quality_gpu.py) is in their docstrings.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

__all__ = ["H100_ONE_SPLIT_PROGRAMS", "H200_ONE_SPLIT_PROGRAMS", "WINDOW_KEYS_PER_SPLIT", "DecodeLaunchConfig",
           "decode_launch_config", "decode_num_splits", "gpu_name"]


@dataclass(frozen=True)
class DecodeLaunchConfig:
    """How the split kernel is launched: keys per iteration, warps, software-pipeline stages, and whether the KV
    heads of a sequence are the grid's fastest axis (launched side by side, they read the same cache blocks at
    about the same time). Stages and the grid's order change no result bit; warps may change a last bit
    (`decode_launch_config`); keys per iteration do (they group the online softmax's steps)."""

    block_n: int = 64
    num_warps: int = 4
    num_stages: int = 2
    kv_fastest: bool = False

    def __post_init__(self) -> None:
        if self.block_n < 16 or self.block_n & (self.block_n - 1):
            raise ValueError(f"DecodeLaunchConfig.block_n = {self.block_n}: expected a power of two >= 16")
        if self.num_warps not in (1, 2, 4, 8, 16):
            raise ValueError(f"DecodeLaunchConfig.num_warps = {self.num_warps}: expected 1, 2, 4, 8 or 16")
        if self.num_stages < 1:
            raise ValueError(f"DecodeLaunchConfig.num_stages = {self.num_stages}: expected >= 1")


def decode_launch_config(batch: int, num_kv_heads: int, head_dim: int, window: int = 0,
                         device_name: str = "") -> DecodeLaunchConfig:
    """The launch config of a decode step of `batch` sequences (full and sliding layers alike) on the GPU named
    `device_name` (`torch.cuda.get_device_name`; the H100's rule for any other).

    Tuned on the H100 for gpt-oss (8 KV heads of 64; `scripts/probes/decode_attention_sweep.py`, docs/benchmarks.md)
    among the configs that keep a row's tiles at every batch size: 64 keys per iteration and the split count of
    `decode_num_splits`, so warps, stages and the grid's order are all that vary. Stages and the grid's order change
    no result bit; warps may change the last bit of some outputs (on Hopper 4 warps multiply with wgmma and 2 with
    mma.sync: the H200 gave different bf16 bits at 8 x 4k, 16 x 4k, 64 x 4k, 32 x 16k and 64 x 16k, max 1.2e-4,
    and the same at 15 other points of 2-64 sequences, 2026-11-29), as a different split count does. Other tiles
    read up to 5% faster at some sizes, and a sliding window's 128 keys in one tile of one program 12-27% faster up to
    batch 32, but each regrouped rows' online softmax differently at different batch sizes or between decode and
    mixed steps: 80% (tiles of 32 and 128 by batch size) and 97.7% (the one-tile window) of greedy tokens agreed
    between prompts run alone and in a batch of 64 on the embedded model in bf16, against a bar of 99% (100% with
    these). Up to 8 (sequence, KV head) programs (gpt-oss at batch 1) the untuned 4 warps and 2 stages: with the
    tuned config there too (and a combine that first read the context length) the batch-1 decode step's attention
    took 0.158 against 0.150 ms in the profiler, with these 0.151. Above, the KV heads on the fastest grid axis,
    3 stages up to 512 programs and 2 warps with 4 stages beyond (more programs resident, each with loads in
    flight): 3-5% faster than 4 warps and 2 stages at 8 x 4k, 64 x 4k and 256 x 1k-4k. A sliding layer's one
    split of its window (`decode_num_splits`) keeps 4 warps and 2 stages up to 256 programs: gpt-oss's 128-key
    window at batch 2-16 took 3.5-5.6 us with them against 3.8-5.7 us with the full layers' config.

    On the H200 (4.8 TB/s against the H100's 3.35, the same 132 multiprocessors) a full layer takes 2 warps at every
    batch size, so a row's bits never depend on the batch through the warps: 4 stages up to 8 programs, 6 at 9-512
    (8 at 256-383), 4 beyond. In the H200 sweep of 2026-11-30 (seventeenth session; `decode_attention_sweep.py`, two
    runs, gpt-oss shapes, 1-256 sequences of 1k-16k keys) they took 0.97-0.98 of the 4-warp configs' time at batch 1
    and 1k-4k keys (0.92-0.94 at 16k), 0.93-1.06 at 2-8 sequences (slower at 2 x 1k, 8 x 1k and 2 x 4k) and
    0.96-0.99 at 16-64. Where one split runs 256-383 programs (`decode_num_splits`; gpt-oss at 32 sequences), 8
    stages: at 32 x 1k, 4k and 16k keys one split took 20.4, 66.6-67.3 and 250.0-250.2 us with 8 stages, 20.6,
    68.8-69.0 and 251.4 with 6 (eighteenth session, `docs/runs/2026-11-30r-session/call3_h200/`); at 48 and 64
    sequences 6 stages stay ahead (28.1 against 29.1 us, 35.5 against 36.5 at 1k), as at 24 with two splits (18.3
    against 19.4). In gpt-oss-20b's decode step (`bench generate` 64 x 1000 -> 64, in turns) the batch-1 step took
    1.911-1.920 ms against 1.903-1.907 with batch 1's 4 warps (2-6 stages alike), the batch-64 step's attention
    0.555-0.558 ms against 0.569-0.571 (profiler). The rule of 4 warps up to 512 programs (cf6fda8) had passed the
    bf16 test of tokens alone vs in a batch of 64 (tests/models/test_quality_gpu.py, the embedded model's 2 KV
    heads: 2 against 128 programs) at 99.23%, where 2 warps at 9-512 programs beside batch 1's 4 read 98.61% (its
    bar is 99%).

    Stages set how far ahead a step's K and V are copied: Triton 3.6's pipeliner splits the stages over the chain
    of two loads (the block ids, then K and V gathered through them), (stages - 1) // 2 steps each, so 2-4 stages
    copy K and V one step ahead into one buffer, after the step before's dots (each step waits for its copy), 5-6
    two steps ahead and 8 three (the TTGIR's buffers). A sliding layer of heads up to 64 wide on the H200 takes 2
    warps at every batch size as well (its rows' bits then no longer depend on the batch through the warps), 6
    stages up to 256 programs (the window's two 64-key steps both in flight from the start) and 4 beyond, the KV
    heads on the fastest axis: in the H200 sweep of 2026-12-01 (fifth session, `decode_attention_sweep.py
    --windows 128`, two runs) gpt-oss's 128-key window at 8, 16 and 32 sequences took 3.85, 4.81 and 5.63-5.73 us
    against 4.11-4.25, 5.16-5.27 and 6.22-6.36 with the H100's rule (4 warps, 2 stages; SDPA 3.74-3.81, 4.78-4.83,
    5.90-6.05), the same at 1-4 sequences (3.64-3.75 us), 7.79 against 7.90-8.00 at 64 and the same from 128 on.
    In the decode step's kernel (RoPE and the KV write fused in, `--rotary`) the rule gained only 1-3% at 8-32
    sequences and read 3% slower at 1 (4.33-4.53 against 4.22-4.40 us), the new token's write then standing before
    the span's copies; `bench generate`'s batch-1 and batch-16 steps did not move (their attention 0.157-0.158 and
    0.254-0.255 ms against 0.159-0.161 and 0.255).
    Elsewhere a sliding layer keeps the H100's rule: 4 warps up to 512 programs, where they were 4-7% faster at 1-8
    sequences; its rows' bits may change beyond 512 (gpt-oss from 65 sequences), as the H100's full layers' do.

    Heads of 65-128 (Qwen3-30B-A3B: 4 KV heads of 128; Mixtral: 8) in full layers on the H200, above 8 programs: 4
    stages and the KV heads on the fastest axis (the H100's rule: 2 stages, in order), the warps unchanged, so no bit
    changes. On the H200 sweep of 2026-12-01 (third session, `decode_attention_sweep.py --heads`, 1-256 sequences of
    1k-16k keys, the default split counts) it took 0.92-1.00 of the former config's time (256 x 4k: Qwen3 494.2
    against 519.1 us, Mixtral 968.9 against 1,049.1; 256 x 1k 129.4 against 134.3 and 248.7 against 270.3). 2 warps
    with 4 stages read as fast (490.7, 980.5), but in Qwen3's model (12 layers, `bench generate`) the batch-1 step's
    attention, with RoPE and the KV write, took 0.104 against 0.096 ms, and 2 warps at every batch size would
    change a row's bits against the 4 warps of batch 1. The H100 was not measured; sliding layers keep its rule.

    The H100's full layers of heads up to 64 wide (and any other GPU's but the H200's) take 2 warps at every batch
    size since 2026-12-05 (third session), with the KV heads on the fastest axis: 4 stages up to 191 programs, 8
    where one split runs 192-255 (`decode_num_splits`: gpt-oss at 24-31 sequences), 6 at 256-512, 4 beyond. Other
    GPUs take these configs unmeasured, while their split count keeps the multiprocessor rule. In the
    H100 sweep (`decode_attention_sweep.py`, two runs, gpt-oss shapes, 1-256 sequences of 1k-16k keys,
    `docs/runs/2026-12-05c-session/call2_h100/`) 2 warps and 4 stages read level with the former rule or faster
    everywhere (batch 1: 4.70-5.13 against 4.83-5.12 us at 1k, 7.19-7.44 against 7.39-7.59 at 4k, 16.2 against
    16.7-16.8 at 16k); one split with 8 stages at 24 sequences 21.2 against 23.7 us at 1k, 71.9 against 76.2 at 4k;
    with 6 stages at 32 sequences 26.5 against 29.3 at 1k (SDPA 26.1-26.7), 93.2 against 95.7 at 4k; 6 stages at
    48 sequences 37.8-38.1 against 39.0-40.0 at 1k, 137.8-137.9 against 144.4-144.7 at 4k, 536.6-537.8 against
    562.6-563.0 at 16k. `bench attention` (call 3 there): 32 x 1k 26.3 against 29.3 us, 32-64 sequences 1-3% faster
    at 4k-16k, the rest level. One warp count at every batch size also keeps a row's bits from moving with the
    batch: the bf16 invariance test (alone against a batch of 64) read 99.15% against the former rule's 98.38%
    (4 warps at batch 1, 2 from 65 programs on; bar 99%)."""
    block_n = 64 if head_dim <= 128 else 32
    programs = batch * num_kv_heads
    if 64 < head_dim <= 128 and window == 0 and "H200" in device_name and programs > 8:  # Qwen3's, Mixtral's heads
        return DecodeLaunchConfig(block_n, 4, 4, True)
    if head_dim <= 64 and window > 0 and "H200" in device_name:  # 2 warps at every batch size, K/V 2 steps ahead
        return DecodeLaunchConfig(block_n, 2, 6 if programs <= 256 else 4, True)
    if head_dim <= 64 and window == 0 and "H200" in device_name:  # 2 warps at every batch size
        one_split_few = H200_ONE_SPLIT_PROGRAMS <= programs < 3 * H200_ONE_SPLIT_PROGRAMS // 2  # 1.9-2.9 an SM
        stages = 4 if programs <= 8 or programs > 512 else 8 if one_split_few else 6
        return DecodeLaunchConfig(block_n, 2, stages, True)
    if head_dim <= 64 and window == 0:  # the H100's full layers: 2 warps at every batch size
        stages = 8 if H100_ONE_SPLIT_PROGRAMS <= programs < 256 else 6 if 256 <= programs <= 512 else 4
        return DecodeLaunchConfig(block_n, 2, stages, True)
    if head_dim > 64 or programs <= 8 or (window > 0 and programs <= 256):
        return DecodeLaunchConfig(block_n=block_n)
    if programs <= 512:
        return DecodeLaunchConfig(block_n, 4, 3, True)
    return DecodeLaunchConfig(block_n, 2, 4, True)


@functools.lru_cache(maxsize=8)
def gpu_name(device: torch.device) -> str:
    """`torch.cuda.get_device_name` (cached), or "cpu"."""
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"


@functools.lru_cache(maxsize=8)
def _num_sms(device: torch.device) -> int:
    return torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 4


WINDOW_KEYS_PER_SPLIT = 128  # a sliding layer splits its window only in spans of at least this many keys


H200_ONE_SPLIT_PROGRAMS = 256  # on the H200 a full layer takes one split from this many programs on
H100_ONE_SPLIT_PROGRAMS = 192  # on the H100 from this many (1.45 a multiprocessor)


def decode_num_splits(batch: int, num_kv_heads: int, device: torch.device, max_splits: int = 64,
                      window: int = 0, device_name: str | None = None, head_dim: int = 64) -> int:
    """Splits of each sequence's context: enough programs for about two per multiprocessor, a power of two (a
    function of the batch size and the layer's window only, so a CUDA graph captured for a batch size keeps it).

    Up to 64: on the H100 gpt-oss's lone sequence (8 KV heads, so 64 splits) read 16k keys in 16.9-18.6 us against
    20.9-21.9 with 32 (SDPA 17.6-18.1) and 4k in 7.4-7.6 against 8.1-8.2 us, at the price of 0.5-0.6 us at 1k
    (5.0-5.1 against 4.5-4.6; SDPA 5.6-5.9): a span holds at least one 64-key tile, so a short context's extra
    splits are programs without keys and wider combines. 64 applies up to 8 (sequence, KV head) pairs on 132
    multiprocessors: gpt-oss (8 KV heads) at batch 1 only; 4 KV heads (Qwen3-30B-A3B) at batch 1 and 2, with the
    same grid of 512 programs (not measured on that model).

    A sliding layer splits its window in spans of at least WINDOW_KEYS_PER_SPLIT keys (two 64-key tiles, as a full
    layer's splits hold at batch 1 from an 8k context on; a 4,096-key window takes 32): gpt-oss's
    128 keys are one program's two tiles at every batch size, so no combine launch. Only the 128-key window was
    measured. At batch 1 the full layers' rule gave 32
    splits, two of them with a tile, then the combine: 3.9-4.0 us against SDPA's 3.6-3.7; one split takes 3.5-3.6 us,
    and at batch 8 4.0-4.1 us where it took 4.7-4.8 (H100, `bench attention`, docs/benchmarks.md). A window's rows
    also group their keys alike at every batch size this way (batch >= 33 took one split already).

    On the H200 (`device_name`, default `gpu_name(device)`) a full layer of heads up to 64 wide (the H200's launch
    rule's too; others were not measured) takes one split from H200_ONE_SPLIT_PROGRAMS (sequence, KV head) programs
    on, 1.94 a multiprocessor, where the rule above gives two: gpt-oss at 32 sequences
    of 1k, 4k and 16k keys read them in 20.4, 66.6-67.3 and 250.0-250.2 us with one split (and 8 stages), 22.7,
    68.8-69.2 and 251.4-251.8 with two and their combine (SDPA 19.5, 64.4 and 235-243; eighteenth session,
    `docs/runs/2026-11-30r-session/call3_h200/`). At 24 sequences (192 programs, 60 multiprocessors with two) one
    split was 5% slower than two (19.3 against 18.3 us at 1k).

    On the H100 from H100_ONE_SPLIT_PROGRAMS on (2026-12-05 third session, `decode_attention_sweep.py --splits 1,2`,
    2 warps): gpt-oss at 24 sequences read 1k, 4k and 16k keys in 21.2, 71.9 and 273.9 us with one split and 8
    stages against 23.7, 76.2 and 284.8 with the former two splits and 4 warps (272.5 with two splits, 2 warps and
    6 stages at 16k); at 32 sequences 26.5, 93.2 and 360.4 us with one split and 6 stages against 29.3, 95.7 and
    362.1 (SDPA 26.1-26.7 at 1k)."""
    programs = batch * num_kv_heads
    if window == 0 and head_dim <= 64 and programs >= H100_ONE_SPLIT_PROGRAMS:
        name = device_name if device_name is not None else gpu_name(device)
        if ("H200" in name and programs >= H200_ONE_SPLIT_PROGRAMS) or "H100" in name:
            return 1
    want = -(-2 * _num_sms(device) // max(programs, 1))
    splits = min(max_splits, 1 << (want - 1).bit_length()) if want > 1 else 1  # next power of two
    if window > 0:
        spans = window // WINDOW_KEYS_PER_SPLIT
        splits = min(splits, 1 << max(spans.bit_length() - 1, 0))  # the largest power of two <= spans, or 1
    return splits
