"""The checkpoints and cases of the distributed tests: tiny gpt-oss (MXFP4 experts, sinks, attention biases,
sliding windows), Qwen3-MoE (q/k norms, a dense MLP layer, tied embeddings) and Mixtral, with a vocabulary the
ranks cannot split evenly, and KV heads fewer than 4 ranks (replicated)."""

from __future__ import annotations

VOCAB = 1030  # 4 ranks hold 258, 258, 257, 257 rows
SPECIAL = dict(vocab_size=VOCAB, eos_token_id=VOCAB - 2, pad_token_id=VOCAB - 1)

CHECKPOINTS = {
    # intermediate 128: 4 ranks x one 32-channel MXFP4 block each
    "gpt-oss": dict(preset="tiny", experts_dtype="mxfp4", layers=2, experts=4, hidden_size=64, intermediate_size=128,
                    num_experts_per_tok=2, sliding_window=8, num_attention_heads=4, num_key_value_heads=2,
                    head_dim=16, **SPECIAL),
    "qwen3": dict(preset="qwen3-moe-tiny", experts_dtype="bf16", layers=2, experts=8, hidden_size=64, head_dim=16,
                  intermediate_size=96, moe_intermediate_size=32, mlp_only_layers=[1], tie_word_embeddings=True,
                  **SPECIAL),
    "mixtral": dict(preset="mixtral-tiny", experts_dtype="bf16", layers=2, experts=4, hidden_size=64,
                    intermediate_size=96, **SPECIAL),
}
# with 2 ranks only: FP8 experts and dense layers (every rank holds whole 128-wide FP8 blocks), NVFP4 experts, and
# gpt-oss's bf16 experts (stored in x out: their slices are columns of the checkpoint tensors)
QUANTIZED = {
    "gpt-oss-bf16": dict(preset="tiny", experts_dtype="bf16", layers=2, experts=4, hidden_size=64,
                         intermediate_size=64, num_experts_per_tok=2, num_attention_heads=4, num_key_value_heads=2,
                         head_dim=16, **SPECIAL),
    "qwen3-fp8": dict(preset="qwen3-moe-tiny", experts_dtype="fp8", layers=2, experts=4, hidden_size=128, head_dim=128,
                      num_attention_heads=4, num_key_value_heads=2, intermediate_size=256, moe_intermediate_size=256,
                      mlp_only_layers=[1], **SPECIAL),
    "mixtral-nvfp4": dict(preset="mixtral-tiny", experts_dtype="nvfp4", layers=2, experts=4, hidden_size=64,
                          intermediate_size=96, **SPECIAL),
}
# the MoE Triton kernels (in Triton's interpreter) on a split of 96 MXFP4 channels into 64 + 32 (2 ranks)
TRITON = {
    "gpt-oss-96": dict(preset="tiny", experts_dtype="mxfp4", layers=2, experts=4, hidden_size=64, intermediate_size=96,
                       num_experts_per_tok=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16, **SPECIAL),
}
PROMPT_LENGTHS = [5, 11, 3]
MAX_TOKENS = 5


def prompts(seed: int = 0) -> list[list[int]]:
    import torch

    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, VOCAB - 2, (n,), generator=g).tolist() for n in PROMPT_LENGTHS]


def cases(ckpts: dict, names: list[str], *, expert_parallel: bool, **engine) -> list[dict]:
    """`engine`: EngineConfig options of these cases (e.g. moe_kernels="triton")."""
    return [dict(name=f"{n}-{'ep' if expert_parallel else 'tp'}", model=str(ckpts[n]), prompts=prompts(),
                 max_tokens=MAX_TOKENS, expert_parallel=expert_parallel, engine=engine) for n in names]
