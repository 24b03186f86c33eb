"""Quant methods of `FusedMoE` for checkpoints that store every expert's projections as separate tensors
(Qwen3-MoE `mlp.experts.3.gate_proj.weight`, Mixtral `block_sparse_moe.experts.3.w1.weight`): bf16, FP8
block-scaled and NVFP4 (ModelOpt).

Each per-expert tensor is stacked at load by its weight loader into one parameter per projection: gate and
up into `gate_up_proj` [E, 2I, ...] (gate rows [0, I), up rows [I, 2I): a contiguous run of the parameter,
so same-dtype bytes land directly), down into `down_proj` [E, H, ...]. Processing then converts each
parameter, all experts at once, into the kernel layout (`layouts.mxfp4_moe`'s gate/up groups;
`layouts.quantized_moe` for the scales) with indices from the PermutationCache. No bias; SiLU(gate) * up.
"""

from __future__ import annotations

import functools
import logging
import math
import os
from collections.abc import Callable
from dataclasses import dataclass

import torch

from quickmoe.checkpoint.weight_loaders import CheckpointPart, SliceLoader
from quickmoe.errors import ConfigError
from quickmoe.formats.fp8 import FP8_DTYPE
from quickmoe.formats.nvfp4 import NVFP4_BLOCK_SIZE
from quickmoe.forward import custom_ops
from quickmoe.layers.fp8_linear import SCALE_DTYPES
from quickmoe.layers.moe import FusedMoE, absent_experts, expert_shards, mma_pairs_kernel
from quickmoe.layers.sharding import scaled
from quickmoe.layers.weights import declare_weight
from quickmoe.layouts.mxfp4_moe import Mxfp4MoELayout, gate_up_rows_transform
from quickmoe.layouts.permutation_cache import PermutationCache, default_permutation_cache
from quickmoe.layouts.quantized_moe import convert_fp8_experts, convert_nvfp4_experts_

__all__ = ["ExpertNames", "StackedFp8MoEMethod", "StackedNvfp4MoEMethod", "StackedUnquantizedMoEMethod"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ExpertNames:
    """The checkpoint's module names of one expert's projections (`experts.<e>.<gate>.weight`, ...)."""

    gate: str
    up: str
    down: str


# (name suffix, shape, dtype, alternative dtypes) of one expert's checkpoint tensor of a projection
PartSpec = tuple[str, tuple[int, ...], torch.dtype, tuple[torch.dtype, ...]]
# how a part splits with the intermediate channels: (its dim holding them, num, den: num/den elements per channel),
# or None (replicated: per-tensor scales, and the projections whose rows are not intermediate channels)
PartSplit = tuple[int, int, int] | None


def _declare_stacked(layer: FusedMoE, name: str, shape: tuple[int, ...], dtype: torch.dtype,
                     device: torch.device | str, projections: list[tuple[str, int]], part: PartSpec,
                     split: PartSplit = None, dtype_follows_checkpoint: bool = False) -> None:
    """Parameter `name` [E, *shape] (this rank's experts and channels) stacked from `<e>.<projection><suffix>`
    tensors (`part`: their full checkpoint shape): `projections` lists each projection with the number of leading
    rows (of shape[0]) it fills, in order. Expert parallel: the other ranks' experts are declared unread. Tensor
    parallel: each part is narrowed to this rank's channels as `split` says."""
    experts, intermediate = expert_shards(layer)
    narrow = None
    if split is not None and not intermediate.whole:
        dim, num, den = split
        channels = scaled(intermediate, num, den)
        narrow = (dim, channels.start, channels.size)
    parts = _stacked_parts(experts.total, experts.start, experts.size, tuple(projections), part, narrow)
    declare_weight(layer, name, (layer.num_experts, *shape), dtype, device, checkpoint_dtype=part[2],
                   checkpoint_parts=parts, dtype_follows_checkpoint=dtype_follows_checkpoint)


@functools.lru_cache(maxsize=64)
def _stacked_parts(total: int, first: int, count: int, projections: tuple[tuple[str, int], ...], part: PartSpec,
                   narrow: tuple[int, int, int] | None) -> tuple[CheckpointPart, ...]:
    """The parts of one stacked parameter: one checkpoint tensor per expert and projection (the format's), names
    relative to the layer; this rank's experts are [first, first + count) of `total`. Every MoE layer of a model
    has the same (Qwen3-30B-A3B NVFP4: 48 layers x 8 parameters, 73,728 parts), so the immutable tuple is built
    once per model shape and shared."""
    suffix, part_shape, part_dtype, alt = part
    parts = []
    for expert in range(total):
        start, local = 0, expert - first
        own = 0 <= local < count
        for projection, rows in projections:
            loader = SliceLoader(local, (start, start + rows)) if own else None
            parts.append(CheckpointPart(f"{expert}.{projection}{suffix}", part_shape, part_dtype, loader, alt,
                                        narrow if own else None))
            start += rows
    return tuple(parts)


def _use_kernels(layer: FusedMoE, hidden: torch.Tensor) -> bool:
    return layer.kernels == "triton" and (hidden.is_cuda or os.environ.get("TRITON_INTERPRET") == "1")


class _StackedMethod:
    """What the three methods share: the names, the layout, the cache, and the experts call."""

    def __init__(self, names: ExpertNames, layout: Mxfp4MoELayout | None = None,
                 cache: PermutationCache | None = None) -> None:
        self.names = names
        self.layout = layout if layout is not None else Mxfp4MoELayout()
        self._cache = cache
        self.gate_up_group = 0  # 0: not yet processed (the stacked rows are group I)

    def cache(self) -> PermutationCache:
        return self._cache if self._cache is not None else default_permutation_cache()

    def _gate_up(self, layer: FusedMoE) -> list[tuple[str, int]]:
        return [(self.names.gate, layer.intermediate_size), (self.names.up, layer.intermediate_size)]

    def _check_processed(self) -> None:
        if not self.gate_up_group:
            raise RuntimeError("experts used before process_weights_after_loading converted them")

    def _experts(self, layer: FusedMoE, hidden: torch.Tensor, topk_weights: torch.Tensor, topk_ids: torch.Tensor,
                 w1: torch.Tensor, w2: torch.Tensor, w1_scales: torch.Tensor | None = None,
                 w2_scales: torch.Tensor | None = None, w1_row_scale: torch.Tensor | None = None,
                 w2_row_scale: torch.Tensor | None = None, kernels: bool = False, combine: bool = True,
                 hidden_fp8: tuple[torch.Tensor, torch.Tensor] | None = None, absent: bool = False) -> torch.Tensor:
        self._check_processed()
        hidden_q, hidden_scales = hidden_fp8 if hidden_fp8 is not None else (None, None)
        return custom_ops.moe_experts(hidden, topk_weights, topk_ids, w1, None, w2, None, w1_scales, w2_scales,
                                      self.gate_up_group, layer.swiglu_limit, layer.swiglu_alpha, kernels,
                                      layer.activation, w1_row_scale, w2_row_scale, combine,
                                      absent or absent_experts(layer), hidden_q, hidden_scales)


class StackedUnquantizedMoEMethod(_StackedMethod):
    """bf16 experts: gate_up_proj [E, 2I, H], down_proj [E, H, I] (out x in, as the checkpoint's Linear weights).
    Tensor parallel: gate and up rows, down columns, any number of channels per rank."""

    intermediate_unit = 1
    kernel_weights = "dense"  # the MoE kernel config files' name of the format (moe_configs.config_file_name)

    def create_weights(self, layer: FusedMoE, *, dtype: torch.dtype, device: torch.device | str) -> None:
        h, i, i_all = layer.hidden_size, layer.intermediate_size, expert_shards(layer)[1].total
        _declare_stacked(layer, "gate_up_proj", (2 * i, h), dtype, device, self._gate_up(layer),
                         (".weight", (i_all, h), torch.bfloat16, ()), (0, 1, 1))
        _declare_stacked(layer, "down_proj", (h, i), dtype, device, [(self.names.down, h)],
                         (".weight", (h, i_all), torch.bfloat16, ()), (1, 1, 1))

    def process_weights_after_loading(self, layer: FusedMoE) -> None:
        with torch.no_grad():
            self.cache().permute_experts_(
                layer.gate_up_proj.data,
                gate_up_rows_transform(layer.intermediate_size, layer.hidden_size, self.layout, concatenated=True))
        self.gate_up_group = self.layout.gate_up_group

    def apply(self, layer: FusedMoE, hidden: torch.Tensor, topk_weights: torch.Tensor,
              topk_ids: torch.Tensor, combine: bool = True, absent: bool = False) -> torch.Tensor:
        return self._experts(layer, hidden, topk_weights, topk_ids, layer.gate_up_proj, layer.down_proj,
                             kernels=_use_kernels(layer, hidden), combine=combine, absent=absent)


class StackedFp8MoEMethod(_StackedMethod):
    """FP8 block-scaled experts: gate_up_proj float8_e4m3fn [E, 2I, H] with gate_up_proj_scale_inv
    [E, 2I/bn, H/bk] (the checkpoints' `weight_scale_inv`), likewise down; processing turns the block scales
    into the kernel layout's scales [E, K/bk, N/R] float32, one per R rows (layouts.quantized_moe)."""

    kernel_weights = "fp8"

    def __init__(self, names: ExpertNames, block: tuple[int, int], layout: Mxfp4MoELayout | None = None,
                 cache: PermutationCache | None = None) -> None:
        super().__init__(names, layout, cache)
        self.block = block
        # a rank's channels are whole blocks both as gate/up rows (bn) and as down's columns (bk)
        self.intermediate_unit = math.lcm(*block)

    def create_weights(self, layer: FusedMoE, *, dtype: torch.dtype, device: torch.device | str) -> None:
        h, i, i_all = layer.hidden_size, layer.intermediate_size, expert_shards(layer)[1].total
        bn, bk = self.block
        for field, value in (("hidden_size", h), ("moe_intermediate_size", i_all)):
            if value % bn or value % bk:
                raise ConfigError(f"FP8 experts: {field} = {value}: expected a multiple of weight_block_size "
                                  f"{list(self.block)} (whole blocks per expert projection)")
        _declare_stacked(layer, "gate_up_proj", (2 * i, h), FP8_DTYPE, device, self._gate_up(layer),
                         (".weight", (i_all, h), FP8_DTYPE, ()), (0, 1, 1))
        _declare_stacked(layer, "down_proj", (h, i), FP8_DTYPE, device, [(self.names.down, h)],
                         (".weight", (h, i_all), FP8_DTYPE, ()), (1, 1, 1))
        # The block scales take the checkpoint's dtype until processing makes the float32 kernel layout: as float32
        # from bf16, each of the 3 x E x layers small tensors was converted on its own (Qwen3-30B-A3B: 18,432).
        scale_dtype, alt = SCALE_DTYPES[0], SCALE_DTYPES[1:]
        _declare_stacked(layer, "gate_up_proj_scale_inv", (2 * i // bn, h // bk), torch.float32, device,
                         [(self.names.gate, i // bn), (self.names.up, i // bn)],
                         (".weight_scale_inv", (i_all // bn, h // bk), scale_dtype, alt), (0, 1, bn),
                         dtype_follows_checkpoint=True)
        _declare_stacked(layer, "down_proj_scale_inv", (h // bn, i // bk), torch.float32, device,
                         [(self.names.down, h // bn)], (".weight_scale_inv", (h // bn, i_all // bk), scale_dtype, alt),
                         (1, 1, bk), dtype_follows_checkpoint=True)

    def process_weights_after_loading(self, layer: FusedMoE) -> None:
        cache = self.cache()
        with torch.no_grad():
            for proj, gate_up in (("gate_up_proj", True), ("down_proj", False)):
                weight, scale_inv = getattr(layer, proj), getattr(layer, f"{proj}_scale_inv")
                scale_inv.data = convert_fp8_experts(weight.data, scale_inv.data, gate_up=gate_up, block=self.block,
                                                     layout=self.layout, cache=cache)  # [E, K/bk, N/R]
        self.gate_up_group = self.layout.gate_up_group
        logger.debug("FP8 experts in kernel layout (%s); %s", self.layout, cache.stats())

    takes_fp8_hidden = True  # the kernels quantize hidden per token and 128 columns: `apply_fp8` takes it so

    def apply(self, layer: FusedMoE, hidden: torch.Tensor, topk_weights: torch.Tensor,
              topk_ids: torch.Tensor, combine: bool = True, absent: bool = False) -> torch.Tensor:
        return self._experts(layer, hidden, topk_weights, topk_ids, layer.gate_up_proj, layer.down_proj,
                             layer.gate_up_proj_scale_inv, layer.down_proj_scale_inv,
                             kernels=_use_kernels(layer, hidden), combine=combine,
                             absent=absent)  # FP8 x FP8 (activations per 128)

    def apply_fp8(self, layer: FusedMoE, hidden: torch.Tensor, hidden_fp8: tuple[torch.Tensor, torch.Tensor],
                  topk_weights: torch.Tensor, topk_ids: torch.Tensor, combine: bool = True,
                  absent: bool = False) -> torch.Tensor:
        """`apply` with hidden already quantized (q, scales), as the kernels would have quantized it."""
        return self._experts(layer, hidden, topk_weights, topk_ids, layer.gate_up_proj, layer.down_proj,
                             layer.gate_up_proj_scale_inv, layer.down_proj_scale_inv,
                             kernels=_use_kernels(layer, hidden), combine=combine, hidden_fp8=hidden_fp8,
                             absent=absent)


class StackedNvfp4MoEMethod(_StackedMethod):
    """NVFP4 experts (ModelOpt), weight-only: gate_up_proj uint8 [E, 2I, H/2], gate_up_proj_scale E4M3
    [E, 2I, H/16], gate_up_proj_scale_2 and gate_up_proj_input_scale float32 [E, 2] (gate, up), likewise down
    with [E, 1]; the input scales are loaded and unused (activations stay in their dtype). Processing
    regroups the rows, transposes the block scales and folds weight_scale_2 into the per-row buffer
    `<proj>_row_scale` [E, N] (layouts.quantized_moe)."""

    intermediate_unit = NVFP4_BLOCK_SIZE  # a rank's channels: whole 16-channel scale blocks of down's K
    kernel_weights = "nvfp4"

    def create_weights(self, layer: FusedMoE, *, dtype: torch.dtype, device: torch.device | str) -> None:
        h, i, i_all = layer.hidden_size, layer.intermediate_size, expert_shards(layer)[1].total
        g = NVFP4_BLOCK_SIZE
        # gate/up: the channels are rows (dim 0); down: they are K, packed 2 per byte, one scale per g
        for proj, n, k, k_all, projections, splits in (
                ("gate_up_proj", 2 * i, h, h, self._gate_up(layer), ((0, 1, 1), (0, 1, 1))),
                ("down_proj", h, i, i_all, [(self.names.down, h)], ((1, 1, 2), (1, 1, g)))):
            rows = projections[0][1] if proj == "down_proj" else i_all
            _declare_stacked(layer, proj, (n, k // 2), torch.uint8, device, projections,
                             (".weight", (rows, k_all // 2), torch.uint8, ()), splits[0])
            _declare_stacked(layer, f"{proj}_scale", (n, k // g), FP8_DTYPE, device, projections,
                             (".weight_scale", (rows, k_all // g), FP8_DTYPE, ()), splits[1])
            per_tensor = [(name, 1) for name, _ in projections]  # one scalar per projection
            for suffix in ("scale_2", "input_scale"):
                _declare_stacked(layer, f"{proj}_{suffix}", (len(projections),), torch.float32, device, per_tensor,
                                 (f".{'weight_' if suffix == 'scale_2' else ''}{suffix}", (), torch.float32, ()))

    def process_weights_after_loading(self, layer: FusedMoE) -> None:
        cache = self.cache()
        with torch.no_grad():
            for proj, gate_up in (("gate_up_proj", True), ("down_proj", False)):
                weight, scale = getattr(layer, proj), getattr(layer, f"{proj}_scale")
                _, scales, row_scale = convert_nvfp4_experts_(weight.data, scale.data,
                                                              getattr(layer, f"{proj}_scale_2").data, gate_up=gate_up,
                                                              layout=self.layout, cache=cache,
                                                              encode_=mma_pairs_kernel(weight.data))
                scale.data = scales  # [E, K/16, N], same storage
                layer.register_buffer(f"{proj}_row_scale", row_scale, persistent=False)  # [E, N]
        self.gate_up_group = self.layout.gate_up_group
        logger.debug("NVFP4 experts in kernel layout (%s); %s", self.layout, cache.stats())

    def apply(self, layer: FusedMoE, hidden: torch.Tensor, topk_weights: torch.Tensor,
              topk_ids: torch.Tensor, combine: bool = True, absent: bool = False) -> torch.Tensor:
        return self._experts(layer, hidden, topk_weights, topk_ids, layer.gate_up_proj, layer.down_proj,
                             layer.gate_up_proj_scale, layer.down_proj_scale, layer.gate_up_proj_row_scale,
                             layer.down_proj_row_scale, kernels=_use_kernels(layer, hidden), combine=combine,
                             absent=absent)


def stacked_moe_method(scheme: str | None, names: ExpertNames, block: tuple[int, int] | None) -> _StackedMethod:
    """The quant method of stacked per-expert checkpoints for quantization `scheme` (None: bf16)."""
    makers: dict[str | None, Callable[[], _StackedMethod]] = {
        None: lambda: StackedUnquantizedMoEMethod(names),
        "fp8": lambda: StackedFp8MoEMethod(names, block or (128, 128)),
        "nvfp4": lambda: StackedNvfp4MoEMethod(names),
    }
    if scheme not in makers:
        raise ConfigError(f"experts quantized with {scheme!r}: expected one of {[k for k in makers if k]} or none for "
                          "checkpoints with per-expert tensors")
    return makers[scheme]()
