"""What the load-time mma-pair encode of MXFP4 expert blocks costs on the GPU: the first Triton launch in a process
(Triton's own start: driver utilities, cache lookup; a trivial kernel), the encode kernel's first launch, and its
steady time over gpt-oss-20b's 13.8 GB of blocks (CUDA events, median of 3). Usage: python3
scripts/probes/encode_probe.py (a probe, not a benchmark)."""

from __future__ import annotations

import statistics
import time

import torch
import triton
import triton.language as tl

from quickmoe.kernels.mxfp4_mma_pairs import encode_mma_pairs_, encode_mma_pairs_ref_


@triton.jit
def _touch(ptr):
    tl.store(ptr, tl.load(ptr) + 1)


def main() -> None:
    torch.cuda.init()
    x = torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    _touch[(1,)](x)
    torch.cuda.synchronize()
    first_triton = time.perf_counter() - t0
    small = torch.randint(0, 256, (1 << 20,), dtype=torch.uint8, device="cuda")
    want = encode_mma_pairs_ref_(small.clone())
    t0 = time.perf_counter()
    encode_mma_pairs_(small)
    torch.cuda.synchronize()
    first_encode = time.perf_counter() - t0
    assert torch.equal(small, want)
    blocks = torch.randint(0, 256, (48, 287 << 20), dtype=torch.uint8, device="cuda")  # 48 x 287 MiB = 13.5 GiB
    times = []
    for _ in range(3):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for row in blocks:  # one launch per tensor, as processing does (48 expert tensors)
            encode_mma_pairs_(row)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    gb = blocks.numel() / 1e9
    print(f"first Triton launch in the process (trivial kernel): {first_triton:.3f} s")
    print(f"first encode launch (its compile or cache load): {first_encode:.3f} s")
    print(f"encode of {gb:.1f} GB in 48 launches: {statistics.median(times):.4f} s "
          f"({2 * gb / statistics.median(times):.0f} GB/s read + write)")


if __name__ == "__main__":
    main()
