"""The paged KV cache: per layer, K and V tensors [num_blocks, block_size, KV heads, head_dim].

Layers are grouped by what they keep (`KVGroupPlan`): full-attention layers keep every position of a
sequence, sliding-window layers only the window, so a sliding group needs few blocks per sequence whatever
its length. Each group has its own block ids (one `BlockPool` in the `KVBlockManager`) and its layers share
them: block b of the group is row b of each of the group's layers' tensors.

`plan_kv_cache` sizes the groups from a memory budget: a sliding group gets what its sequences can hold at
most (see `sliding_blocks_needed`), full-attention layers share the rest; when the budget is tight, a sliding
group gets no more blocks than the full group (a window's blocks are among its sequence's positions).
`PagedKVCache` allocates them once; the model reads `layer(i)` and `layer_group[i]`. The block ids themselves are handed out by the
engine's `KVBlockManager.for_plan(plan)`.
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass

import torch

from quickmoe.config import ModelConfig
from quickmoe.errors import ConfigError

__all__ = ["KVCachePlan", "KVGroupPlan", "PagedKVCache", "activation_bytes_estimate", "kv_cache_budget",
           "plan_kv_cache", "sliding_blocks_needed"]

CPU_DEFAULT_KV_CACHE_BYTES = 1 << 30


@dataclass(frozen=True)
class KVGroupPlan:
    """Layers sharing block tables: `window` None (full attention) or their sliding window."""

    name: str
    window: int | None
    layers: tuple[int, ...]
    num_blocks: int


@dataclass(frozen=True)
class KVCachePlan:
    """Block size and groups of a paged cache, and what it holds."""

    block_size: int
    groups: tuple[KVGroupPlan, ...]
    bytes_per_block_per_layer: int

    @property
    def nbytes(self) -> int:
        return sum(g.num_blocks * len(g.layers) for g in self.groups) * self.bytes_per_block_per_layer

    @property
    def max_tokens_per_sequence(self) -> int:
        """Positions one sequence can hold in the most constrained full-attention group (inf if none)."""
        full = [g.num_blocks * self.block_size for g in self.groups if g.window is None]
        return min(full) if full else math.inf


def sliding_blocks_needed(window: int, block_size: int, max_num_seqs: int, max_num_batched_tokens: int) -> int:
    """Blocks a sliding group needs so that it never runs out before the full-attention group does.

    After a step over positions [s, e), a sequence holds the blocks of positions [s - window + 1, e): at most
    ceil((e - s + window - 2) / block_size) + 1 blocks. Summed over at most `max_num_seqs` sequences whose
    chunks add up to at most one step's token budget, that is at most
    max_num_seqs * (ceil((window - 2) / block_size) + 2) + ceil(max_num_batched_tokens / block_size).
    """
    per_seq = -(-max(window - 2, 0) // block_size) + 2
    return max_num_seqs * per_seq + -(-max_num_batched_tokens // block_size)


def plan_kv_cache(config: ModelConfig, *, dtype: torch.dtype, block_size: int, memory_bytes: int | None,
                  max_num_seqs: int, max_num_batched_tokens: int, num_blocks: int | None = None,
                  max_model_len: int) -> KVCachePlan:
    """Groups of layers by window, sized from `memory_bytes` (or `num_blocks` for the full-attention group).

    Raises ConfigError when the budget cannot hold one sequence of `max_model_len` tokens."""
    element = torch.empty((), dtype=dtype).element_size()
    per_block_layer = 2 * block_size * config.num_key_value_heads * config.head_dim * element  # K and V
    windows: dict[int | None, list[int]] = {}
    for i in range(config.num_hidden_layers):
        windows.setdefault(config.layer_window(i), []).append(i)
    sliding = {w: layers for w, layers in windows.items() if w is not None}
    full_layers = windows.get(None, [])
    full_blocks_for_one = -(-max_model_len // block_size)

    sliding_plans = []
    for window, layers in sorted(sliding.items()):
        need = sliding_blocks_needed(window, block_size, max_num_seqs, max_num_batched_tokens)
        if not full_layers and num_blocks is not None:
            need = num_blocks
        elif not full_layers and memory_bytes is not None:
            # no full-attention layer to give the rest to: the sliding groups share the budget
            per_group_bytes = memory_bytes // len(sliding)
            need = max(need, per_group_bytes // (per_block_layer * len(layers)))
        sliding_plans.append(KVGroupPlan(name=f"sliding{window}", window=window, layers=tuple(layers),
                                         num_blocks=need))
    sliding_bytes = sum(p.num_blocks * len(p.layers) for p in sliding_plans) * per_block_layer

    groups = list(sliding_plans)
    if full_layers:
        if num_blocks is not None:
            full_blocks = num_blocks
        else:
            assert memory_bytes is not None, "either memory_bytes or num_blocks"
            full_blocks = (memory_bytes - sliding_bytes) // (per_block_layer * len(full_layers))
            if any(p.num_blocks > full_blocks for p in sliding_plans):
                # A tight budget (gpt-oss-120b on one 80 GB GPU): a sequence's window is part of its positions, so
                # a sliding group never holds more blocks than the full group; it needs no more than that.
                full_blocks = _full_blocks_sharing(memory_bytes, per_block_layer, len(full_layers),
                                                   [(p.num_blocks, len(p.layers)) for p in sliding_plans])
                sliding_plans = [dataclasses.replace(p, num_blocks=min(p.num_blocks, max(full_blocks, 1)))
                                 for p in sliding_plans]
                groups = list(sliding_plans)
        if full_blocks < full_blocks_for_one:
            have = max(full_blocks, 0) * block_size
            raise ConfigError(
                f"the KV cache holds {have} tokens per sequence ({max(full_blocks, 0)} blocks of {block_size} for "
                f"{len(full_layers)} full-attention layers, {_gib(memory_bytes)} budget), fewer than max_model_len "
                f"= {max_model_len}: lower max_model_len or raise kv_cache_memory / gpu_memory_utilization")
        groups.insert(0, KVGroupPlan(name="full", window=None, layers=tuple(full_layers), num_blocks=full_blocks))
    return KVCachePlan(block_size=block_size, groups=tuple(groups), bytes_per_block_per_layer=per_block_layer)


def _full_blocks_sharing(memory_bytes: int, per_block_layer: int, full_layers: int,
                         sliding: list[tuple[int, int]]) -> int:
    """The largest F with F full blocks plus min(need, F) blocks of each sliding group (need, layers) within
    `memory_bytes`."""
    def fits(f: int) -> bool:
        blocks = f * full_layers + sum(min(need, f) * layers for need, layers in sliding)
        return blocks * per_block_layer <= memory_bytes

    lo, hi = 0, memory_bytes // (per_block_layer * full_layers) + 1  # fits(lo); not fits(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


def activation_bytes_estimate(config: ModelConfig, dtype: torch.dtype, max_num_batched_tokens: int,
                              max_num_seqs: int) -> int:
    """An upper estimate of the transient memory of one full step, kept free of the KV cache: per token the
    residual stream and norms (~8 H), q/k/v and the attention output, the MoE's k routed rows (gate_up
    activations 2I and down outputs H, twice for the kernels' intermediates; or a dense MLP's, if larger); the sampler's tensors over every
    sequence's vocabulary row (float32 logits, probabilities and sorted probabilities, int64 sort order, and
    about four float64 scans); doubled for allocator slack."""
    element = torch.empty((), dtype=dtype).element_size()
    attn = (2 * config.num_attention_heads + 2 * config.num_key_value_heads) * config.head_dim
    moe = config.num_experts_per_tok * 2 * (2 * config.moe_intermediate_size + config.hidden_size)
    if not all(config.is_moe_layer(i) for i in range(config.num_hidden_layers)):  # dense MLP layers (Qwen3)
        moe = max(moe, 2 * (2 * config.intermediate_size + config.hidden_size))
    per_token = element * (8 * config.hidden_size + attn + moe) + 4 * (config.num_local_experts + 64)
    logits = (3 * 4 + 8 + 4 * 8) * config.vocab_size * max_num_seqs
    return 2 * (per_token * max_num_batched_tokens + logits)


def kv_cache_budget(config: ModelConfig, *, dtype: torch.dtype, device: torch.device, kv_cache_memory: int | None,
                    gpu_memory_utilization: float, max_num_batched_tokens: int, max_num_seqs: int) -> int:
    """Bytes for the KV cache: `kv_cache_memory` when given; on CUDA, `gpu_memory_utilization` of the GPU's
    memory minus what is in use now (weights, other processes) and the activations of a full step; on CPU
    1 GiB. Raises ConfigError when nothing is left."""
    if kv_cache_memory is not None:
        available = _available_bytes(device)
        if available is not None and kv_cache_memory > available:
            raise ConfigError(f"engine option 'kv_cache_memory' = {kv_cache_memory} bytes "
                              f"({kv_cache_memory / 2**30:.2f} GiB): more than the {available / 2**30:.2f} GiB "
                              f"available on {device} (expected at most that)")
        return kv_cache_memory
    if device.type != "cuda":
        return CPU_DEFAULT_KV_CACHE_BYTES
    torch.cuda.empty_cache()  # cached but unused blocks (the re-layout's transient) would count as used
    free, total = torch.cuda.mem_get_info(device)
    activations = activation_bytes_estimate(config, dtype, max_num_batched_tokens, max_num_seqs)
    budget = int(free - total * (1 - gpu_memory_utilization) - activations)
    if budget <= 0:
        raise ConfigError(
            f"no GPU memory left for the KV cache: {free / 2**30:.2f} GiB free of {total / 2**30:.2f} GiB, "
            f"gpu_memory_utilization = {gpu_memory_utilization} keeps {(1 - gpu_memory_utilization) * total / 2**30:.2f} "
            f"GiB back and one step's activations need ~{activations / 2**30:.2f} GiB: raise gpu_memory_utilization, "
            "lower max_num_batched_tokens or set kv_cache_memory")
    return budget


def _available_bytes(device: torch.device) -> int | None:
    """Memory a cache could still take on `device`: free GPU memory, or the host's available memory (Linux
    MemAvailable, else its physical memory); None when unknown."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def _gib(nbytes: int | None) -> str:
    return "no" if nbytes is None else f"{nbytes / 2**30:.2f} GiB"


class PagedKVCache:
    """The cache tensors of a `KVCachePlan`, allocated once: per layer k, v [num_blocks, block_size, KV, D],
    where num_blocks is the layer's group's. `layer_group[i]` is the index in `plan.groups` of layer i's group
    (the step metadata carries one slot mapping and block table per group). head_major: each tensor is a view
    `.permute(0, 2, 1, 3)` of a contiguous [num_blocks, KV, block_size, D] one, so a KV head's positions of a
    block are contiguous (the kernels read the layout off the strides: `kernels/paged_kv_tile.py`); else the
    tensors are contiguous (slot-major). Indexing is the same either way."""

    def __init__(self, config: ModelConfig, plan: KVCachePlan, *, dtype: torch.dtype,
                 device: torch.device | str, head_major: bool = True) -> None:
        self.plan = plan
        self.block_size = plan.block_size
        self.layer_group = [0] * config.num_hidden_layers
        self.keys: list[torch.Tensor] = [torch.empty(0)] * config.num_hidden_layers
        self.values: list[torch.Tensor] = [torch.empty(0)] * config.num_hidden_layers
        self.head_major = head_major
        for g, group in enumerate(plan.groups):
            kv, block = config.num_key_value_heads, plan.block_size
            shape = (group.num_blocks, kv, block, config.head_dim) if head_major else \
                (group.num_blocks, block, kv, config.head_dim)
            for layer in group.layers:
                self.layer_group[layer] = g
                self.keys[layer] = self._tensor(shape, dtype, device)
                self.values[layer] = self._tensor(shape, dtype, device)

    def _tensor(self, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device | str) -> torch.Tensor:
        t = torch.empty(shape, dtype=dtype, device=device)
        return t.permute(0, 2, 1, 3) if self.head_major else t  # [num_blocks, block_size, KV, D] either way

    def layer(self, idx: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.keys[idx], self.values[idx]

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.keys + self.values)

    def describe(self) -> str:
        groups = ", ".join(f"{g.name}: {g.num_blocks} blocks x {len(g.layers)} layers" for g in self.plan.groups)
        layout = "head-major" if self.head_major else "slot-major"
        return f"{self.nbytes / 2**30:.2f} GiB, block size {self.block_size}, {layout} ({groups})"
