"""The MoE block: router + experts, where a quant method owns the experts' weights.

A quant method decides the parameters (sizes, dtypes, alignment, layout), fills them through
`weight_loader`s from the checkpoint tensors, converts them after loading, and applies the experts.
The layer itself never pads or slices activations.
"""

from __future__ import annotations

import logging
import os
from typing import Protocol

import torch
from torch import nn

from quickmoe.checkpoint.weight_loaders import transpose_last2_weight_loader
from quickmoe.config import ModelConfig
from quickmoe.distributed import SINGLE, ParallelContext, Shard
from quickmoe.forward import custom_ops
from quickmoe.layers.linear import Linear
from quickmoe.layers.sharding import narrow_param, scaled, zero_unless_driver
from quickmoe.layers.weights import declare_weight
from quickmoe.layouts.mxfp4_moe import Mxfp4MoELayout, convert_experts_, gate_up_rows_transform
from quickmoe.layouts.permutation_cache import PermutationCache, default_permutation_cache

logger = logging.getLogger(__name__)


class MoEQuantMethod(Protocol):
    """How a `FusedMoE` stores and runs its experts. `kernel_weights` names the experts' format as the MoE kernels'
    tuned config files do ("dense", "mxfp4", "fp8", "nvfp4"; kernels/moe_configs.py)."""

    kernel_weights: str

    def create_weights(self, layer: "FusedMoE", *, dtype: torch.dtype, device: torch.device | str) -> None: ...

    def process_weights_after_loading(self, layer: "FusedMoE") -> None: ...

    def apply(self, layer: "FusedMoE", hidden: torch.Tensor, topk_weights: torch.Tensor,
              topk_ids: torch.Tensor, combine: bool = True, absent: bool = False) -> torch.Tensor:
        """[T, H] -> [T, H]; with the kernels and combine False [T, k, H] (custom_ops.moe_experts). absent: topk_ids
        may hold num_experts on padding rows (FusedMoE.forward). A method whose kernels take hidden already
        quantized to FP8 sets `takes_fp8_hidden = True` and has
        `apply_fp8(layer, hidden, hidden_fp8, topk_weights, topk_ids, combine, absent)`."""


class UnquantizedMoEMethod:
    """bf16 experts. The HF checkpoint stores them in x out (gate_up_proj [E, H, 2I]); they are kept
    out x in here (w1 [E, 2I, H], w2 [E, H, I]), the layout the MXFP4 path and the kernels share. For the
    Triton kernels (`layer.kernels == "triton"`), processing regroups gate_up's rows (and bias) from the
    checkpoint's even/odd interleave into the kernel layout's gate/up groups, like the MXFP4 rows."""

    intermediate_unit = 1  # a rank's share of the intermediate dimension: any number of channels
    kernel_weights = "dense"  # the MoE kernel config files' name of the format (moe_configs.config_file_name)

    def __init__(self, layout: Mxfp4MoELayout | None = None, cache: PermutationCache | None = None) -> None:
        self.layout = layout if layout is not None else Mxfp4MoELayout()
        self._cache = cache
        self.gate_up_group = 1  # the checkpoint interleave until processing regroups the rows

    def create_weights(self, layer: "FusedMoE", *, dtype: torch.dtype, device: torch.device | str) -> None:
        e, h, i = layer.num_experts, layer.hidden_size, layer.intermediate_size
        kw = dict(checkpoint_dtype=torch.bfloat16, weight_loader=transpose_last2_weight_loader)
        declare_weight(layer, "gate_up_proj", (e, 2 * i, h), dtype, device, checkpoint_shape=(e, h, 2 * i), **kw)
        declare_weight(layer, "down_proj", (e, h, i), dtype, device, checkpoint_shape=(e, i, h), **kw)
        declare_weight(layer, "gate_up_proj_bias", (e, 2 * i), dtype, device, checkpoint_dtype=torch.bfloat16)
        declare_weight(layer, "down_proj_bias", (e, h), dtype, device, checkpoint_dtype=torch.bfloat16)
        # checkpoint layout: gate_up [E, H, 2I] (gate/up interleaved: channel j is rows 2j, 2j+1), down [E, I, H]
        shard_experts(layer, {"gate_up_proj": (2, 2, 1), "down_proj": (1, 1, 1), "gate_up_proj_bias": (1, 2, 1),
                             "down_proj_bias": None})

    def process_weights_after_loading(self, layer: "FusedMoE") -> None:
        if layer.kernels != "triton" or self.gate_up_group != 1:
            return
        cache = self._cache if self._cache is not None else default_permutation_cache()
        i, h = layer.intermediate_size, layer.hidden_size
        with torch.no_grad():
            cache.permute_experts_(layer.gate_up_proj.data, gate_up_rows_transform(i, h, self.layout))
            cache.permute_experts_(layer.gate_up_proj_bias.data, gate_up_rows_transform(i, 1, self.layout))
        self.gate_up_group = self.layout.gate_up_group

    def apply(self, layer: "FusedMoE", hidden: torch.Tensor, topk_weights: torch.Tensor,
              topk_ids: torch.Tensor, combine: bool = True, absent: bool = False) -> torch.Tensor:
        return custom_ops.moe_experts(
            hidden, topk_weights, topk_ids, layer.gate_up_proj, layer.gate_up_proj_bias, layer.down_proj,
            layer.down_proj_bias, None, None, self.gate_up_group, layer.swiglu_limit, layer.swiglu_alpha,
            _use_kernels(layer, hidden) and self.gate_up_group > 1, "swiglu_gpt_oss", None, None, combine,
            absent or absent_experts(layer))


def absent_experts(layer: nn.Module) -> bool:
    """Whether the layer's topk_ids may hold its number of experts: another rank's assignment (expert parallel,
    `FusedMoE.local_assignments`)."""
    parallel = getattr(layer, "parallel", SINGLE)
    return parallel.sharded and parallel.expert_parallel


def _use_kernels(layer: nn.Module, hidden: torch.Tensor) -> bool:
    """The Triton kernels on CUDA (or in Triton's CPU interpreter, for tests); else the torch reference."""
    return layer.kernels == "triton" and (hidden.is_cuda or os.environ.get("TRITON_INTERPRET") == "1")


class Mxfp4MoEMethod:
    """MXFP4 experts in the kernel layout of `quickmoe.layouts.mxfp4_moe` (blocks [E, N, K/2] uint8,
    transposed E8M0 scales [E, K/32, N], gate_up rows grouped by `layout.gate_up_group`), dequantized
    inside the experts computation. Biases are kept in the activation dtype.

    The parameters are allocated once, at their final size (the kernel layout has exactly the
    checkpoint's bytes), and filled by plain copies in checkpoint layout: the loader's large contiguous
    copies stay copies. `process_weights_after_loading` then permutes each parameter in place, all
    experts of a layer per batched gather with indices from the PermutationCache, chunked along the
    experts so that device memory stays <= final weights + the cache's transient budget (256 MiB), and
    re-views the storages in their kernel shapes.
    """

    block_size = 32
    intermediate_unit = 32  # a rank's share of the intermediate dimension: whole scale blocks of down's K
    kernel_weights = "mxfp4"

    def __init__(self, layout: Mxfp4MoELayout | None = None, cache: PermutationCache | None = None) -> None:
        self.layout = layout if layout is not None else Mxfp4MoELayout()
        self._cache = cache  # None: the process-wide default, resolved at processing time

    def create_weights(self, layer: "FusedMoE", *, dtype: torch.dtype, device: torch.device | str) -> None:
        e, h, i = layer.num_experts, layer.hidden_size, layer.intermediate_size
        u8 = dict(checkpoint_dtype=torch.uint8)
        # Checkpoint shapes until process_weights_after_loading re-views them in kernel layout.
        declare_weight(layer, "gate_up_proj_blocks", (e, 2 * i, h // 32, 16), torch.uint8, device, **u8)
        declare_weight(layer, "gate_up_proj_scales", (e, 2 * i, h // 32), torch.uint8, device, **u8)
        declare_weight(layer, "down_proj_blocks", (e, h, i // 32, 16), torch.uint8, device, **u8)
        declare_weight(layer, "down_proj_scales", (e, h, i // 32), torch.uint8, device, **u8)
        declare_weight(layer, "gate_up_proj_bias", (e, 2 * i), dtype, device, checkpoint_dtype=torch.bfloat16)
        declare_weight(layer, "down_proj_bias", (e, h), dtype, device, checkpoint_dtype=torch.bfloat16)
        # gate_up rows interleave gate/up (2 per channel); down's K is in blocks of 32 channels (16 bytes each)
        shard_experts(layer, {"gate_up_proj_blocks": (1, 2, 1), "gate_up_proj_scales": (1, 2, 1),
                             "gate_up_proj_bias": (1, 2, 1), "down_proj_blocks": (2, 1, 32),
                             "down_proj_scales": (2, 1, 32), "down_proj_bias": None})
        layer.experts_in_kernel_layout = False

    def process_weights_after_loading(self, layer: "FusedMoE") -> None:
        if layer.experts_in_kernel_layout:
            raise RuntimeError("MXFP4 experts were already converted to the kernel layout")
        cache = self._cache if self._cache is not None else default_permutation_cache()
        with torch.no_grad():
            for proj, gate_up in (("gate_up_proj", True), ("down_proj", False)):
                blocks, scales, bias = (getattr(layer, f"{proj}_{s}") for s in ("blocks", "scales", "bias"))
                new_blocks, new_scales, _ = convert_experts_(blocks.data, scales.data, bias.data, gate_up=gate_up,
                                                             layout=self.layout, cache=cache,
                                                             encode_=mma_pairs_kernel(blocks.data))
                blocks.data = new_blocks  # [E, N, K/2], same storage
                scales.data = new_scales  # [E, K/32, N], same storage
        layer.experts_in_kernel_layout = True
        logger.debug("MXFP4 experts in kernel layout (%s); %s", self.layout, cache.stats())

    def apply(self, layer: "FusedMoE", hidden: torch.Tensor, topk_weights: torch.Tensor,
              topk_ids: torch.Tensor, combine: bool = True, absent: bool = False) -> torch.Tensor:
        if not layer.experts_in_kernel_layout:
            raise RuntimeError("MXFP4 experts used before process_weights_after_loading converted them")
        return custom_ops.moe_experts(
            hidden, topk_weights, topk_ids, layer.gate_up_proj_blocks, layer.gate_up_proj_bias,
            layer.down_proj_blocks, layer.down_proj_bias, layer.gate_up_proj_scales, layer.down_proj_scales,
            self.layout.gate_up_group, layer.swiglu_limit, layer.swiglu_alpha, _use_kernels(layer, hidden),
            "swiglu_gpt_oss", None, None, combine, absent or absent_experts(layer))


def mma_pairs_kernel(blocks: torch.Tensor):
    """The Triton pass of the mma-pair encode for blocks on a GPU (one pass over the words), else None (torch's)."""
    if not blocks.is_cuda:
        return None
    from quickmoe.kernels import mxfp4_mma_pairs

    return mxfp4_mma_pairs.encode_mma_pairs_ if mxfp4_mma_pairs.triton is not None else None


class FusedMoE(nn.Module):
    """The experts of one MoE layer (checkpoint prefix `...mlp.experts`). `kernels` ("torch" or "triton",
    set by the model runner from the engine option `moe_kernels`) picks how a quant method that has Triton
    kernels runs them. `activation`: "swiglu_gpt_oss" (clamped, config.swiglu_limit / swiglu_alpha) or "silu"
    (SiLU(gate) * up).

    Several ranks (`parallel`): tensor parallel splits every expert's intermediate dimension (`intermediate_shard`,
    in whole units of the quant method's `intermediate_unit`: the split of its weights and scales is the quant
    method's, declared with `shard_experts` or as per-expert parts); expert parallel (`parallel.expert_parallel`)
    gives each rank whole experts (`expert_shard`), the assignments to other ranks' experts weighing zero here.
    Either way every rank holds every token and the output is summed over the ranks (the block's one all-reduce).
    `num_experts` and `intermediate_size` are this rank's."""

    def __init__(self, config: ModelConfig, quant_method: MoEQuantMethod, *, activation: str, dtype: torch.dtype,
                 device: torch.device | str, parallel: ParallelContext = SINGLE) -> None:
        super().__init__()
        self.parallel = parallel
        experts, inter = config.num_local_experts, config.moe_intermediate_size
        if parallel.expert_parallel:
            self.expert_shard = parallel.shard(experts, field="number of experts (num_local_experts / num_experts)",
                                               exact=True)
            self.intermediate_shard = Shard(0, inter, inter)
        else:
            self.expert_shard = Shard(0, experts, experts)
            self.intermediate_shard = parallel.shard(inter, field="moe_intermediate_size",
                                                     unit=getattr(quant_method, "intermediate_unit", 1))
        self.num_experts, self.top_k = self.expert_shard.size, config.num_experts_per_tok
        self.hidden_size, self.intermediate_size = config.hidden_size, self.intermediate_shard.size
        self.swiglu_limit, self.swiglu_alpha = config.swiglu_limit, config.swiglu_alpha
        self.activation = activation
        self.quant_method = quant_method
        self.kernels = "torch"
        quant_method.create_weights(self, dtype=dtype, device=device)

    def local_assignments(self, topk_weights: torch.Tensor,
                          topk_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Expert parallel: global expert ids [T, k] -> this rank's; another rank's assignment gets the id
        num_experts (one past this rank's), which no GEMM computes (`fused_moe`'s absent_experts), and weight 0."""
        local = topk_ids - self.expert_shard.start  # [T, k]
        mine = (local >= 0) & (local < self.num_experts)
        return torch.where(mine, topk_weights, 0.0), torch.where(mine, local, self.num_experts)

    def takes_fp8_hidden(self, hidden: torch.Tensor) -> bool:
        """Whether the experts' kernels would quantize `hidden` to FP8 per token and 128 columns (FP8 experts on
        the Triton kernels), so that forward can take it quantized already (`hidden_fp8`, made by the norm
        before the block: `RMSNorm.forward_fp8`)."""
        return getattr(self.quant_method, "takes_fp8_hidden", False) and _use_kernels(self, hidden)

    def forward(self, hidden: torch.Tensor, topk_weights: torch.Tensor, topk_ids: torch.Tensor,
                combine: bool = True, hidden_fp8: tuple[torch.Tensor, torch.Tensor] | None = None,
                padding_rows: bool = False) -> torch.Tensor:
        """[T, H] -> [T, H]. combine False (one rank only): the Triton path may return its output before the
        combine, [T, k, H], for the next residual add + RMSNorm to sum (the reference returns [T, H] anyway).
        hidden_fp8: (q, scales), hidden quantized with the quantizer's bits, where `takes_fp8_hidden`.
        padding_rows: topk_ids hold num_experts on a CUDA graph's padding rows (`route_experts` with
        num_valid_tokens): no GEMM computes them, and their output rows are undefined."""
        if self.parallel.sharded:  # the all-reduce takes the combined output
            combine = True
            if self.parallel.expert_parallel:
                topk_weights, topk_ids = self.local_assignments(topk_weights, topk_ids)
        if hidden_fp8 is not None:
            assert self.takes_fp8_hidden(hidden), "hidden_fp8 given to experts that do not take it"
            out = self.quant_method.apply_fp8(self, hidden, hidden_fp8, topk_weights, topk_ids, combine, padding_rows)
        else:
            out = self.quant_method.apply(self, hidden, topk_weights, topk_ids, combine, padding_rows)
        return self.parallel.all_reduce(out)


def expert_shards(layer: nn.Module) -> tuple[Shard, Shard]:
    """(experts, intermediate channels) of this rank of a FusedMoE (the whole of both for any other layer a quant
    method is given, e.g. in tests)."""
    e, i = layer.num_experts, layer.intermediate_size
    return getattr(layer, "expert_shard", Shard(0, e, e)), getattr(layer, "intermediate_shard", Shard(0, i, i))


def shard_experts(layer: nn.Module, splits: dict[str, tuple[int, int, int] | None]) -> None:
    """Declare this rank's slice of each expert parameter of `layer` (a quant method calls it from create_weights):
    `splits[name]` = (checkpoint dim of the intermediate channels, num, den: elements per channel num/den), or None
    for down's bias (row-parallel: added once). Expert parallel slices dim 0 (the experts). Nothing with one rank."""
    parallel = getattr(layer, "parallel", SINGLE)
    if not parallel.sharded:
        return
    experts, channels = expert_shards(layer)
    for name, split in splits.items():
        param = getattr(layer, name)
        if parallel.expert_parallel:
            narrow_param(param, 0, experts)
        elif split is None:
            zero_unless_driver(param, parallel)
        else:
            dim, num, den = split
            narrow_param(param, dim, scaled(channels, num, den))


class GptOssMLP(nn.Module):
    """Router (linear with bias, top-k then softmax) followed by the experts. `kernels` ("torch" or "triton",
    set by the runner with the experts') picks the routing kernel or its reference."""

    defers_combine = True  # forward(hidden, combine=False) may return [T, k, H] (models/decoder.py)

    def __init__(self, config: ModelConfig, layer_idx: int, *, dtype: torch.dtype,
                 device: torch.device | str, parallel: ParallelContext = SINGLE) -> None:
        super().__init__()
        self.top_k = config.num_experts_per_tok
        self.kernels = "torch"
        self.router = Linear(config.hidden_size, config.num_local_experts, bias=True, dtype=dtype, device=device)
        quantized = config.is_quantized(f"model.layers.{layer_idx}.mlp.experts")
        method: MoEQuantMethod = Mxfp4MoEMethod() if quantized else UnquantizedMoEMethod()
        self.experts = FusedMoE(config, method, activation="swiglu_gpt_oss", dtype=dtype, device=device,
                                parallel=parallel)

    masks_padding_rows = True  # forward takes num_valid_tokens (models/decoder.py)

    def forward(self, hidden: torch.Tensor, combine: bool = True,
                num_valid_tokens: torch.Tensor | None = None) -> torch.Tensor:
        """[T, H] -> [T, H], or [T, k, H] before the combine (combine False: `FusedMoE.forward`).
        num_valid_tokens (an integer [1] on the device): rows at and past it are a CUDA graph's padding, which no expert
        computes (their output rows are undefined)."""
        topk_weights, topk_ids = custom_ops.route_experts(hidden, self.router.weight, self.router.bias, self.top_k,
                                                          False, False, _use_kernels(self, hidden),
                                                          num_valid_tokens)  # [T, k] each
        return self.experts(hidden, topk_weights, topk_ids, combine, padding_rows=num_valid_tokens is not None)
