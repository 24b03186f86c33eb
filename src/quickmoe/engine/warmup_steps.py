"""Warm-up steps: prefill-shaped model steps run as idle work, so that a request's first prefill does not wait
for kernels to compile.

The decode CUDA graphs compile what decode steps run, and the MoE warm-up (executor/kernel_warmup.py) the experts
of every batch size; what is left are the kernels only a prompt's step runs: prefill attention over a prompt and
over a context with decode rows beside it, RoPE with the KV write, the norms and the dense projections at
prefill row counts. On an empty kernel cache the H100 spent 3.4 s compiling them in the first 1,000-token step of
a server that had done all its other idle work. Each step here is a real `runner.execute` over KV blocks the
engine's block manager hands out (as a request's are) and returns at once, so a prefix cache keeps its blocks and
nothing a request holds is written. Its tokens are random and nothing is sampled.

The shapes (executor/step_shapes.py): one prompt of 1,000 tokens, then a mixed step of a prompt chunk with 16
decode rows past the sliding window, each cut to the engine's limits.
"""

from __future__ import annotations

import logging
import random
import time

from quickmoe.executor.step_shapes import warmup_step_shapes

__all__ = ["StepShapeWarmup", "warmup_step_shapes"]

logger = logging.getLogger(__name__)


class StepShapeWarmup:
    """The warm-up steps left to run (`warm_next`, one per call); none on a device that compiles nothing. It holds
    the engine's block manager and runner, not the engine (no reference cycle: an engine is freed when dropped,
    and with it a sharded runner's process group, before the interpreter's shutdown)."""

    def __init__(self, blocks, runner, *, vocab_size: int, max_num_batched_tokens: int, max_model_len: int,
                 max_num_seqs: int, enabled: bool) -> None:
        self.blocks, self.runner, self.vocab_size = blocks, runner, vocab_size
        self.pending = warmup_step_shapes(max_num_batched_tokens, max_model_len, max_num_seqs) if enabled else []
        self._rng = random.Random(0)

    def warm_next(self) -> bool:
        """Run the next warm-up step (queued on the device, not waited for); False when none is left. A step whose
        blocks the cache cannot give now is dropped (logged): warming must never take a request's room."""
        if not self.pending:
            return False
        shape = self.pending.pop(0)
        blocks, runner = self.blocks, self.runner
        seq_ids = [-1 - i for i in range(len(shape))]  # requests' ids count up from 0
        held = []
        try:
            for seq_id, (start, count) in zip(seq_ids, shape):
                if not blocks.try_allocate(seq_id, 0, start + count):
                    logger.info("warm-up step of %d tokens dropped: the KV cache has no room for it now",
                                sum(c for _, c in shape))
                    return True
                held.append(seq_id)
            token_ids = [[self._rng.randrange(self.vocab_size) for _ in range(count)] for _, count in shape]
            tables = blocks.step_block_tables(seq_ids)
            t0 = time.perf_counter()
            runner.execute(token_ids, [start for start, _ in shape], tables)
            logger.debug("warm-up step of %d tokens over %d sequences queued in %.3f s",
                         sum(c for _, c in shape), len(shape), time.perf_counter() - t0)
        finally:
            for seq_id in held:  # later steps write these blocks after this one, in stream order
                blocks.free(seq_id)
        return True
