"""The MoE block of Qwen3-MoE (`mlp`) and Mixtral (`block_sparse_moe`): a router without bias (`gate`),
softmax over all experts then the top-k (renormalised to sum to 1 when config.norm_topk_prob), and the
experts (`experts`, per-expert checkpoint tensors stacked by the quant method of layers/moe_stacked.py)."""

from __future__ import annotations

import torch
from torch import nn

from quickmoe.config import ModelConfig
from quickmoe.distributed import SINGLE, ParallelContext
from quickmoe.forward import custom_ops
from quickmoe.layers.linear import Linear
from quickmoe.layers.moe import FusedMoE, _use_kernels
from quickmoe.layers.moe_stacked import ExpertNames, stacked_moe_method


class SparseMoeBlock(nn.Module):
    """Router + experts. `prefix` is the block's checkpoint module (e.g. "model.layers.3.mlp"): its experts are
    quantized as the config says for `<prefix>.experts`; the router never is. `kernels` ("torch" or "triton",
    set by the runner with the experts') picks the routing kernel or its reference."""

    defers_combine = True  # forward(hidden, combine=False) may return [T, k, H] (models/decoder.py)

    def __init__(self, config: ModelConfig, prefix: str, names: ExpertNames, *, dtype: torch.dtype,
                 device: torch.device | str, parallel: ParallelContext = SINGLE) -> None:
        super().__init__()
        self.top_k, self.renormalize = config.num_experts_per_tok, config.norm_topk_prob
        self.kernels = "torch"
        self.gate = Linear(config.hidden_size, config.num_local_experts, bias=False, dtype=dtype, device=device)
        q = config.quantization
        method = stacked_moe_method(config.quant_scheme(f"{prefix}.experts"), names,
                                    q.weight_block_size if q is not None else None)
        self.experts = FusedMoE(config, method, activation="silu", dtype=dtype, device=device, parallel=parallel)

    def takes_fp8_hidden(self, hidden: torch.Tensor) -> bool:
        """Whether forward takes `hidden_fp8` (`FusedMoE.takes_fp8_hidden`)."""
        return self.experts.takes_fp8_hidden(hidden)

    masks_padding_rows = True  # forward takes num_valid_tokens (models/decoder.py)

    def forward(self, hidden: torch.Tensor, combine: bool = True,
                hidden_fp8: tuple[torch.Tensor, torch.Tensor] | None = None,
                num_valid_tokens: torch.Tensor | None = None) -> torch.Tensor:
        """[T, H] -> [T, H], or [T, k, H] before the combine (combine False: `FusedMoE.forward`); hidden_fp8:
        hidden quantized to FP8 beside its norm, for the experts; num_valid_tokens (an integer [1] on the device): rows
        at and past it are a CUDA graph's padding, which no expert computes (their output rows are undefined)."""
        topk_weights, topk_ids = custom_ops.route_experts(hidden, self.gate.weight, None, self.top_k, True,
                                                          self.renormalize, _use_kernels(self, hidden),
                                                          num_valid_tokens)  # [T, k]
        return self.experts(hidden, topk_weights, topk_ids, combine, hidden_fp8,
                            padding_rows=num_valid_tokens is not None)
