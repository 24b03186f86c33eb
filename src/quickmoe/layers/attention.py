"""Attention over a paged KV cache: GQA, RoPE, optional per-head sink logits (gpt-oss), optional per-head
q/k RMSNorm (Qwen3), optional sliding window."""

from __future__ import annotations

import torch
from torch import nn

from quickmoe.config import ModelConfig
from quickmoe.distributed import SINGLE, ParallelContext
from quickmoe.forward import custom_ops
from quickmoe.forward.forward_batch import AttentionMetadata, KVGroupMetadata
from quickmoe.layers.fp8_linear import linear_method
from quickmoe.layers.linear import FusedLinear, Linear
from quickmoe.layers.norm import RMSNorm
from quickmoe.layers.sharding import column_parallel, narrow_param, row_parallel, scaled
from quickmoe.layers.weights import declare_weight


def sink_attention_ref(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, sinks: torch.Tensor,
                       q_positions: torch.Tensor, window: int | None, scale: float) -> torch.Tensor:
    """Attention of one sequence, in float32.

    q [n, H, D] at absolute positions q_positions [n]; k, v [L, KV, D] hold positions 0..L-1.
    Query at position p sees keys j <= p, and with a window only j > p - window (itself and
    window-1 earlier tokens). Each head's sink logit joins the softmax denominator only:
    p_j = exp(s_j) / (sum_j' exp(s_j') + exp(sink)). Returns [n, H, D] in q's dtype.
    """
    num_heads, num_kv = q.shape[1], k.shape[1]
    k = k.float().repeat_interleave(num_heads // num_kv, dim=1)  # [L, H, D]
    v = v.float().repeat_interleave(num_heads // num_kv, dim=1)
    logits = torch.einsum("nhd,lhd->hnl", q.float(), k) * scale  # [H, n, L]
    key_pos = torch.arange(k.shape[0], device=q.device)
    visible = key_pos[None, :] <= q_positions[:, None]  # [n, L]
    if window is not None:
        visible &= key_pos[None, :] > q_positions[:, None] - window
    logits = logits.masked_fill(~visible[None], float("-inf"))
    sink = sinks.float()[:, None, None].expand(-1, logits.shape[1], 1)  # [H, n, 1]
    combined = torch.cat([logits, sink], dim=-1)
    probs = torch.softmax(combined - combined.amax(dim=-1, keepdim=True), dim=-1)[..., :-1]  # drop the sink
    return torch.einsum("hnl,lhd->nhd", probs, v).to(q.dtype)


# The sink logit of a model without sinks: exp(NO_SINK - m) is exactly 0 next to any real logit m, and the
# online softmax of the kernels starts from it without producing inf - inf.
NO_SINK = -1e30


class Attention(nn.Module):
    """q/k/v/o projections (biases when config.attention_bias), NeoX RoPE (YaRN or plain: the model's table of
    cos/sin), and a sliding window on the layers `config.layer_types` says. `sinks`: a learned per-head sink
    logit in the softmax denominator (gpt-oss; checkpoint tensor `sinks`), else none. `qk_norm`: RMSNorm over
    each head of q and k before RoPE (Qwen3; `q_norm` / `k_norm`). Quantized projections as the config says
    (fp8_linear). q, k and v are one GEMM (`qkv_proj`, whose row slices are the checkpoint's q_proj, k_proj and
    v_proj parameters), unquantized or FP8 alike (FP8: their block scales are row slices too); RoPE, the KV-cache
    write and the attention are one op (`attention`).

    Tensor parallel (`parallel`): this rank computes its share of the query heads (q, o and the sinks split with
    them) and of the KV heads (replicated when there are fewer than ranks); q/k/v are column-parallel, o
    row-parallel, and the block's output is summed over the ranks (its one all-reduce)."""

    def __init__(self, config: ModelConfig, layer_idx: int, *, dtype: torch.dtype, device: torch.device | str,
                 sinks: bool = False, qk_norm: bool = False, parallel: ParallelContext = SINGLE) -> None:
        super().__init__()
        self.layer_idx = layer_idx
        self.parallel = parallel
        heads = parallel.shard(config.num_attention_heads, field="num_attention_heads", exact=True)
        kv_heads = parallel.kv_head_shard(config.num_attention_heads, config.num_key_value_heads)
        self.num_heads, self.num_kv_heads = heads.size, kv_heads.size
        self.head_dim = config.head_dim
        self.window = config.layer_window(layer_idx)  # the step passes it too, in its KV group's metadata (`kv.window`)
        self.scale = self.head_dim**-0.5
        self.kernels = "torch"  # "triton": the Triton kernels (set once at start-up by the runner)
        hidden, bias = config.hidden_size, config.attention_bias
        q_size, kv_size = self.num_heads * self.head_dim, self.num_kv_heads * self.head_dim
        kw = dict(bias=bias, dtype=dtype, device=device)

        def quant(proj: str):  # noqa: ANN202
            return linear_method(config, f"model.layers.{layer_idx}.self_attn.{proj}")

        methods = [quant(p) for p in ("q_proj", "k_proj", "v_proj")]
        sizes = [q_size, kv_size, kv_size]
        if all(m is None for m in methods):
            self.qkv_proj = FusedLinear(hidden, sizes, **kw)
            self.q_proj, self.k_proj, self.v_proj = (self.qkv_proj.part(i) for i in range(3))
        elif methods[0] is not None and all(m == methods[0] for m in methods) and methods[0].fusable(sizes):
            # one quantized GEMM (and one activation quantizer) for the three
            self.qkv_proj = FusedLinear(hidden, sizes, quant_method=methods[0], **kw)
            self.q_proj, self.k_proj, self.v_proj = (self.qkv_proj.part(i) for i in range(3))
        else:  # mixed or unfusable quantized projections: three GEMMs, their outputs side by side
            self.qkv_proj = None
            self.q_proj, self.k_proj, self.v_proj = (Linear(hidden, size, quant_method=quant(name), **kw)
                                                     for name, size in (("q_proj", q_size), ("k_proj", kv_size),
                                                                        ("v_proj", kv_size)))
        self.o_proj = Linear(q_size, hidden, quant_method=quant("o_proj"), **kw)
        q_rows, kv_rows = scaled(heads, self.head_dim), scaled(kv_heads, self.head_dim)
        for proj, rows in ((self.q_proj, q_rows), (self.k_proj, kv_rows), (self.v_proj, kv_rows)):
            column_parallel(proj, rows)
        row_parallel(self.o_proj, q_rows, parallel)
        self.q_norm = RMSNorm(self.head_dim, config.rms_norm_eps, device=device) if qk_norm else None
        self.k_norm = RMSNorm(self.head_dim, config.rms_norm_eps, device=device) if qk_norm else None
        if sinks:
            declare_weight(self, "sinks", (self.num_heads,), torch.float32, device, checkpoint_dtype=torch.bfloat16)
            narrow_param(self.sinks, 0, heads)
        else:
            self.register_buffer("sinks", torch.full((self.num_heads,), NO_SINK, device=device), persistent=False)

    def takes_fp8_hidden(self, hidden: torch.Tensor) -> bool:
        """Whether forward takes `hidden_fp8`: q, k and v are one FP8 GEMM that would quantize hidden itself."""
        return self.qkv_proj is not None and self.qkv_proj.takes_fp8_input(hidden)

    def _qkv(self, hidden: torch.Tensor, hidden_fp8: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        """[T, hidden] -> [T, (H + 2 KV) D]: the projections side by side (q and k not yet normalised: the
        attention op applies qk_norm, inside the decode kernel in a decode step)."""
        if self.qkv_proj is not None:
            return self.qkv_proj(hidden, hidden_fp8)
        return torch.cat([self.q_proj(hidden), self.k_proj(hidden), self.v_proj(hidden)], dim=-1)

    def forward(self, hidden: torch.Tensor, cos_sin_cache: torch.Tensor, k_cache: torch.Tensor,
                v_cache: torch.Tensor, kv: KVGroupMetadata, attn: AttentionMetadata,
                hidden_fp8: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        """hidden [T, hidden] -> [T, hidden]. This layer's paged caches [blocks, block_size, KV, D], its group's
        slots, block tables and window (`kv.window`, equal to `self.window` or 0 for full attention) and the shared
        RoPE table are arguments (not looked up by layer index), so one compiled graph serves sliding and full
        layers alike. hidden_fp8: hidden quantized to FP8 beside its norm, where `takes_fp8_hidden`."""
        num_tokens = hidden.shape[0]
        use_kernels = self.kernels == "triton"
        # q_norm and k_norm share an eps: the config's rms_norm_eps
        norm = (None, None, 0.0) if self.q_norm is None else (self.q_norm.weight, self.k_norm.weight, self.q_norm.eps)
        qkv = self._qkv(hidden, hidden_fp8)
        args = (qkv, attn.positions, cos_sin_cache, k_cache, v_cache, kv.slot_mapping, kv.block_tables,
                attn.cu_query_lens, attn.context_lens, self.sinks, kv.window, self.scale,
                self.num_heads, self.head_dim, use_kernels, *norm)
        q_width = self.num_heads * self.head_dim
        if use_kernels and self.o_proj.takes_fp8_input(qkv[:, :q_width]):  # an FP8 o_proj: quantized by the op
            out, out_q, out_scales = custom_ops.attention_fp8(*args)  # [T, H, D], [T, H D] e4m3, [T, H D / 128]
            return self.parallel.all_reduce(self.o_proj(out.view(num_tokens, -1), (out_q, out_scales)))
        out = custom_ops.attention(*args)  # [T, H, D]; K, V cached
        out = out.view(num_tokens, -1)  # [T, H D]
        if self.o_proj.quant_method is None:  # the Triton GEMM in decode steps (see custom_ops.decode_linear)
            out = custom_ops.decode_linear(out, self.o_proj.weight, self.o_proj.bias, attn.context_lens, use_kernels)
        else:
            out = self.o_proj(out)
        return self.parallel.all_reduce(out)
