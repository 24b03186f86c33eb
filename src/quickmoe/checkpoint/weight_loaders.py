"""How a checkpoint tensor enters a parameter: the `weight_loader(param, tensor)` functions layers declare.

They live below both the layers that declare them and the loader that calls them (the loader lands a tensor
straight in its parameter when the loader is the plain `copy_weight_loader` and the dtypes agree).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

__all__ = ["WeightLoader", "copy_weight_loader", "transpose_last2_weight_loader"]

WeightLoader = Callable[[nn.Parameter, torch.Tensor], None]


def copy_weight_loader(param: nn.Parameter, loaded: torch.Tensor) -> None:
    """Copy as is (shapes were validated against `checkpoint_shape`), converting dtype and device."""
    assert param.shape == loaded.shape, (param.shape, loaded.shape)
    param.data.copy_(loaded)


def transpose_last2_weight_loader(param: nn.Parameter, loaded: torch.Tensor) -> None:
    """Checkpoint [..., in, out] -> parameter [..., out, in] (HF's unquantized experts are stored in x out)."""
    param.data.copy_(loaded.transpose(-1, -2))
