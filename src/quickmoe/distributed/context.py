"""`ParallelContext`: this process's place among the ranks of one model, and the collectives a layer needs.

A frozen value made once by the runner (from torch.distributed's groups) and handed to every layer that
shards itself. With world size 1 (`SINGLE`) every collective returns its input untouched and every shard is
the whole dimension: the single-process path runs no collective and copies nothing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from quickmoe.distributed.shards import Shard, even_shard
from quickmoe.errors import ConfigError

__all__ = ["SINGLE", "ParallelContext"]


@dataclass(frozen=True)
class ParallelContext:
    """Rank `rank` of `world_size`. `expert_parallel`: MoE experts are split across the ranks (whole experts
    each) instead of each expert's intermediate dimension. `group`: the process group of the device tensors
    (NCCL on GPUs, gloo on CPU); `cpu_group`: a gloo group for step inputs sent as Python objects (the same
    group on CPU). `local_rank`: this rank's GPU on its host. Without groups a context still says how every layer
    splits (a dry run of the split on the meta device, `executor.launch.check_split`); its collectives need them."""

    rank: int = 0
    world_size: int = 1
    expert_parallel: bool = False
    group: Any = None
    cpu_group: Any = None
    local_rank: int = 0  # this rank's GPU on its host

    def __post_init__(self) -> None:
        if isinstance(self.world_size, bool) or not isinstance(self.world_size, int) or self.world_size < 1:
            raise ConfigError(f"tensor_parallel_size = {self.world_size!r}: expected a positive integer")
        if not 0 <= self.rank < self.world_size:
            raise ConfigError(f"rank = {self.rank!r}: expected 0 <= rank < world size {self.world_size}")

    @property
    def is_driver(self) -> bool:
        """Rank 0: runs the scheduler and samples; the others follow its steps."""
        return self.rank == 0

    @property
    def sharded(self) -> bool:
        return self.world_size > 1

    def shard(self, total: int, *, field: str, unit: int = 1, exact: bool = False) -> Shard:
        """This rank's contiguous share of a dimension of `total` (the whole of it with one rank)."""
        if self.world_size == 1:
            return Shard(0, total, total)
        return even_shard(total, self.rank, self.world_size, field=field, unit=unit, exact=exact)

    def kv_head_shard(self, num_heads: int, num_kv_heads: int) -> Shard:
        """The KV heads this rank's query heads read: an even share when the ranks divide them, else the one
        KV head of this rank's query heads (replicated on world_size / num_kv_heads ranks)."""
        if self.world_size == 1:
            return Shard(0, num_kv_heads, num_kv_heads)
        if num_kv_heads % self.world_size == 0:
            return self.shard(num_kv_heads, field="num_key_value_heads", exact=True)
        if self.world_size % num_kv_heads:
            raise ConfigError(f"num_key_value_heads = {num_kv_heads}: expected a multiple or a divisor of the "
                              f"tensor-parallel size {self.world_size}")
        q = self.shard(num_heads, field="num_attention_heads", exact=True)
        group = num_heads // num_kv_heads  # query heads per KV head
        return Shard(q.start // group, 1, num_kv_heads)

    # -- collectives (identity with one rank) ----------------------------------------------------------
    def all_reduce(self, x: torch.Tensor) -> torch.Tensor:
        """Sum of `x` over the ranks, in place (the block's one reduction)."""
        if self.world_size == 1:
            return x
        dist.all_reduce(x, group=self.group)
        return x

    def all_gather_last(self, x: torch.Tensor, sizes: list[int]) -> torch.Tensor:
        """[..., sizes[rank]] on each rank -> [..., sum(sizes)] on every rank (the vocabulary-parallel LM head).
        Shards of unequal size are padded to the largest for the gather and trimmed after."""
        if self.world_size == 1:
            return x
        width = max(sizes)
        if x.shape[-1] != width:
            x = torch.nn.functional.pad(x, (0, width - x.shape[-1]))
        x = x.contiguous()
        parts = [torch.empty_like(x) for _ in range(self.world_size)]
        dist.all_gather(parts, x, group=self.group)
        return torch.cat([p[..., :n] for p, n in zip(parts, sizes)], dim=-1)

    def min_over_ranks(self, value: int) -> int:
        """The smallest of every rank's `value` (a host integer, over the CPU group): sizes all ranks must share,
        such as the KV cache's budget (rank 0 schedules blocks every rank must hold)."""
        if self.world_size == 1:
            return value
        values: list[int | None] = [None] * self.world_size
        dist.all_gather_object(values, value, group=self.cpu_group)
        return min(v for v in values if v is not None)

    def broadcast_(self, x: torch.Tensor) -> torch.Tensor:
        """Rank 0's `x` into every rank's `x` (in place): the sampled tokens the next step reads."""
        if self.world_size > 1:
            dist.broadcast(x, src=0, group=self.group)
        return x


SINGLE = ParallelContext()
