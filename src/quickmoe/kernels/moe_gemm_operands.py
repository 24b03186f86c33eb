"""How the MoE GEMMs' operands reach their kernels (`kernels/moe_gemm.py`): the format flags and dot dtype of a launch
(`launch_args`), the FP8 weights' scale rows, the scales as the kernels read them, and the weights by pointer or by
a TMA descriptor (`weight_descriptor`).
"""

from __future__ import annotations

import dataclasses

import torch

from quickmoe.kernels.moe_configs import MoEKernelConfig

try:  # CPU installs without triton keep the torch references
    import triton.language as tl
    from triton.tools.tensor_descriptor import TensorDescriptor
except ImportError:  # pragma: no cover
    tl = None

__all__ = ["FP8_GROUP", "dot_operand_dtype", "fp8_config", "fp8_scale_rows", "launch_args", "packed", "scales_arg",
           "weight_descriptor"]


def dot_operand_dtype(dtype: torch.dtype, device: torch.device):  # -> tl.dtype
    """The dtype of the dot's operands: the output dtype on a GPU; float32 in Triton's CPU interpreter,
    whose dot mishandles bf16 (bf16 x bf16 products are exact in float32, so the maths is the same)."""
    if device.type == "cpu":
        return tl.float32
    return {torch.bfloat16: tl.bfloat16, torch.float16: tl.float16, torch.float32: tl.float32}[dtype]


FP8_GROUP = 128  # columns per activation / weight scale of the FP8 path (BLOCK_K of its GEMMs)


def launch_args(acts: torch.Tensor, act_scales: torch.Tensor | None, w: torch.Tensor,
                w_scales: torch.Tensor | None, out_dtype: torch.dtype, config: MoEKernelConfig) -> dict:
    """The operands' kernel arguments: the weight format (dense, MXFP4, NVFP4 by the scales' dtype; FP8 by the
    weight's) and the activations: plain rows, MXFP8 rows (e4m3 + per-32 E8M0 scales, decoded in the kernel
    into the dot's dtype: exact, e4m3 x 2^k fits bf16), or FP8 rows with float32 per-128 scales (FP8 weights:
    e4m3 x e4m3 dots on the GPU, in float32 in the interpreter)."""
    # float32 operands multiply exactly (never tf32); 16-bit operands ignore the setting
    precision = "ieee" if out_dtype == torch.float32 or acts.device.type == "cpu" else "tf32"
    w_fp8 = w.dtype == torch.float8_e4m3fn
    if w_fp8 and (act_scales is None or act_scales.dtype != torch.float32):
        raise ValueError("FP8 weights need FP8 activations with float32 per-128 scales (quantize_fp8_per_token_group)")
    dot_dtype = dot_operand_dtype(out_dtype, acts.device)
    if w_fp8 and acts.device.type != "cpu":
        dot_dtype, precision = tl.float8e4nv, "tf32"
    nvfp4 = w_scales is not None and w_scales.dtype == torch.float8_e4m3fn
    mxfp4 = w_scales is not None and not nvfp4 and not w_fp8
    ptx = acts.device.type == "cuda"
    return dict(A_MXFP8=act_scales is not None and not w_fp8, FP8_SCALE_ROWS=fp8_scale_rows(w, w_scales),
                NVFP4=nvfp4,
                MXFP4=mxfp4, PRECISION=precision, DOT_DTYPE=dot_dtype,
                PTX=ptx, MXFP4_PTX=mxfp4 and ptx and dot_dtype != tl.float16,  # bf16 or float32 dots
                SWAP_AB=config.swap_ab, W_TMA=config.weight_tma, num_warps=config.num_warps,
                num_stages=config.num_stages, maxnreg=config.maxnreg or None)


def fp8_scale_rows(w: torch.Tensor, w_scales: torch.Tensor | None) -> int:
    """FP8 weights [E, N, K]: the kernel rows that share one scale per 128 columns (scales [E, K/128, N / rows],
    `layouts.quantized_moe`); 0 for other formats."""
    if w.dtype != torch.float8_e4m3fn:
        return 0
    experts, n, k = w.shape
    if w_scales is None or w_scales.dim() != 3 or w_scales.shape[:2] != (experts, k // FP8_GROUP) \
            or n % w_scales.shape[2]:
        raise ValueError(f"FP8 weights {tuple(w.shape)} need float32 scales [E, K/128, N / rows] with rows "
                         f"dividing N; got {None if w_scales is None else tuple(w_scales.shape)}")
    return n // w_scales.shape[2]


def packed(w_scales: torch.Tensor | None, w: torch.Tensor) -> bool:
    """Whether w holds two 4-bit values per byte (MXFP4, NVFP4)."""
    return w_scales is not None and w.dtype == torch.uint8


def fp8_config(w: torch.Tensor, config: MoEKernelConfig) -> MoEKernelConfig:
    """FP8 weights step K by one scale group (128 columns)."""
    return dataclasses.replace(config, block_k=FP8_GROUP) if w.dtype == torch.float8_e4m3fn else config


def scales_arg(w_scales: torch.Tensor | None, w: torch.Tensor) -> torch.Tensor:
    """The scales as the kernel reads them (E4M3 scale bytes as uint8: decoded in the kernel; the weight when
    there are none)."""
    if w_scales is None:
        return w
    return w_scales.view(torch.uint8) if w_scales.dtype == torch.float8_e4m3fn else w_scales


def weight_descriptor(w: torch.Tensor, w_scales: torch.Tensor | None, tile_rows: int, config: MoEKernelConfig,
                      gemm: str):
    """The weight as the kernels read it: w itself, or with `config.weight_tma` a tensor descriptor of w viewed as
    [E * N, K'] (K' = K, or K / 2 bytes for packed FP4) whose blocks are the tiles [tile_rows, block_k'] (block_n
    rows, or GEMM 1's 2 x block_n gate and up rows with one dot; Hopper's
    tensor-memory accelerator copies each into shared memory; rows past the last expert read as zeros, rows of the
    next expert only feed masked columns). Packed FP4 tiles are decoded from the copy as from a pointer load."""
    if not config.weight_tma:
        return w
    if w.dim() != 3 or not w.is_contiguous():
        raise ValueError(f"{gemm}: weight_tma needs contiguous weights [E, N, K]; got {w.dtype} {tuple(w.shape)} "
                         f"with strides {w.stride()}")
    experts, n, row_elements = w.shape
    block_k = config.block_k // 2 if packed(w_scales, w) else config.block_k  # bytes of packed rows
    if (row_elements * w.element_size()) % 16 or w.data_ptr() % 16:
        raise ValueError(f"{gemm}: weight_tma needs 16-byte aligned weight rows; a row is {row_elements} x "
                         f"{w.element_size()} bytes")
    return TensorDescriptor(w.view(experts * n, row_elements), shape=[experts * n, row_elements],
                            strides=[row_elements, 1], block_shape=[tile_rows, block_k])
