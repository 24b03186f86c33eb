"""PermutationCache: gather indices built once per (transform, shape, parameters, device), applied to
all experts of a layer in one batched gather, in place, chunked along the expert dimension.

A layout transform of one expert is a *gather over units*: the expert's tensor is viewed as
`[units, unit]` (a unit is a run of `unit` contiguous elements: a row of packed bytes, one scale byte,
one bias value) and

    dst.view(units, unit)[u] = src.view(units, unit)[index[u]]        index: int64 [units]

Every expert of a layer shares the same transform, so the whole parameter `[E, ...]` is viewed as
`[E, units, unit]` and permuted with ONE `torch.index_select(x, 1, index)` per chunk of experts. The
result overwrites the chunk's own storage (a permutation of an expert never reads another expert),
so the parameter is never duplicated: peak transient memory is one chunk, at most `budget_bytes`
(or one expert, when a single expert is larger than the budget).

The index depends only on the transform's name, the per-expert shape `(units, unit)`, the layout
parameters and the device, never on the layer or the expert, so a model with L layers builds each
index once: `misses` equals the number of distinct keys and every other use is a `hit`.

Disabled (constructor flag `enabled=False`, or `QUICKMOE_PERMUTATION_CACHE=0` for the default
instance) the index is rebuilt for every expert and applied expert by expert: the slow path that the
cold-start bench's `--compare-uncached` measures. Both paths give bit-identical results.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

logger = logging.getLogger(__name__)

ENV_VAR = "QUICKMOE_PERMUTATION_CACHE"
DEFAULT_BUDGET_BYTES = 256 << 20  # transient memory of one chunk of permuted experts

LayoutParams = tuple[tuple[str, object], ...]


@dataclass(frozen=True)
class Transform:
    """One per-expert gather: `dst[u] = src[index[u]]` over `units` units of `unit` contiguous elements.

    `build_index()` returns the int64 [units] index on the CPU (vectorised torch ops, no Python loop
    over rows); it must be a pure function of `name`, `units`, `unit` and `params`, which make the key.
    """

    name: str
    units: int
    unit: int
    params: LayoutParams
    build_index: Callable[[], torch.Tensor] = field(compare=False, hash=False, repr=False)

    @property
    def numel(self) -> int:
        """Elements of one expert."""
        return self.units * self.unit


@dataclass(frozen=True)
class PermutationKey:
    """What an index depends on: transform name, per-expert shape (units, unit), parameters, device."""

    transform: str
    shape: tuple[int, int]
    params: LayoutParams
    device: str


@dataclass(frozen=True)
class PermutationCacheStats:
    """Counters of a PermutationCache. Disabled, every per-expert index build counts as a miss."""

    enabled: bool
    hits: int
    misses: int
    entries: int
    index_bytes: int
    gathers: int  # index_select calls issued (one per chunk of experts when enabled, one per expert off)


def _env_enabled() -> bool:
    value = os.environ.get(ENV_VAR, "1").strip().lower()
    return value not in ("0", "false", "off", "no")


class PermutationCache:
    """Caches gather indices and applies them to all experts of a parameter in place."""

    def __init__(self, enabled: bool | None = None, *, budget_bytes: int = DEFAULT_BUDGET_BYTES) -> None:
        """`enabled=None` reads `QUICKMOE_PERMUTATION_CACHE` (anything but 0/false/off/no enables it).
        `budget_bytes` bounds the transient buffer of one chunk of experts."""
        if budget_bytes <= 0:
            raise ValueError(f"PermutationCache budget_bytes must be positive, got {budget_bytes}")
        self.enabled = _env_enabled() if enabled is None else enabled
        self.budget_bytes = budget_bytes
        self._indices: dict[PermutationKey, torch.Tensor] = {}
        self._lock = threading.Lock()
        self._hits = 0
        self._misses = 0
        self._gathers = 0

    @staticmethod
    def key(transform: Transform, device: torch.device | str) -> PermutationKey:
        return PermutationKey(transform.name, (transform.units, transform.unit), transform.params, str(device))

    def index(self, transform: Transform, device: torch.device | str) -> torch.Tensor:
        """The int64 [units] index of `transform` on `device`: built on the first use, then reused."""
        key = self.key(transform, device)
        with self._lock:
            cached = self._indices.get(key)
            if cached is not None:
                self._hits += 1
                return cached
        index = self._build(transform, device)
        with self._lock:
            self._misses += 1
            self._indices.setdefault(key, index)
            return self._indices[key]

    def permute_experts_(self, tensor: torch.Tensor, transform: Transform) -> torch.Tensor:
        """Apply `transform` to every expert of `tensor` [E, ...] in place; returns `tensor` flattened
        to [E, units * unit] (same storage), for the caller to view in its kernel shape."""
        if not tensor.is_contiguous():
            raise ValueError(f"permute_experts_ needs a contiguous tensor, got strides {tensor.stride()}")
        experts = tensor.shape[0]
        if tensor.numel() != experts * transform.numel:
            raise ValueError(f"transform {transform.name} expects {transform.units} x {transform.unit} elements per "
                             f"expert, got a tensor of shape {tuple(tensor.shape)}")
        flat = _as_wide_units(tensor.view(experts, transform.units, transform.unit))  # [E, units, w]
        if self.enabled:
            index = self.index(transform, tensor.device)  # [units]
            per_expert = transform.numel * tensor.element_size()
            chunk = max(1, self.budget_bytes // per_expert)
            for start in range(0, experts, chunk):  # chunks along E bound the transient buffer
                part = flat[start:start + chunk]  # [e, units, w], a view of the parameter
                part.copy_(_gather_units(part, index))  # one batched gather for e experts
                self._count_gather()
        else:
            for expert in range(experts):  # the uncached path: index rebuilt for every expert
                index = self._build(transform, tensor.device)
                with self._lock:
                    self._misses += 1
                part = flat[expert:expert + 1]  # [1, units, w]
                part.copy_(_gather_units(part, index))
                self._count_gather()
        return tensor.view(experts, transform.numel)

    def gather_experts(self, src: torch.Tensor, transform: Transform, out: torch.Tensor) -> torch.Tensor:
        """out[e] (as [units, unit]) = src[e] (as [src units, unit])[index] for every expert e: a gather into a
        layout of another size (e.g. one scale per block of rows -> one per row). `transform.params` must name
        whatever of src's shape the index depends on (it is the key). Chunked along the experts like
        `permute_experts_` (one batched gather per chunk; per expert, index rebuilt, when disabled)."""
        experts = src.shape[0]
        if out.shape[0] != experts or out.numel() != experts * transform.numel or not out.is_contiguous():
            raise ValueError(f"transform {transform.name} writes {transform.units} x {transform.unit} elements per "
                             f"expert into a contiguous [E, ...] tensor, got {tuple(out.shape)}")
        if src.numel() % (experts * transform.unit):
            raise ValueError(f"transform {transform.name}: source {tuple(src.shape)} is not whole units of "
                             f"{transform.unit}")
        src_units = src.reshape(experts, -1, transform.unit)  # [E, S, unit]
        dst_units = out.view(experts, transform.units, transform.unit)  # [E, units, unit]
        if self.enabled:
            index = self.index(transform, src.device)
            chunk = max(1, self.budget_bytes // max(1, transform.numel * out.element_size()))
            for start in range(0, experts, chunk):
                part = slice(start, start + chunk)
                dst_units[part].copy_(torch.index_select(src_units[part], 1, index))
                self._count_gather()
        else:
            for expert in range(experts):
                index = self._build(transform, src.device)
                with self._lock:
                    self._misses += 1
                dst_units[expert:expert + 1].copy_(torch.index_select(src_units[expert:expert + 1], 1, index))
                self._count_gather()
        return out

    def stats(self) -> PermutationCacheStats:
        with self._lock:
            index_bytes = sum(t.numel() * t.element_size() for t in self._indices.values())
            return PermutationCacheStats(enabled=self.enabled, hits=self._hits, misses=self._misses,
                                         entries=len(self._indices), index_bytes=index_bytes, gathers=self._gathers)

    def clear(self, *, reset_stats: bool = False) -> None:
        """Drop the cached indices (e.g. after processing, to free their device memory)."""
        with self._lock:
            self._indices.clear()
            if reset_stats:
                self._hits = self._misses = self._gathers = 0

    def _count_gather(self) -> None:
        with self._lock:
            self._gathers += 1

    @staticmethod
    def _build(transform: Transform, device: torch.device | str) -> torch.Tensor:
        index = transform.build_index()
        if index.dtype != torch.int64 or index.shape != (transform.units,):
            raise AssertionError(f"transform {transform.name} built an index of {index.dtype} "
                                 f"{tuple(index.shape)}, expected int64 ({transform.units},)")
        return index.to(device)


def _as_wide_units(units: torch.Tensor) -> torch.Tensor:
    """[E, units, unit] -> the same bytes as [E, units, w] of the widest integer dtype dividing a unit's
    bytes (a 1440-byte row of packed FP4 moves as 180 int64): bit-identical, fewer elements to gather."""
    unit_bytes = units.shape[-1] * units.element_size()
    for wide in (torch.int64, torch.int32, torch.int16, torch.uint8):
        if unit_bytes % wide.itemsize == 0:
            return units.view(torch.uint8).view(wide) if units.element_size() != wide.itemsize else units.view(wide)
    raise AssertionError("unreachable: every unit is a whole number of bytes")


def _gather_units(part: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """part [e, units, w] -> part[:, index] as a new tensor, for all e experts at once."""
    if part.shape[-1] == 1:  # single-element units (scale bytes): a flat gather is the fast kernel
        flat = part.view(part.shape[0], part.shape[1])  # [e, units]
        return torch.gather(flat, 1, index.expand(part.shape[0], -1)).view(part.shape)
    return torch.index_select(part, 1, index)


_default: PermutationCache | None = None
_default_lock = threading.Lock()


def default_permutation_cache() -> PermutationCache:
    """The process-wide cache (created on first use; `QUICKMOE_PERMUTATION_CACHE=0` disables it)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = PermutationCache()
            logger.debug("default PermutationCache created (enabled=%s)", _default.enabled)
        return _default


__all__ = ["DEFAULT_BUDGET_BYTES", "ENV_VAR", "PermutationCache", "PermutationCacheStats", "PermutationKey",
           "Transform", "default_permutation_cache"]
