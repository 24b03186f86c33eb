"""Random contents of synthetic checkpoints, generated chunk by chunk.

Every chunk's generator is seeded from (seed, tensor name, chunk index), so the bytes depend on
nothing else (not on thread timing, process or machine). Chunks are at most `CHUNK_ELEMENTS` elements
of a tensor, or one expert's matrix for expert tensors, which are generated per expert so that the bf16
experts can be made from exactly the MXFP4 experts' streams. `tensor_chunks` runs the chunks on a few
threads and yields them in file order, with a bounded look-ahead (bounded memory).

What the values are (so activations stay finite and meaningful through every layer): linear weights
~ N(0, 1/in_features), biases ~ N(0, 0.02^2), norms ~ N(1, 0.05^2), embeddings and sinks ~ N(0, 1), router
weights ~ N(0, 1/hidden) (logits spread ~ N(0, 1) over the experts) with a N(0, 0.1^2) bias, and MXFP4
experts of uniform random codes whose E8M0 scales (one step apart between random blocks) give an
effective std ~ 1/sqrt(in_features). bf16 normals are drawn by a 65536-entry quantile table indexed by
random 16-bit words (tails to ~4.3 std), several times faster than a normal sampler.
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from quickmoe.checkpoint.safetensors_writer import TensorSpec
from quickmoe.formats.mxfp4 import BLOCK_SIZE, E2M1_LUT, E8M0_BIAS, dequantize_mxfp4

CHUNK_ELEMENTS = 1 << 24  # elements per chunk of a non-expert tensor (32 MiB of bf16); part of the byte stream
# rms of a uniformly random E2M1 code, and of a scale that is 2**b or 2**(b-1) with equal odds
_E2M1_RMS = math.sqrt(sum(v * v for v in E2M1_LUT) / len(E2M1_LUT))
_SCALE_SPREAD_RMS = math.sqrt((1 + 0.25) / 2)



@dataclass(frozen=True)
class Fill:
    """How a tensor is filled. kind: normal (bf16 N(mean, std)), fp4 (uniform random codes), e8m0
    (scales for an effective weight std of 1/sqrt(k)), dequant (bf16 experts made from the MXFP4 blocks
    and scales named `source`_blocks / `source`_scales, transposed to in x out), custom (`make(seed)` returns
    the whole tensor's bytes: the quantized formats of checkpoint/random_quantized.py; `start(seed)`, if given,
    is called when the job is queued, so work it shares with other tensors can begin before a thread takes it)."""

    kind: str
    mean: float = 0.0
    std: float = 0.0
    k: int = 0
    source: str = ""
    make: Callable[[int], np.ndarray] | None = field(default=None, compare=False)
    start: Callable[[int], None] | None = field(default=None, compare=False)

    @property
    def per_expert(self) -> bool:
        """Generated one expert (dim 0 slice) at a time, so bf16 and MXFP4 experts share their streams."""
        return self.kind in ("fp4", "e8m0", "dequant")


def linear_weight_std(in_features: int) -> float:
    """The std of a linear weight [out, in]: each output ~ N(0, |x|^2 / in)."""
    return in_features ** -0.5


def fill_for(spec: TensorSpec) -> Fill:
    """The fill rule of a checkpoint tensor, from its name (and its shape for the scaling)."""
    name, shape = spec.name, spec.shape
    if name.endswith("norm.weight"):  # layernorms, the final norm, Qwen3's per-head q_norm / k_norm
        return Fill("normal", mean=1.0, std=0.05)
    if name.endswith(("_proj.weight", "router.weight", "lm_head.weight", ".gate.weight", ".w1.weight", ".w2.weight",
                      ".w3.weight")):  # [out, in]: projections, routers (gpt-oss router, Qwen/Mixtral gate), experts
        return Fill("normal", std=linear_weight_std(shape[1]))
    if name.endswith(("_proj.bias", "_proj_bias")):  # attention and expert biases
        return Fill("normal", std=0.02)
    if name.endswith("router.bias"):
        return Fill("normal", std=0.1)
    if name.endswith(("embed_tokens.weight", "sinks")):
        return Fill("normal", std=1.0)
    if name.endswith("_proj_blocks"):
        return Fill("fp4")
    if name.endswith("_proj_scales"):  # [E, N, K/32]
        return Fill("e8m0", k=shape[-1] * BLOCK_SIZE)
    if name.endswith((".gate_up_proj", ".down_proj")):  # bf16 experts [E, K, N]
        if shape[1] % BLOCK_SIZE == 0:
            return Fill("dequant", k=shape[1], source=name)
        return Fill("normal", std=shape[1] ** -0.5)  # K not a multiple of 32: no MXFP4 twin
    raise ValueError(f"no fill rule for tensor {name!r}")


def _rng(seed: int, name: str, unit: int) -> np.random.PCG64:
    """The bit generator of chunk `unit` of tensor `name` (stable across processes and versions of Python)."""
    key = hashlib.sha256(f"quickmoe-synth/{seed}/{name}".encode()).digest()
    return np.random.PCG64(np.random.SeedSequence(int.from_bytes(key[:16], "little"), spawn_key=(unit,)))


def _random_bytes(seed: int, name: str, unit: int, n: int) -> np.ndarray:
    """n uniformly random bytes (uint8 [n])."""
    return _rng(seed, name, unit).random_raw((n + 7) // 8).view(np.uint8)[:n]


@functools.lru_cache(maxsize=64)
def _normal_bf16_table(mean: float, std: float) -> np.ndarray:
    """uint16 [65536]: bf16 bits of mean + std * the normal quantiles at (i + 0.5) / 65536, so a uniformly
    random 16-bit index draws from N(mean, std^2) (tails to ~4.3 std) at a table lookup's cost."""
    p = (torch.arange(65536, dtype=torch.float64) + 0.5) / 65536
    values = torch.special.ndtri(p) * std + mean
    table = values.to(torch.bfloat16).view(torch.int16).numpy().view("<u2").copy()
    table.flags.writeable = False  # shared by every thread
    return table


def _e8m0_base(k: int) -> int:
    """Scale byte b such that codes times 2**(b-127) or 2**(b-128) have std ~ 1/sqrt(k)."""
    exponent = round(math.log2(k ** -0.5 / (_E2M1_RMS * _SCALE_SPREAD_RMS)))
    return min(max(E8M0_BIAS + exponent, 1), 254)


def _e8m0_chunk(seed: int, name: str, unit: int, n: int, k: int) -> np.ndarray:
    """n E8M0 scale bytes for an in-dimension k: the base scale, one step smaller for a random half."""
    return np.uint8(_e8m0_base(k)) - (_random_bytes(seed, name, unit, n) & np.uint8(1))


def _chunk(fill: Fill, spec: TensorSpec, seed: int, unit: int, n: int) -> np.ndarray:
    """The bytes of chunk `unit` (n elements) of tensor `spec`."""
    if fill.kind == "normal":
        index = _random_bytes(seed, spec.name, unit, 2 * n).view("<u2")  # [n] uniform 16-bit
        return _normal_bf16_table(fill.mean, fill.std)[index]
    if fill.kind == "fp4":
        return _random_bytes(seed, spec.name, unit, n)
    if fill.kind == "e8m0":
        return _e8m0_chunk(seed, spec.name, unit, n, fill.k)
    if fill.kind == "dequant":  # expert `unit` of bf16 experts [E, K, N], from MXFP4 [E, N, K/32, 16]
        k, out_f = spec.shape[1], spec.shape[2]
        blocks = _random_bytes(seed, f"{fill.source}_blocks", unit, n // 2)
        scales = _e8m0_chunk(seed, f"{fill.source}_scales", unit, n // BLOCK_SIZE, k)
        w = dequantize_mxfp4(torch.from_numpy(blocks).view(out_f, k // BLOCK_SIZE, 16),  # [N, K/32, 16]
                             torch.from_numpy(scales).view(out_f, k // BLOCK_SIZE), dtype=torch.bfloat16)
        return w.t().contiguous().view(torch.int16).numpy()  # [N, K] -> [K, N]
    raise ValueError(f"unknown fill kind {fill.kind!r}")


def normal_bf16_values(seed: int, name: str, shape: Sequence[int], std: float) -> torch.Tensor:
    """The values a `normal` fill gives tensor `name` (bf16 [shape]), chunk streams included: a quantized
    checkpoint quantizes exactly the weights of the bf16 one of the same seed."""
    total = math.prod(shape)
    table = _normal_bf16_table(0.0, std)
    parts = [table[_random_bytes(seed, name, i, 2 * min(CHUNK_ELEMENTS, total - start)).view("<u2")]
             for i, start in enumerate(range(0, total, CHUNK_ELEMENTS))]
    flat = np.concatenate(parts) if parts else np.zeros(0, dtype="<u2")
    return torch.from_numpy(flat.view(np.int16).copy()).view(torch.bfloat16).reshape(tuple(shape))


def tensor_chunks(specs: Iterable[TensorSpec], seed: int, workers: int,
                  fill_rule: Callable[[TensorSpec], Fill] | None = None) -> Iterator[tuple[str, Any]]:
    """`(tensor name, bytes-like)` for every chunk of every tensor of `specs`, in order, generated on
    `workers` threads (1: in the calling thread). The bytes depend only on `seed` and the specs (and the
    `fill_rule`: by default `fill_for`, from the tensor names)."""
    return _in_order(_jobs(specs, seed, fill_rule or fill_for), workers, lookahead=LOOKAHEAD_PER_WORKER * workers)


# Jobs queued ahead of the writer per thread. A quantized weight is 2-4 consecutive jobs (the weight, its scales)
# sharing one quantization, which their fill starts when they are queued (`Fill.start`): the look-ahead is what
# runs several weights' quantizations at once (one at a time before: the NVFP4 Qwen3-30B-A3B checkpoint took 390 s
# on the H100 machine's 16 cores, the parts of one weight holding every thread). Memory: at most that many results
# wait for the writer, e.g. 32 chunks of 32 MiB (1 GiB) at 8 threads.
LOOKAHEAD_PER_WORKER = 4


def _jobs(specs: Iterable[TensorSpec], seed: int,
          fill_rule: Callable[[TensorSpec], Fill]) -> Iterator[tuple[str, Callable[[], np.ndarray]]]:
    """(tensor name, chunk maker) for every chunk of every tensor, in file order."""
    for spec in specs:
        fill = fill_rule(spec)
        total = math.prod(spec.shape)
        if fill.kind == "custom":
            assert fill.make is not None
            if fill.start is not None:
                fill.start(seed)
            yield spec.name, functools.partial(fill.make, seed)
            continue
        if fill.per_expert:
            per = math.prod(spec.shape[1:])
            bounds = [(e, per) for e in range(spec.shape[0])] if per else []
        else:
            bounds = [(i, min(CHUNK_ELEMENTS, total - start))
                      for i, start in enumerate(range(0, total, CHUNK_ELEMENTS))]
        for unit, n in bounds:
            yield spec.name, functools.partial(_chunk, fill, spec, seed, unit, n)


def _in_order(jobs: Iterator[tuple[str, Callable[[], np.ndarray]]], workers: int,
              lookahead: int | None = None) -> Iterator[tuple[str, Any]]:
    """Run the jobs on `workers` threads with at most `lookahead` (default workers + 1) jobs queued or running
    ahead of the one the caller waits for; yield their results in job order."""
    if workers <= 1:
        for name, make in jobs:
            yield name, make()
        return
    with ThreadPoolExecutor(workers, thread_name_prefix="quickmoe-synth") as pool:
        pending: deque[tuple[str, Future]] = deque()
        try:
            for name, make in jobs:
                pending.append((name, pool.submit(make)))
                if len(pending) > (workers + 1 if lookahead is None else max(lookahead, workers + 1)):
                    done_name, fut = pending.popleft()
                    yield done_name, fut.result()
            while pending:
                done_name, fut = pending.popleft()
                yield done_name, fut.result()
        finally:
            for _, fut in pending:
                fut.cancel()
