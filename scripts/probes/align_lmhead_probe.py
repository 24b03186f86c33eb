"""Two small parts of a large decode step, timed on the GPU in CUDA graphs (us a call, medians):

1. The MoE alignment at decode-batch sizes: the one-program kernel (`moe_align`, every A <= SINGLE_PROGRAM_MAX)
   against the three chunked launches prefill sizes take (`_moe_align_chunked`), which sort their chunks in
   parallel; results checked equal first. Qwen3-30B-A3B's batch-256 step aligns A = 2,048 assignments over 128
   experts in one program (17.7 us a layer on the H200, 2026-12-03).
2. The LM head and the greedy pick: `F.linear(h, W).float()` then argmax of the float32 logits (the engine before
   2026-12-03 fourth session) against `F.linear(h, W)` then argmax of the bf16 logits, for gpt-oss's and Qwen3's
   vocabularies.

    python3 scripts/probes/align_lmhead_probe.py [--reps 20]
"""

from __future__ import annotations

import argparse
import statistics

import torch
import torch.nn.functional as F

from quickmoe.kernels import moe_align as align_mod


def _time_graph(fn, reps: int, rounds: int = 11) -> float:
    """us a call of fn, captured `reps` times in one CUDA graph (median of `rounds` replays)."""
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(reps):
            fn()
    graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(rounds):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000 / reps)
    return statistics.median(times)


def _topk_ids(tokens: int, k: int, experts: int, absent_from: int | None, gen: torch.Generator) -> torch.Tensor:
    """[T, k] int32 distinct experts per row; rows at and past absent_from get id `experts` (a graph's padding)."""
    scores = torch.rand(tokens, experts, generator=gen)
    ids = scores.topk(k, dim=-1).indices.to(torch.int32)  # [T, k]
    if absent_from is not None:
        ids[absent_from:] = experts
    return ids.cuda()


def align_table(reps: int) -> list[str]:
    gen = torch.Generator().manual_seed(0)
    lines = ["| experts, k | block_m | tokens (real) | A | one program us | chunked us | ratio |",
             "|---|---|---|---|---|---|---|"]
    for experts, k, block_ms in ((128, 8, (16, 64)), (32, 4, (8, 32, 64))):
        for tokens in (64, 128, 256, 512):
            for block_m in block_ms:
                for absent in (False, True):
                    real = tokens * 3 // 4 if absent else None
                    ids = _topk_ids(tokens, k, experts, real, gen)
                    e = experts + 1 if absent else experts  # absent: id `experts`, one past the real ones
                    used = experts
                    one = align_mod.moe_align(ids, e, block_m, absent_last=absent)
                    many = align_mod._moe_align_chunked(ids, e, block_m, used)
                    n = int(one.num_padded.item())
                    same = (n == int(many.num_padded.item())
                            and torch.equal(one.sorted_ids[:n], many.sorted_ids[:n])
                            and torch.equal(one.block_expert[:n // block_m], many.block_expert[:n // block_m]))
                    t_one = _time_graph(lambda: align_mod.moe_align(ids, e, block_m, absent_last=absent), reps)
                    t_many = _time_graph(lambda: align_mod._moe_align_chunked(ids, e, block_m, used), reps)
                    lines.append(f"| {experts}, {k} | {block_m} | {tokens} ({real or tokens}) | {tokens * k} | "
                                 f"{t_one:.2f} | {t_many:.2f}{'' if same else ' DIFFERENT'} | "
                                 f"{t_many / t_one:.2f} |")
                    print(lines[-1], flush=True)
    return lines


def lm_head_table(reps: int) -> list[str]:
    lines = ["| vocab x hidden | B | linear + float + argmax us | linear + argmax (bf16) us | same tokens |",
             "|---|---|---|---|---|"]
    for vocab, hidden in ((201088, 2880), (151936, 2048)):
        weight = torch.randn(vocab, hidden, device="cuda", dtype=torch.bfloat16) / hidden ** 0.5
        for batch in (1, 8, 64, 256):
            h = torch.randn(batch, hidden, device="cuda", dtype=torch.bfloat16)
            same = torch.equal(F.linear(h, weight).float().argmax(-1), F.linear(h, weight).argmax(-1))
            t_float = _time_graph(lambda: F.linear(h, weight).float().argmax(-1), reps)
            t_bf16 = _time_graph(lambda: F.linear(h, weight).argmax(-1), reps)
            lines.append(f"| {vocab} x {hidden} | {batch} | {t_float:.2f} | {t_bf16:.2f} | {same} |")
            print(lines[-1], flush=True)
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=20)
    args = parser.parse_args()
    tables = align_table(args.reps) + [""] + lm_head_table(args.reps)
    print("\n".join(tables))


if __name__ == "__main__":
    main()
