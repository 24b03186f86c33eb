"""Declaring parameters together with how the checkpoint fills them.

Every parameter a checkpoint fills is created with `declare_weight`, which records the tensor's shape
and dtype *in the checkpoint* (validated before anything is read) and a `weight_loader(param, tensor)`
that copies a checkpoint tensor into the parameter, converting dtype and layout as needed (the loaders
themselves are in checkpoint/weight_loaders.py). Parameters
are allocated once, directly on their device, in the layout the forward pass uses. A parameter stacked from
several checkpoint tensors (per-expert weights) lists them as `checkpoint_parts` instead.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from quickmoe.checkpoint.weight_loaders import CheckpointPart, WeightLoader, copy_weight_loader


def declare_weight(
    module: nn.Module,
    name: str,
    shape: Sequence[int],
    dtype: torch.dtype,
    device: torch.device | str,
    *,
    checkpoint_dtype: torch.dtype,
    checkpoint_shape: Sequence[int] | None = None,
    weight_loader: WeightLoader = copy_weight_loader,
    checkpoint_parts: Sequence[CheckpointPart] | None = None,
    checkpoint_alt_dtypes: Sequence[torch.dtype] = (),
    storage: torch.Tensor | None = None,
    dtype_follows_checkpoint: bool = False,
) -> nn.Parameter:
    """Register `module.<name>` as an uninitialised, frozen parameter filled by the checkpoint: by the tensor of
    its own name (`checkpoint_shape`, `checkpoint_dtype`, `weight_loader`), or by `checkpoint_parts`, tensors
    named relative to `module` (e.g. "3.w1.weight" for parameter `...experts.gate_up_proj`). `storage`, if
    given, is the tensor the parameter is (a view of a larger buffer: fused projections are loaded in place
    through their parts' parameters, with no copy afterwards). `dtype_follows_checkpoint`: processing converts the
    parameter (it reads any float dtype), so before loading it may take the dtype its checkpoint tensors hold
    (`checkpoint.dtype_adoption`), and their bytes then land directly instead of one conversion each."""
    if storage is not None:
        assert tuple(storage.shape) == tuple(shape) and storage.dtype == dtype, (storage.shape, shape, storage.dtype)
    data = storage if storage is not None else torch.empty(tuple(shape), dtype=dtype, device=device)
    param = nn.Parameter(data, requires_grad=False)
    param.checkpoint_shape = tuple(checkpoint_shape if checkpoint_shape is not None else shape)
    param.checkpoint_dtype = checkpoint_dtype
    param.weight_loader = weight_loader
    param.checkpoint_alt_dtypes = tuple(checkpoint_alt_dtypes)
    param.dtype_follows_checkpoint = dtype_follows_checkpoint
    if checkpoint_parts is not None:
        param.checkpoint_parts = tuple(checkpoint_parts)
    module.register_parameter(name, param)
    return param
