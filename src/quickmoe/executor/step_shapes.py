"""The shapes of the warm-up steps: prefill-shaped steps the engine runs as idle work (engine/warmup_steps.py), and
whose kernels the start-up's precompile compiles beforehand (executor/kernel_precompile.py).

One prompt of 1,000 tokens (a row count that is not a multiple of 16, as most prompts'), then a mixed step of a
prompt chunk with 16 decode rows past the sliding window (1,024 rows: a multiple of 16, which Triton specializes
apart), each cut to the engine's limits.
"""

from __future__ import annotations

__all__ = ["DECODE_CONTEXT", "MIXED_DECODE_ROWS", "MIXED_STEP_TOKENS", "PROMPT_TOKENS", "warmup_step_shapes"]

PROMPT_TOKENS = 1000
MIXED_STEP_TOKENS = 1024
MIXED_DECODE_ROWS = 16
DECODE_CONTEXT = 200  # the decode rows' positions: past a 128-token sliding window


def warmup_step_shapes(max_num_batched_tokens: int, max_model_len: int,
                       max_num_seqs: int) -> list[list[tuple[int, int]]]:
    """Each step as a list of (start position, new tokens) per sequence, within the engine's limits."""
    prompt = min(PROMPT_TOKENS, max_num_batched_tokens, max_model_len)
    steps = [[(0, prompt)]]
    decodes = min(MIXED_DECODE_ROWS, max_num_seqs - 1, max_num_batched_tokens - 1)
    chunk = min(MIXED_STEP_TOKENS, max_num_batched_tokens, max_model_len) - decodes
    if decodes > 0 and chunk > 0:
        position = min(DECODE_CONTEXT, max_model_len - 1)
        steps.append([(0, chunk)] + [(position, 1)] * decodes)
    return steps
