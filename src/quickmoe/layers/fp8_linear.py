"""FP8 block-scaled dense layers (`quant_method: "fp8"`, `weight_block_size` [bn, bk]), and the choice of a
dense layer's `LinearMethod` from the checkpoint's quantization config.

The weight stays float8_e4m3fn [out, in] with `weight_scale_inv` [ceil(out/bn), ceil(in/bk)] (float32 here;
bf16 or float32 in the checkpoint). On CUDA (with triton, and bk = 128) the product quantizes the activations
to FP8 per token and 128 columns (kernels/fp8_quant.py), then runs the FP8 block-scaled tensor-core GEMM
(kernels/fp8_gemm.py, both through `fp8_quant_block_linear`): the weight is never dequantized. Elsewhere (the
CPU, or another bk) it dequantizes the weight to the activations' dtype and runs the plain linear (formats.fp8),
with unquantized activations. Layers of one input whose sizes are whole scale blocks stack into one
(`FusedLinear`: Qwen3's and Mixtral's q, k and v), one quantizer and one GEMM for all.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from quickmoe.config import ModelConfig
from quickmoe.errors import ConfigError
from quickmoe.formats.fp8 import FP8_DTYPE, block_scale_shape, dequantize_fp8_block
from quickmoe.kernels import fp8_gemm
from quickmoe.distributed import Shard
from quickmoe.layers.linear import Linear, LinearMethod
from quickmoe.layers.sharding import narrow_param
from quickmoe.layers.weights import declare_weight

__all__ = ["Fp8BlockLinearMethod", "SCALE_DTYPES", "linear_method"]

SCALE_DTYPES = (torch.bfloat16, torch.float32, torch.float16)  # weight_scale_inv as the checkpoints store it


@dataclass(frozen=True)
class Fp8BlockLinearMethod:
    """weight float8_e4m3fn [out, in] + weight_scale_inv [ceil(out/bn), ceil(in/bk)]: the FP8 GEMM on CUDA,
    else dequantized per call. Methods of the same block size are equal (their layers may stack, `fusable`)."""

    block: tuple[int, int]

    def __post_init__(self) -> None:
        object.__setattr__(self, "block", tuple(self.block))

    def create_weights(self, layer: Linear, *, dtype: torch.dtype, device: torch.device | str,
                       storage: dict[str, torch.Tensor] | None = None) -> None:
        shape = (layer.out_features, layer.in_features)
        storage = storage or {}
        declare_weight(layer, "weight", shape, FP8_DTYPE, device, checkpoint_dtype=FP8_DTYPE,
                       storage=storage.get("weight"))
        declare_weight(layer, "weight_scale_inv", block_scale_shape(shape, self.block), torch.float32, device,
                       checkpoint_dtype=SCALE_DTYPES[0], checkpoint_alt_dtypes=SCALE_DTYPES[1:],
                       storage=storage.get("weight_scale_inv"))

    def fusable(self, sizes: list[int]) -> bool:
        """Whether layers of these output sizes stack into one (`FusedLinear`): each starts and ends on a scale
        block's rows, so its scales are whole rows of the stacked scales."""
        return all(size % self.block[0] == 0 for size in sizes)

    def storage(self, out_features: int, in_features: int, device: torch.device | str) -> dict[str, torch.Tensor]:
        """The tensors of a stacked layer of `out_features` rows (`FusedLinear`)."""
        shape = (out_features, in_features)
        return {"weight": torch.empty(shape, dtype=FP8_DTYPE, device=device),
                "weight_scale_inv": torch.empty(block_scale_shape(shape, self.block), dtype=torch.float32,
                                                device=device)}

    def part_storage(self, storage: dict[str, torch.Tensor], start: int, size: int) -> dict[str, torch.Tensor]:
        """Rows [start, start + size) of a stacked layer's tensors: the weight's rows and their scale rows."""
        assert start % self.block[0] == 0 and size % self.block[0] == 0, (start, size, self.block)
        first, count = start // self.block[0], size // self.block[0]
        return {"weight": storage["weight"][start:start + size],
                "weight_scale_inv": storage["weight_scale_inv"][first:first + count]}

    def narrow(self, layer: Linear, dim: int, shard: Shard) -> None:
        """This rank holds `shard` of the weight along `dim` (0: output rows, 1: input columns), and the scale
        blocks covering it: the slice must be whole blocks."""
        block = self.block[dim]
        for what, value in (("start", shard.start), ("size", shard.size)):
            if value % block:
                raise ConfigError(f"FP8 linear {'rows' if dim == 0 else 'columns'} of this rank: {what} = {value}: "
                                  f"expected a multiple of weight_block_size[{dim}] = {block} (choose a "
                                  "tensor-parallel size that splits the layer into whole blocks)")
        narrow_param(layer.weight, dim, shard)
        narrow_param(layer.weight_scale_inv, dim, Shard(shard.start // block, shard.size // block,
                                                        -(-shard.total // block)))

    def process_weights_after_loading(self, layer: Linear) -> None:
        pass

    def uses_fp8_gemm(self, x: torch.Tensor) -> bool:
        """Whether `apply` runs the FP8 tensor-core GEMM on x (else the dequantizing torch path)."""
        return x.is_cuda and fp8_gemm.triton is not None and self.block[1] == fp8_gemm.FP8_GROUP

    def takes_fp8_input(self, x: torch.Tensor) -> bool:
        """Whether `product` can take x already quantized (`x_fp8`, made by the norm before it, which quantizes whole
        128-column groups only): the FP8 GEMM runs and x's columns are whole groups (a ragged K keeps the GEMM's
        own quantizer)."""
        return self.uses_fp8_gemm(x) and x.shape[-1] % fp8_gemm.FP8_GROUP == 0

    def apply(self, layer: Linear, x: torch.Tensor,
              x_fp8: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        return self.product(x, {"weight": layer.weight, "weight_scale_inv": layer.weight_scale_inv}, layer.bias,
                            x_fp8)

    def product(self, x: torch.Tensor, tensors: dict[str, torch.Tensor], bias: torch.Tensor | None,
                x_fp8: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        """x W^T + b of the weight `tensors` ("weight", "weight_scale_inv"): a layer's or a stacked layer's. x_fp8:
        x [M, in] already quantized per token and 128 columns (q, scales) with the quantizer's bits, for the GEMM."""
        weight, scale_inv = tensors["weight"], tensors["weight_scale_inv"]
        if self.uses_fp8_gemm(x):
            if x_fp8 is not None:  # quantized beside the norm that made x
                return fp8_gemm.fp8_block_linear(*x_fp8, weight, scale_inv, self.block, bias, out_dtype=x.dtype)
            rows = x.reshape(-1, x.shape[-1])  # [M, in]
            out = fp8_gemm.fp8_quant_block_linear(rows, weight, scale_inv, self.block, bias, out_dtype=x.dtype)
            return out.reshape(*x.shape[:-1], out.shape[-1])
        assert x_fp8 is None, "x_fp8 given where the FP8 GEMM does not run"
        return F.linear(x, dequantize_fp8_block(weight, scale_inv, self.block, x.dtype), bias)  # [out, in] weight


def linear_method(config: ModelConfig, module_name: str) -> LinearMethod | None:
    """The LinearMethod of dense layer `module_name` (e.g. "model.layers.3.self_attn.q_proj"): None when it is
    not quantized; an error naming the module for a scheme quickmoe runs on experts only."""
    scheme = config.quant_scheme(module_name)
    if scheme is None:
        return None
    if scheme == "fp8":
        assert config.quantization is not None and config.quantization.weight_block_size is not None
        return Fp8BlockLinearMethod(config.quantization.weight_block_size)
    raise ConfigError(f"{config.source}: module {module_name} is quantized with {scheme!r}, which quickmoe runs for "
                      f"MoE experts only (expected it in the quantization config's modules_to_not_convert / "
                      f"exclude_modules; dense layers support ['fp8'])")
